from __future__ import annotations

from typing import Any

from addon_agent import status
from addon_api.conditions import condition


def dep(available: bool, generation: int = 1, observed: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"generation": generation},
        "status": {
            "observedGeneration": observed,
            "conditions": [{"type": "Available", "status": "True" if available else "False"}],
        },
    }


CRD = {"status": {"conditions": [{"type": "Established", "status": "True"}]}}


def phase(deployments: dict[str, Any], crds: dict[str, Any]) -> dict[str, Any]:
    return status.platform_status(
        generation=3, version="v1", deployments=deployments, crds=crds, warnings=[]
    )


def test_available_when_all_deployments_and_crds_ready() -> None:
    out = phase({"a": dep(True)}, {"x": CRD})
    assert out["phase"] == "Available"
    assert (out["readyComponents"], out["totalComponents"]) == (1, 1)
    assert out["observedGeneration"] == 3 and out["stackVersion"] == "v1"


def test_installing_when_missing_or_crd_not_established() -> None:
    assert phase({"a": None}, {"x": CRD})["phase"] == "Installing"
    assert phase({"a": dep(True)}, {"x": None})["phase"] == "Installing"


def rolled(available: bool, reason: str) -> dict[str, Any]:
    out = dep(available)
    out["status"]["conditions"].append({"type": "Progressing", "status": "True", "reason": reason})
    return out


def test_degraded_when_a_rolled_out_deployment_is_unavailable() -> None:
    assert phase({"a": dep(True), "b": rolled(False, "NewReplicaSetAvailable")}, {})["phase"] == (
        "Degraded"
    )
    deadline = rolled(False, "ProgressDeadlineExceeded")
    deadline["status"]["conditions"][-1]["status"] = "False"
    assert phase({"b": deadline}, {})["phase"] == "Degraded"


def test_installing_while_a_deployment_rolls_out() -> None:
    assert phase({"a": dep(True, generation=2, observed=1)}, {})["phase"] == "Installing"
    assert phase({"a": rolled(False, "ReplicaSetUpdated")}, {})["phase"] == "Installing"
    assert phase({"a": dep(False)}, {})["phase"] == "Installing"  # no Progressing yet


def test_condition_keeps_transition_time() -> None:
    old = [{"type": "Available", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]
    [cond] = status.conditions(condition("Available", True, "R", "m", previous=old))
    assert cond == {"type": "Available", "status": "True", "reason": "R", "message": "m",
                    "lastTransitionTime": "2020-01-01T00:00:00Z"}
    [flipped] = status.conditions(condition("Available", False, "R", "m", previous=old))
    assert flipped["lastTransitionTime"] != "2020-01-01T00:00:00Z"


def test_owning_platform_is_the_oldest() -> None:
    def sp(name: str, created: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "creationTimestamp": created}}

    assert status.owning_platform([]) is None
    items = [sp("b", "2026-01-02T00:00:00Z"), sp("a", "2026-01-03T00:00:00Z")]
    assert status.owning_platform(items) == "b"
    assert status.owning_platform([sp("z", "t"), sp("y", "t")]) == "y"


def test_runtime_errors_and_warnings_keep_the_phase_and_set_degraded() -> None:
    out = status.platform_status(
        generation=1,
        version="v1",
        deployments={"a": dep(True)},
        crds={},
        warnings=["a may run 3 replicas"],
        runtime_errors=["ClusterServingRuntime x: webhook unreachable"],
    )
    assert out["phase"] == "Available"
    assert "runtimes not applied: ClusterServingRuntime x: webhook unreachable" in out["message"]
    degraded = next(c for c in out["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "RuntimesNotApplied")
    warned = status.platform_status(
        generation=1, version="v1", deployments={"a": dep(True)}, crds={}, warnings=["w"]
    )
    degraded = next(c for c in warned["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ReplicasWarning")


def test_someone_elses_object_of_the_stack_keeps_it_from_being_available() -> None:
    out = status.platform_status(
        generation=1,
        version="v1",
        deployments={"a": dep(True)},
        crds={},
        warnings=[],
        conflicts=["ClusterRole kserve-proxy-role", "ConfigMap kserve/inferenceservice-config"],
    )
    assert (out["phase"], out["readyComponents"]) == ("Degraded", 1)
    assert out["message"].startswith(
        "not taken over (exist and are not the add-on's; the agent neither changes nor deletes "
        "them): ClusterRole kserve-proxy-role, ConfigMap kserve/inferenceservice-config")
    conds = {c["type"]: (c["status"], c["reason"]) for c in out["conditions"]}
    assert conds["Available"] == ("False", "ForeignObjectConflict")
    assert conds["Degraded"] == ("True", "ForeignObjectConflict")


def test_someone_elses_built_in_runtime_is_reported_but_the_stack_stays_available() -> None:
    out = status.platform_status(
        generation=1,
        version="v1",
        deployments={"a": dep(True)},
        crds={},
        warnings=[],
        runtime_conflicts=["ClusterServingRuntime triton-2.x"],
    )
    assert out["phase"] == "Available"
    assert "not taken over" in out["message"] and "ClusterServingRuntime triton-2.x" in (
        out["message"])
    degraded = next(c for c in out["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ForeignObjectConflict")
