"""The add-on's registration written by the manager from a ConfigMap (an OLM install).

The pure checks of what the ConfigMap may hold, and :func:`addonregistration.apply` against a small
in-memory stand-in for the two API clients it calls. The real hub is in
tests/integration/test_olm_bundle.py.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from addon_manager.shell import addonregistration, keeping
from addon_manager.shell.main import parse_args

API = "addon.open-cluster-management.io/v1alpha1"
MANAGED, MANAGER = "app.kubernetes.io/managed-by", keeping.MANAGED_BY
CMA = {"apiVersion": API, "kind": "ClusterManagementAddOn",
       "metadata": {"name": "model-serving", "labels": {"helm.sh/chart": "x-1"},
                    "annotations": {"addon.open-cluster-management.io/lifecycle":
                                    "addon-manager"}},
       "spec": {"supportedConfigs": [
           {"group": "addon.open-cluster-management.io", "resource": "addontemplates",
            "defaultConfig": {"name": "model-serving-0.1.0"}},
           {"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs",
            "defaultConfig": {"name": "model-serving-defaults",
                              "namespace": "model-serving-system"}}]}}
TEMPLATE = {"apiVersion": API, "kind": "AddOnTemplate",
            "metadata": {"name": "model-serving-0.1.0"},
            "spec": {"addonName": "model-serving", "agentSpec": {"workload": {"manifests": []}}}}


def data(*objs: Any) -> dict[str, str]:
    return {addonregistration.SOURCE_KEY: yaml.safe_dump_all(objs)}


def test_the_registration_is_read_with_the_cluster_management_addon_first() -> None:
    objs = addonregistration.source_objects(data(TEMPLATE, CMA), "reg")
    assert [o["kind"] for o in objs] == ["ClusterManagementAddOn", "AddOnTemplate"]


@pytest.mark.parametrize(("objs", "message"), [
    ((CMA, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "everything"}}),
     "object 2: ClusterRole is not part of a registration"),
    (({**CMA, "metadata": {"name": "other-addon"}},), "ClusterManagementAddOn 'other-addon'"),
    ((CMA, CMA), "needs exactly one ClusterManagementAddOn"),
    ((TEMPLATE,), "needs exactly one ClusterManagementAddOn"),
    ((CMA, {**TEMPLATE, "spec": {"addonName": "other-addon"}}), "is not for add-on"),
    ((CMA, {**TEMPLATE, "metadata": {"name": "t", "namespace": "x"}}), "cluster-scoped"),
    (({**CMA, "apiVersion": "addon.open-cluster-management.io/v1beta1"},), "apiVersion"),
    ((CMA, ["a list"]), "object 2: list is not part of a registration"),
])
def test_anything_but_this_addons_registration_is_refused_naming_it(
        objs: tuple[Any, ...], message: str) -> None:
    with pytest.raises(addonregistration.SourceError, match=message):
        addonregistration.source_objects(data(*objs), "reg")


def test_a_missing_key_or_text_that_is_not_yaml_is_refused() -> None:
    with pytest.raises(addonregistration.SourceError, match="ConfigMap reg has no key"):
        addonregistration.source_objects({"other": ""}, "reg")
    with pytest.raises(addonregistration.SourceError, match="not YAML"):
        addonregistration.source_objects({addonregistration.SOURCE_KEY: "a: [b"}, "reg")


def test_desired_labels_it_and_points_the_default_config_at_the_managers_namespace() -> None:
    want = addonregistration.desired(CMA, "olm-ns")
    assert want["metadata"]["labels"] == {"helm.sh/chart": "x-1", MANAGED: MANAGER}
    configs = {c["resource"]: c["defaultConfig"] for c in want["spec"]["supportedConfigs"]}
    assert configs["addondeploymentconfigs"] == {"name": "model-serving-defaults",
                                                 "namespace": "olm-ns"}
    assert configs["addontemplates"] == {"name": "model-serving-0.1.0"}
    assert CMA["spec"]["supportedConfigs"][1]["defaultConfig"]["namespace"] == (
        "model-serving-system")  # the source is left as it was


class FakeApi:
    """The ConfigMap read and the cluster-scoped custom objects the manager writes."""

    def __init__(self, configmap: dict[str, str] | None) -> None:
        self.configmap = configmap
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes: list[tuple[str, str, str]] = []
        self.conflicts = 0

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        assert plural == "configmaps"
        if self.configmap is None:
            raise ApiException(status=404)
        return {"data": self.configmap}

    def get_cluster_custom_object(self, group: str, version: str, plural: str,
                                  name: str) -> dict[str, Any]:
        if (plural, name) not in self.objects:
            raise ApiException(status=404)
        return copy.deepcopy(self.objects[(plural, name)])

    def create_cluster_custom_object(self, group: str, version: str, plural: str,
                                     body: dict[str, Any]) -> None:
        self.writes.append(("create", plural, body["metadata"]["name"]))
        self.objects[(plural, body["metadata"]["name"])] = copy.deepcopy(body)

    def replace_cluster_custom_object(self, group: str, version: str, plural: str, name: str,
                                      body: dict[str, Any]) -> None:
        if self.conflicts:
            self.conflicts -= 1
            raise ApiException(status=409)
        self.writes.append(("replace", plural, name))
        self.objects[(plural, name)] = copy.deepcopy(body)


def test_apply_creates_then_leaves_alone_then_puts_back_what_drifted() -> None:
    api = FakeApi(data(TEMPLATE, CMA))
    assert addonregistration.apply(api, api, "olm-ns", "reg")
    assert api.writes == [("create", "clustermanagementaddons", "model-serving"),
                          ("create", "addontemplates", "model-serving-0.1.0")]
    assert addonregistration.apply(api, api, "olm-ns", "reg")
    assert len(api.writes) == 2  # nothing differs: no write
    live = api.objects[("addontemplates", "model-serving-0.1.0")]
    live["spec"]["agentSpec"] = {"workload": {"manifests": [{"kind": "Pod"}]}}
    live["metadata"]["labels"]["someone"] = "else"
    api.conflicts = 1  # someone else wrote it meanwhile: read again, write again
    assert addonregistration.apply(api, api, "olm-ns", "reg")
    assert api.writes[2:] == [("replace", "addontemplates", "model-serving-0.1.0")]
    kept = api.objects[("addontemplates", "model-serving-0.1.0")]
    assert kept["spec"] == TEMPLATE["spec"]
    assert kept["metadata"]["labels"] == {"someone": "else", MANAGED: MANAGER}


def test_apply_writes_nothing_from_a_missing_or_wrong_configmap() -> None:
    missing = FakeApi(None)
    assert not addonregistration.apply(missing, missing, "olm-ns", "reg")
    wrong = FakeApi(data(CMA, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}))
    assert not addonregistration.apply(wrong, wrong, "olm-ns", "reg")
    assert missing.writes == wrong.writes == []


def test_the_manager_takes_the_registration_source_flag() -> None:
    args = parse_args(["--registration-source", "model-serving-registration"])
    assert args.registration_source == "model-serving-registration"
    assert parse_args([]).registration_source == ""


def test_apply_gives_up_after_a_few_conflicts_and_says_so() -> None:
    api = FakeApi(data(CMA))
    assert addonregistration.apply(api, api, "olm-ns", "reg")
    api.objects[("clustermanagementaddons", "model-serving")]["spec"] = {}
    api.conflicts = 100  # someone else writes it all the time
    assert not addonregistration.apply(api, api, "olm-ns", "reg")
    assert api.conflicts == 100 - keeping.ATTEMPTS
