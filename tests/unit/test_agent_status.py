from __future__ import annotations

from typing import Any

import pytest

from addon_agent.pure import status
from addon_api.conditions import condition
from addon_api.reasons import SealedReason
from addon_api.reasons import ServingPlatformPhase as Phase
from addon_api.reasons import ServingPlatformReason as Reason
from addon_api.spoke import SealedStorageConnectionStatus, ServingPlatformStatus


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
    ).to_patch()


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
    cond = condition("Available", True, "R", "m", previous=old).to_dict()
    assert cond == {"type": "Available", "status": "True", "reason": "R", "message": "m",
                    "lastTransitionTime": "2020-01-01T00:00:00Z"}
    flipped = condition("Available", False, "R", "m", previous=old).to_dict()
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
    ).to_patch()
    assert out["phase"] == "Available"
    assert "runtimes not applied: ClusterServingRuntime x: webhook unreachable" in out["message"]
    degraded = next(c for c in out["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "RuntimesNotApplied")
    warned = status.platform_status(
        generation=1, version="v1", deployments={"a": dep(True)}, crds={}, warnings=["w"]
    ).to_patch()
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
    ).to_patch()
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
    ).to_patch()
    assert out["phase"] == "Available"
    assert "not taken over" in out["message"] and "ClusterServingRuntime triton-2.x" in (
        out["message"])
    degraded = next(c for c in out["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ForeignObjectConflict")


# The status models as the agent writes them (ServingPlatformStatus, SealedStorageConnectionStatus)


def test_platform_status_is_the_model_and_patches_every_field() -> None:
    out = status.platform_status(
        generation=3, version="v1", deployments={"a": dep(True)}, crds={}, warnings=[]
    )
    assert isinstance(out, ServingPlatformStatus) and out.phase is Phase.AVAILABLE
    patch = out.to_patch()
    assert set(patch) == {"phase", "message", "observedGeneration", "readyComponents",
                          "totalComponents", "stackVersion", "targetVersion", "conditions"}
    assert patch["phase"] == "Available" and type(patch["phase"]) is str
    assert patch["targetVersion"] == ""  # written: clears an upgrade's target once done
    assert [c["type"] for c in patch["conditions"]] == ["Available", "Progressing", "Degraded"]
    assert {c["reason"] for c in patch["conditions"]} == {"AllComponentsAvailable"}
    assert ServingPlatformStatus.from_object(patch) == out  # what kopf reads back


def test_simple_status_leaves_the_stack_version_as_stored() -> None:
    out = status.simple_status(Phase.REMOVING, Reason.REMOVING, "x" * 2000, 4)
    patch = out.to_patch()
    assert "stackVersion" not in patch  # a merge patch keeps the last reported version
    assert out.to_dict()["stackVersion"] == ""
    assert (patch["phase"], patch["readyComponents"], len(patch["message"])) == (
        "Removing", 0, status.MAX_MESSAGE)
    conds = {c["type"]: (c["status"], c["reason"]) for c in patch["conditions"]}
    assert conds == {"Available": ("False", "Removing"), "Progressing": ("True", "Removing"),
                     "Degraded": ("False", "Removing")}
    blocked = status.simple_status(
        Phase.REMOVAL_BLOCKED, Reason.FOREIGN_OBJECTS_PRESENT, "m", 4).to_patch()
    assert blocked["conditions"][2] | {"lastTransitionTime": ""} == {
        "type": "Degraded", "status": "True", "reason": "ForeignObjectsPresent", "message": "m",
        "lastTransitionTime": ""}


def test_simple_status_keeps_transition_times_of_the_previous_conditions() -> None:
    first = status.simple_status(Phase.INSTALLING, Reason.INSTALLING, "m", 1)
    again = status.simple_status(
        Phase.INSTALLING, Reason.INSTALLING, "n", 2, first.to_patch()["conditions"])
    assert [c.last_transition_time for c in again.conditions] == [
        c.last_transition_time for c in first.conditions]


@pytest.mark.parametrize(
    ("reason", "phase", "delivered"),
    [
        (SealedReason.DELIVERED, "Delivered", "True"),
        (SealedReason.NAMESPACE_MISSING, "Pending", "False"),
        (SealedReason.NAMESPACE_TERMINATING, "Pending", "False"),
        (SealedReason.KEY_MISMATCH, "Failed", "False"),
        (SealedReason.SEAL_REPLAYED, "Failed", "False"),
        (SealedReason.NAMESPACE_NOT_ALLOWED, "Failed", "False"),
    ],
)
def test_sealed_status_phase_and_conditions_follow_the_reason(
    reason: SealedReason, phase: str, delivered: str
) -> None:
    out = status.sealed_status(reason, "m" * 5000, 7)
    assert isinstance(out, SealedStorageConnectionStatus)
    patch = out.to_patch()
    assert (patch["phase"], patch["observedGeneration"], len(patch["message"])) == (
        phase, 7, status.MAX_MESSAGE)
    conds = {c["type"]: (c["status"], c["reason"]) for c in patch["conditions"]}
    degraded = "False" if delivered == "True" else "True"
    assert conds == {"Delivered": (delivered, str(reason)), "Degraded": (degraded, str(reason))}
    assert SealedStorageConnectionStatus.from_object(patch) == out


def test_an_upgrade_waiting_for_its_controllers_says_from_where_to_where() -> None:
    out = status.upgrading_status(
        generation=4, source="v0.17.0", target="v0.20.0",
        message="upgrading KServe v0.17.0 -> v0.20.0: CRDs applied; waiting for a",
        deployments={"a": dep(True)},
    )
    assert (out.phase, out.stack_version, out.target_version) == (
        Phase.UPGRADING, "v0.17.0", "v0.20.0")
    conds = {c.type: (c.status, c.reason) for c in out.conditions}
    assert conds == {"Available": ("True", "UpgradingControllers"),
                     "Progressing": ("True", "UpgradingControllers"),
                     "Degraded": ("False", "UpgradingControllers")}
    # the old controller gone and the new one not yet up: not Available meanwhile
    down = status.upgrading_status(generation=4, source="v0.17.0", target="v0.20.0",
                                   message="m", deployments={"a": dep(False)})
    assert {c.type: c.status for c in down.conditions}["Available"] == "False"


def test_a_rollout_is_done_when_every_replica_is_new_and_available() -> None:
    done = dep(True)
    done["spec"] = {"replicas": 1}
    done["status"].update(replicas=1, updatedReplicas=1)
    assert status.deployment_rolled_out(done)
    surge = {**done, "status": {**done["status"], "replicas": 2}}  # the old pod still there
    assert not status.deployment_rolled_out(surge)
    assert not status.deployment_rolled_out(dep(False)) and not status.deployment_rolled_out(None)


def test_kept_namespaces_are_named_with_a_count_and_their_first_objects() -> None:
    """Issue 29, item 9: the namespaces the agent kept reach the status, bounded."""
    entries, line = status.kept_namespaces({
        "team-a": ["PersistentVolumeClaim team-a/data", "Job team-a/train"],
        "team-b": ["Backup team-b/* (the agent may not list them)"],
        "empty": [],
    })
    assert [e.to_dict() for e in entries] == [
        {"name": "team-a", "objects": 2,
         "holds": ["Job team-a/train", "PersistentVolumeClaim team-a/data"]},
        {"name": "team-b", "objects": 1,
         "holds": ["Backup team-b/* (the agent may not list them)"]},
    ]
    assert line == ("namespace team-a kept: holds Job team-a/train (1 more); namespace team-b "
                    "kept: holds Backup team-b/* (the agent may not list them)")
    assert status.kept_namespaces({}) == ([], "")


def test_many_kept_namespaces_and_hostile_names_stay_short_and_inert() -> None:
    held = {f"ns-{i:02}": [f"ConfigMap ns-{i:02}/{'x' * 300}\x1b[31m\u202e{j}" for j in range(50)]
            for i in range(40)}
    entries, line = status.kept_namespaces(held)
    assert len(entries) == 16 and entries[0].name == "ns-00" and entries[0].objects == 50
    assert all(len(e.holds) == 3 and all(len(h) <= 256 for h in e.holds) for e in entries)
    assert len(line) <= status.MAX_LEFTOVERS and line.endswith(" [truncated]")
    assert "\x1b" not in line and "\u202e" not in line
    assert all("\x1b" not in h for e in entries for h in e.holds)
    few = status.kept_namespaces({f"n{i}": ["ConfigMap n/c"] for i in range(5)})[1]
    assert few.endswith("; 2 more namespaces kept")


def test_a_status_with_nothing_kept_clears_what_an_earlier_one_named() -> None:
    base = status.simple_status(Phase.AVAILABLE, Reason.ALL_COMPONENTS_AVAILABLE, "ok", 1)
    assert "leftovers" not in base.to_patch()  # other writers leave the fields as they are
    cleared = status.with_kept(base, {}).to_patch()
    assert (cleared["keptNamespaces"], cleared["leftovers"]) == ([], "")
    named = status.with_kept(base, {"team-a": ["PersistentVolumeClaim team-a/data"]}).to_patch()
    assert named["leftovers"] == "namespace team-a kept: holds PersistentVolumeClaim team-a/data"
    assert named["keptNamespaces"] == [
        {"name": "team-a", "objects": 1, "holds": ["PersistentVolumeClaim team-a/data"]}]
    assert named["phase"] == "Available"  # the stack is fine: the phase is not touched
