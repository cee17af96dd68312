"""The add-on's default AddOnDeploymentConfig, owned by the manager alone.

:mod:`addon_manager.shell.addonconfig` writes it from the chart's ConfigMap and the manager's
verify key; nothing else writes it, so a ``helm upgrade`` cannot take the key away.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from addon_api import constants as c
from addon_manager.shell import addonconfig, keeping

NS, NAME, SOURCE = "model-serving-system", "model-serving-defaults", "model-serving-agent-config"
SPEC = {"agentInstallNamespace": "agents",
        "customizedVariables": [{"name": "LOG_LEVEL", "value": "INFO"}],
        "resourceRequirements": [{"containerID": "deployments:model-serving-agent:agent",
                                  "resources": {"limits": {"memory": "512Mi"}}}]}
CMA = {"name": c.ADDON_NAME, "uid": "cma-uid"}


class FakeHub:
    """The ConfigMap, the ClusterManagementAddOn and the AddOnDeploymentConfig; counts writes."""

    def __init__(self, spec: dict[str, Any] | None = None) -> None:
        self.data: dict[str, str] | None = (
            {addonconfig.SOURCE_KEY: yaml.safe_dump(spec or SPEC)})
        self.adc: dict[str, Any] | None = None
        self.writes = 0
        self.version = 0

    # CoreV1 (addon_manager.shell.corev1)
    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        if self.data is None or (plural, name, namespace) != ("configmaps", SOURCE, NS):
            raise ApiException(status=404)
        return {"data": self.data}

    # CustomObjectsApi
    def get_cluster_custom_object(self, group: str, version: str, plural: str,
                                  name: str) -> dict[str, Any]:
        assert (plural, name) == ("clustermanagementaddons", c.ADDON_NAME)
        return {"metadata": dict(CMA)}

    def get_namespaced_custom_object(self, group: str, version: str, namespace: str,
                                     plural: str, name: str) -> dict[str, Any]:
        if self.adc is None:
            raise ApiException(status=404)
        return copy.deepcopy(self.adc)

    def _store(self, body: dict[str, Any]) -> dict[str, Any]:
        self.writes += 1
        self.version += 1
        self.adc = copy.deepcopy(body)
        self.adc["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.adc)

    def create_namespaced_custom_object(self, group: str, version: str, namespace: str,
                                        plural: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.adc is not None:
            raise ApiException(status=409)
        return self._store(body)

    def replace_namespaced_custom_object(self, group: str, version: str, namespace: str,
                                         plural: str, name: str,
                                         body: dict[str, Any]) -> dict[str, Any]:
        assert self.adc is not None
        if body["metadata"]["resourceVersion"] != self.adc["metadata"]["resourceVersion"]:
            raise ApiException(status=409)
        return self._store(body)


def publish(hub: FakeHub, key: str = "KEY") -> bool:
    return addonconfig.publish(hub, hub, NS, NAME, SOURCE, key)


def variables(hub: FakeHub) -> dict[str, str]:
    assert hub.adc is not None
    return {v["name"]: v["value"] for v in hub.adc["spec"]["customizedVariables"]}


def test_the_manager_makes_it_from_the_charts_configmap_and_its_key_then_writes_nothing() -> None:
    hub = FakeHub()
    assert publish(hub) and hub.writes == 1
    assert hub.adc is not None
    assert variables(hub) == {"LOG_LEVEL": "INFO", "SEAL_VERIFY_KEY": "KEY"}
    assert hub.adc["spec"]["agentInstallNamespace"] == "agents"
    assert hub.adc["spec"]["resourceRequirements"] == SPEC["resourceRequirements"]
    assert hub.adc["metadata"]["ownerReferences"] == [{
        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "ClusterManagementAddOn", "name": c.ADDON_NAME, "uid": "cma-uid"}]
    assert hub.adc["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": keeping.MANAGED_BY}
    for _ in range(3):  # the minute's republish, a restart: nothing to write
        assert publish(hub)
    assert hub.writes == 1


def test_a_changed_value_is_written_beside_the_key_and_a_removed_key_comes_back() -> None:
    hub = FakeHub()
    publish(hub)
    hub.data = {addonconfig.SOURCE_KEY: yaml.safe_dump(
        {**SPEC, "customizedVariables": [{"name": "LOG_LEVEL", "value": "DEBUG"}]})}
    assert publish(hub) and hub.writes == 2
    assert variables(hub) == {"LOG_LEVEL": "DEBUG", "SEAL_VERIFY_KEY": "KEY"}
    assert hub.adc is not None
    hub.adc["spec"]["customizedVariables"] = [{"name": "LOG_LEVEL", "value": "DEBUG"}]
    assert publish(hub) and hub.writes == 3
    assert variables(hub)["SEAL_VERIFY_KEY"] == "KEY"
    hub.adc = None  # deleted by someone: made again
    assert publish(hub) and variables(hub)["SEAL_VERIFY_KEY"] == "KEY"


def test_someone_elses_edit_or_label_is_put_back_and_theirs_kept() -> None:
    hub = FakeHub()
    publish(hub)
    assert hub.adc is not None
    hub.adc["metadata"]["labels"] = {"team": "platform"}
    assert publish(hub) and hub.writes == 2
    assert hub.adc["metadata"]["labels"] == {
        "team": "platform", "app.kubernetes.io/managed-by": keeping.MANAGED_BY}


@pytest.mark.parametrize("data, reason", [
    (None, "404"),
    ({}, "has no key spec.yaml"),
    ({addonconfig.SOURCE_KEY: "- a list"}, "not a mapping"),
])
def test_a_missing_or_wrong_configmap_writes_nothing_and_says_why(
        data: dict[str, str] | None, reason: str, caplog: pytest.LogCaptureFixture) -> None:
    hub = FakeHub()
    hub.data = data
    assert not publish(hub)
    assert hub.writes == 0 and hub.adc is None
    assert reason in caplog.text and SOURCE in caplog.text


def test_desired_is_pure_and_keeps_the_admins_spec_unchanged() -> None:
    spec = copy.deepcopy(SPEC)
    out = addonconfig.desired(spec, "K", NS, NAME, None)
    assert spec == SPEC  # not mutated
    assert "ownerReferences" not in out["metadata"]  # no registration: no owner
    assert not addonconfig.differs(out, addonconfig.desired(SPEC, "K", NS, NAME, None))
    assert addonconfig.differs(out, addonconfig.desired(SPEC, "K2", NS, NAME, None))
