"""The stack versions the agent carries, and how a version change is ordered."""

from __future__ import annotations

import pytest

from addon_agent import labels as lb
from addon_agent import stacks
from addon_agent.pure import planning
from addon_api.platform import PlatformSettings


def test_the_agent_carries_the_previous_and_the_current_kserve_pin() -> None:
    assert stacks.KSERVE.versions == ("v0.17.0", "v0.20.0")
    assert stacks.KSERVE.version == stacks.KSERVE_VERSION == "v0.20.0"
    assert stacks.select("KServe", None) is stacks.KSERVE
    assert stacks.select("KServe", "v0.17.0").version == "v0.17.0"
    assert stacks.select("ModelMesh", None).version == "v0.12.0"
    assert [(s.platform, s.version) for s in stacks.CARRIED] == [
        ("KServe", "v0.17.0"), ("KServe", "v0.20.0"), ("ModelMesh", "v0.12.0")]


def test_a_version_not_carried_is_refused_naming_those_that_are() -> None:
    with pytest.raises(stacks.UnknownVersion) as err:
        stacks.select("KServe", "v0.19.0")
    assert str(err.value) == (
        "KServe v0.19.0 is not a version this agent carries; it has v0.17.0, v0.20.0")
    with pytest.raises(stacks.UnknownVersion, match=r"it has v0\.12\.0"):
        stacks.select("ModelMesh", "v0.20.0")


def test_releases_compare_as_numbers_and_custom_bundles_have_none() -> None:
    assert stacks.release("v0.20.0") > stacks.release("v0.17.0") > stacks.release("v0.9.9")
    assert stacks.release("custom") == () and stacks.release("") == ()


def test_the_version_field_takes_a_release_only() -> None:
    assert PlatformSettings.model_validate({"version": "v0.17.0"}).version == "v0.17.0"
    assert PlatformSettings.model_validate({}).version is None
    for bad in ("0.17.0", "latest", "v0.17", "v0.17.0-rc1"):
        with pytest.raises(ValueError, match="version"):
            PlatformSettings.model_validate({"version": bad})


def _obj(kind: str, platform: str = "KServe", version: str = "v0.17.0",
         ours: bool = True) -> dict[str, object]:
    labels = {**(lb.ours() if ours else {}), lb.LABEL_PLATFORM: platform,
              lb.LABEL_STACK_VERSION: version}
    return {"kind": kind, "metadata": {"name": "x", "labels": labels}}


def test_a_version_change_applies_crds_and_controllers_before_the_configuration() -> None:
    first = {k for k in ("CustomResourceDefinition", "Namespace", "ServiceAccount",
                         "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service",
                         "Secret", "Certificate", "Issuer", "Deployment")
             if planning.upgrade_first(_obj(k))}
    assert len(first) == 12
    later = [k for k in ("ConfigMap", "ValidatingWebhookConfiguration",
                         "MutatingWebhookConfiguration", "ClusterServingRuntime",
                         "ClusterStorageContainer", "NetworkPolicy")
             if planning.upgrade_first(_obj(k))]
    assert later == []


def test_the_version_an_object_came_from_is_read_from_the_agents_labels_only() -> None:
    assert planning.version_of(_obj("Deployment"), "KServe") == "v0.17.0"
    assert planning.version_of(_obj("Deployment", platform="ModelMesh"), "KServe") == ""
    assert planning.version_of(_obj("Deployment", ours=False), "KServe") == ""
    assert planning.version_of(None, "KServe") == ""
