"""Whose KServe a cluster runs, and what Unmanaged reports about someone else's."""

from __future__ import annotations

from typing import Any

import pytest

from addon_agent import labels as lb
from addon_agent.pure import ownership
from addon_agent.stacks import KSERVE
from addon_api.reasons import ServingPlatformPhase as Phase
from addon_api.reasons import ServingPlatformReason as Reason

CRD = "inferenceservices.serving.kserve.io"


def _obj(kind: str, name: str, namespace: str = "", **meta: Any) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, **({"namespace": namespace}
                                                         if namespace else {}), **meta}}


def _controller(namespace: str = "odh", image: str = "quay.io/kserve/kserve-controller:v0.20.0",
                available: bool = True, **meta: Any) -> dict[str, Any]:
    dep = _obj("Deployment", KSERVE.controller, namespace, generation=1, **meta)
    dep["spec"] = {"replicas": 1, "template": {"spec": {"containers": [
        {"name": "manager", "image": image}]}}}
    dep["status"] = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                     "availableReplicas": 1 if available else 0,
                     "conditions": [{"type": "Available",
                                     "status": "True" if available else "False"}]}
    return dep


@pytest.mark.parametrize("meta, owner, says", [
    ({"ownerReferences": [{"kind": "DataScienceCluster", "name": "default-dsc"}]},
     "DataScienceCluster default-dsc", "is owned by DataScienceCluster default-dsc"),
    ({"labels": {"app.kubernetes.io/managed-by": "opendatahub-operator"}},
     "opendatahub-operator", "label app.kubernetes.io/managed-by=opendatahub-operator"),
    ({"labels": {"operators.coreos.com/rhods-operator.redhat-ods-operator": ""}},
     "rhods-operator", "OLM label"),
    ({"managedFields": [{"manager": "opendatahub-operator", "operation": "Apply"}]},
     "opendatahub-operator", "fields managed by opendatahub-operator"),
])
def test_another_managers_mark_is_found_and_named(meta: dict[str, Any], owner: str,
                                                   says: str) -> None:
    mark = ownership.mark_of(_obj("CustomResourceDefinition", CRD, **meta))
    assert mark is not None and mark.owner == owner
    assert says in mark.evidence and f"CustomResourceDefinition {CRD}" in mark.evidence


@pytest.mark.parametrize("meta", [
    {},  # a user's kubectl install: nobody's mark
    {"managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update"},
                       {"manager": "kube-controller-manager", "operation": "Update",
                        "subresource": "status"}]},
    {"managedFields": [{"manager": "some-operator", "subresource": "status"}]},
    {"labels": lb.ours()},  # the agent's own
    {"labels": lb.ours(), "ownerReferences": [{"kind": "X", "name": "y"}]},
])
def test_no_mark_on_the_agents_own_or_an_unmarked_object(meta: dict[str, Any]) -> None:
    assert ownership.mark_of(_obj("Deployment", "d", "ns", **meta)) is None


def test_the_installation_is_found_in_any_namespace_with_its_config() -> None:
    found = ownership.installation(
        KSERVE, [_obj("CustomResourceDefinition", CRD), _obj("CustomResourceDefinition", "x")],
        [_controller("odh"), _obj("Deployment", "other", "odh")],
        [_obj("ConfigMap", "inferenceservice-config", "odh",
              labels={"app.kubernetes.io/managed-by": "opendatahub-operator"}),
         _obj("ConfigMap", "inferenceservice-config", "elsewhere")])
    assert found.crd is not None and len(found.controllers) == 1
    assert found.config is not None and found.config["metadata"]["namespace"] == "odh"
    mark = found.owner()
    assert mark is not None and mark.owner == "opendatahub-operator"
    assert "ConfigMap odh/inferenceservice-config" in mark.evidence
    assert found.version() == "v0.20.0"


@pytest.mark.parametrize("labels, image, version", [
    ({"app.kubernetes.io/version": "v0.18.1"}, "img:latest", "v0.18.1"),
    ({}, "registry.example/kserve-controller:v0.19.2@sha256:" + "a" * 64, "v0.19.2"),
    ({}, "registry.example/kserve-controller:0.17.0", "v0.17.0"),
    ({}, "registry.example/kserve-controller:latest", ""),
])
def test_the_controller_version_comes_from_its_label_or_image_tag(
    labels: dict[str, str], image: str, version: str,
) -> None:
    assert ownership.controller_version(_controller(image=image, labels=labels)) == version


def test_unmanaged_is_available_on_someone_elses_ready_kserve() -> None:
    found = ownership.installation(
        KSERVE, [_obj("CustomResourceDefinition", CRD)],
        [_controller(labels={"app.kubernetes.io/managed-by": "opendatahub-operator"})], [])
    check = ownership.unmanaged_status(found, 3, [])
    st = check.status
    assert (st.phase, st.stack_version, st.observed_generation) == (Phase.AVAILABLE, "v0.20.0", 3)
    assert (st.ready_components, st.total_components) == (1, 1)
    assert "installed by opendatahub-operator" in st.message
    assert "Deployment odh/kserve-controller-manager" in st.message
    assert {c.type: (c.status, c.reason) for c in st.conditions}["Available"] == (
        "True", Reason.USING_EXISTING_STACK)
    assert check.components == {"Deployment odh/kserve-controller-manager": True}


def test_unmanaged_waits_for_the_controller_and_refuses_missing_or_old_stacks() -> None:
    crd = [_obj("CustomResourceDefinition", CRD)]
    waiting = ownership.unmanaged_status(
        ownership.installation(KSERVE, crd, [_controller(available=False)], []), 1, []).status
    assert (waiting.phase, waiting.conditions[0].reason) == (
        Phase.INSTALLING, Reason.WAITING_FOR_EXISTING_STACK)
    none = ownership.unmanaged_status(ownership.installation(KSERVE, [], [], []), 1, []).status
    assert none.phase == Phase.DEGRADED and none.conditions[0].reason == Reason.STACK_NOT_FOUND
    assert f"CRD {CRD} not found" in none.message
    no_controller = ownership.unmanaged_status(
        ownership.installation(KSERVE, crd, [], []), 1, []).status
    assert "a Deployment kserve-controller-manager in any namespace" in no_controller.message
    old = ownership.unmanaged_status(ownership.installation(
        KSERVE, crd, [_controller(image="kserve/kserve-controller:v0.14.1")], []), 1, []).status
    assert old.phase == Phase.DEGRADED and old.conditions[0].reason == Reason.UNSUPPORTED_VERSION
    assert "KServe v0.14.1 is older than the add-on supports (v0.17.0 or newer)" in old.message


def test_the_refusal_names_the_owner_and_the_way_out() -> None:
    found = ownership.installation(KSERVE, [_obj(
        "CustomResourceDefinition", CRD,
        ownerReferences=[{"kind": "DataScienceCluster", "name": "default-dsc"}])], [], [])
    mark = found.owner()
    assert mark is not None
    st = ownership.refused_status(found, mark, 2, [])
    assert st.phase == Phase.DEGRADED
    assert st.conditions[0].reason == Reason.OWNED_BY_ANOTHER_OPERATOR
    assert st.message.startswith("KServe on this cluster is managed by DataScienceCluster "
                                 "default-dsc (CustomResourceDefinition " + CRD)
    assert "spec.managementState: Unmanaged" in st.message
