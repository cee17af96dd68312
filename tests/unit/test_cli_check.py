"""``model-serving-addon check``: each check's judgement (pure), and the command on a stand-in
hub (exit 1 only for a failed check; a refused read is UNKNOWN)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from addon_api import constants as c
from addon_cli import check
from addon_cli.hub import CliError

SERVED: dict[str, Any] = {**{gv: list(names) for gv, names in check.OCM_APIS.items()},
                          f"{c.GROUP}/{c.VERSION}": list(check.HUB_KINDS)}


def test_the_hub_version_must_be_at_least_the_charts() -> None:
    assert check.kubernetes("v1.34.12").state == "OK"
    assert check.kubernetes("v1.30.0-eks-1").state == "OK"
    old = check.kubernetes("v1.29.9")
    assert (old.state, old.seen) == ("FAIL", "v1.29.9, older than 1.30")
    assert check.kubernetes("weird").state == "UNKNOWN"


def test_apis_name_what_is_missing_and_who_installs_it() -> None:
    assert {x.state for x in check.apis(SERVED)} == {"OK"}
    broken = {**SERVED, "work.open-cluster-management.io/v1": check.Unreadable("404"),
              "addon.open-cluster-management.io/v1alpha1": ["managedclusteraddons"]}
    del broken[f"{c.GROUP}/{c.VERSION}"]
    bad = {x.name: x for x in check.apis(broken) if x.state != "OK"}
    assert bad["OCM API work.open-cluster-management.io/v1"].todo.startswith("install OCM")
    addon = bad["OCM API addon.open-cluster-management.io/v1alpha1"]
    assert addon.seen == ("missing addondeploymentconfigs, addontemplates, "
                          "clustermanagementaddons")
    assert bad["the add-on's hub CRDs"].todo.startswith("install the chart")


def test_the_executor_registration_manager_and_clusters_checks() -> None:
    schema = {"properties": {"spec": {"properties": {"executor": {}, "workload": {}}}}}
    assert check.executor(schema).state == "OK"
    assert check.executor({"properties": {"spec": {"properties": {}}}}).state == "FAIL"
    assert check.executor(check.Unreadable("refused")).state == "UNKNOWN"
    cma = {"metadata": {"labels": {"helm.sh/chart": "model-serving-addon-0.1.0"}}}
    assert check.registration(cma).seen == "chart model-serving-addon-0.1.0"
    assert check.registration(check.Unreadable("not found: x")).state == "FAIL"
    assert check.registration(check.Unreadable("the hub refused")).state == "UNKNOWN"
    seen = {"metadata": {"namespace": "a", "name": "x", "generation": 2},
            "status": {"observedGeneration": 2}}
    behind = {"metadata": {"namespace": "a", "name": "y", "generation": 3},
              "status": {"observedGeneration": 2}}
    assert check.manager([]).seen == "no intents yet"
    assert check.manager([seen]).state == "OK"
    assert check.manager([seen, behind]).seen == "1 of 2 not seen yet: a/y"

    def addon(cluster: str, status: str, reason: str = "") -> dict[str, Any]:
        return {"metadata": {"namespace": cluster}, "status": {"conditions": [
            {"type": "Available", "status": status, "reason": reason}]}}

    assert check.clusters([]).state == "WARN"
    assert check.clusters([addon("c1", "True")]).state == "OK"
    down = check.clusters([addon("c1", "True"), addon("c2", "False", "Lease expired")])
    assert (down.state, down.seen) == ("FAIL", "not available on 1 of 2: c2 (Lease expired)")
    assert check.failed([down]) and not check.failed([check.clusters([])])


class _Hub:
    def __init__(self, **broken: str) -> None:
        self.broken = broken

    def _maybe(self, what: str, value: Any) -> Any:
        if what in self.broken:
            raise CliError(4, self.broken[what])
        return value

    def server_version(self) -> str:
        return str(self._maybe("version", "v1.34.12"))

    def served(self, group_version: str) -> list[str]:
        return list(self._maybe(group_version, SERVED[group_version]))

    def work_schema(self) -> dict[str, Any]:
        return dict(self._maybe("schema", {"properties": {"spec": {"properties": {
            "executor": {}}}}}))

    def registration(self) -> dict[str, Any]:
        return dict(self._maybe("registration", {"metadata": {"labels": {}}}))

    def intents(self, kind: str, namespace: str | None) -> list[dict[str, Any]]:
        return []

    def addons(self) -> list[dict[str, Any]]:
        return list(self._maybe("addons", [{"metadata": {"namespace": "c1"}, "status": {
            "conditions": [{"type": "Available", "status": "True"}]}}]))


def test_the_command_exits_1_only_when_a_check_failed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from addon_cli import main as cli

    monkeypatch.setattr(cli, "_hub", lambda args: _Hub())
    assert cli.main(["check"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["STATE", "CHECK"]
    assert all(line.startswith("OK") for line in out[1:]), out
    # a viewer may not read the ManifestWork schema: UNKNOWN, still exit 0
    monkeypatch.setattr(cli, "_hub", lambda args: _Hub(schema="the hub refused"))
    assert cli.main(["check"]) == 0
    assert "UNKNOWN  ManifestWork executor" in capsys.readouterr().out
    # the chart is not installed: FAIL, exit 1, and what to do
    monkeypatch.setattr(cli, "_hub", lambda args: _Hub(registration="not found: cma"))
    assert cli.main(["check", "-o", "json"]) == 1
    checks = {x["name"]: x for x in json.loads(capsys.readouterr().out)["checks"]}
    assert checks[f"add-on registration (ClusterManagementAddOn {c.ADDON_NAME})"]["todo"] == (
        "install the chart (docs/hub-setup.md)")


def test_without_a_kubeconfig_in_a_pod_the_command_uses_its_service_account(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
) -> None:
    """`helm test` runs `check` in a pod: no kubeconfig, the pod's ServiceAccount instead;
    outside a pod a missing kubeconfig stays an error that says so."""
    from kubernetes import config

    from addon_cli import hub as hubmod

    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    used: list[str] = []

    def incluster(client_configuration: Any) -> None:
        used.append("in-cluster")
        client_configuration.host = "https://10.0.0.1:443"

    monkeypatch.setattr(config, "load_incluster_config", incluster)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(CliError, match="no usable kubeconfig"):
        hubmod.Hub()
    assert used == []
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert hubmod.Hub().host == "https://10.0.0.1:443" and used == ["in-cluster"]
    with pytest.raises(CliError):  # an explicit kubeconfig is never replaced
        hubmod.Hub(kubeconfig=str(tmp_path / "none"))
