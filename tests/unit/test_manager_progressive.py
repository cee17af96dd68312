"""A progressive rollout through the reconciler on the fake hub: revisions kept on the hub,
each cluster's work renders its revision, a failure rolls back, status and Events say so."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from addon_api import constants as c
from addon_manager.engine.rollout import MetricAnswer
from addon_manager.facts import naming, revisions
from addon_manager.shell.reconcile import Reconciler
from testbed.support.fake_hub import OPEN_POLICY, FakeHub
from testbed.support.sealing import memory_sealer
from tests.unit.test_manager_reconcile import isvc_body, platform_ready

KIND = c.KIND_INFERENCE_SERVICE
WORK = naming.work_name(KIND, "ns", "iris")
CLUSTERS = ("c1", "c2", "c3")


def body(hub: FakeHub, uri: str, generation: int, **rollout: Any) -> dict[str, Any]:
    out = isvc_body(hub.statuses.get("iris"), template={"predictor": {"model": {
        "modelFormat": {"name": "sklearn"}, "storageUri": uri}}},
        rollout={"strategy": "Progressive", "minSuccessTime": "0s", **rollout})
    out["metadata"] |= {"generation": generation, "uid": "uid-iris"}
    return out


def revisions_on(hub: FakeHub) -> dict[str, int | None]:
    return {cl: hub.works[(cl, WORK)].revision if (cl, WORK) in hub.works else None
            for cl in CLUSTERS}


def settle(hub: FakeHub, ready: bool = True, failed: str = "") -> None:
    """The work agents report: every work Ready, or ``failed`` failing to load its model."""
    for key, work in list(hub.works.items()):
        if work.kind != KIND:
            continue
        feedback: tuple[tuple[str, Any], ...] = (("ready", "True" if ready else "False"),)
        if work.cluster == failed:
            feedback = (("failureReason", "ModelLoadFailed"), ("failureMessage", "no such model"),
                        ("ready", "False"))
        # The object reported on carries the work's revision (the report is fresh).
        feedback = (*feedback, ("revision", str(work.revision)))
        hub.works[key] = replace(work, applied="True", available="True", feedback=feedback)


def step(reconciler: Reconciler, hub: FakeHub, b: dict[str, Any]) -> Any:
    b["status"] = hub.statuses.get("iris")
    return asyncio.run(reconciler.reconcile(KIND, b))


def test_a_change_reaches_one_cluster_at_a_time_then_a_bad_one_rolls_back() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset(CLUSTERS)})
    platform_ready(hub, *CLUSTERS)
    rec = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    good = "s3://models/v1"
    out = step(rec, hub, body(hub, good, 1))
    # Revision 1 is kept on the hub (owned by the intent), and only c1 gets it.
    [fact] = hub.revisions[(KIND, "ns", "iris")]
    assert [w for w in hub.writes if w[0] == "revision"] == [
        ("revision", f"ns/{fact.name}")]
    assert fact.name == revisions.sealed_name(rec.sealer.keys.hash_key, KIND, "ns", "iris",
                                              fact.spec)
    rev = next(iter(hub.revision_bodies.values()))
    assert rev["revision"] == 1 and rev["metadata"]["ownerReferences"][0]["uid"] == "uid-iris"
    assert revisions_on(hub) == {"c1": 1, "c2": None, "c3": None}
    status = hub.statuses["iris"]
    assert status["rollout"]["phase"] == "Progressing" and status["rollout"]["step"] == 1
    entries = {e["cluster"]: e for e in status["clusters"]}
    assert entries["c2"]["reason"] == "WaitingForRollout"
    assert [e[1] for e in out.events] == ["RolloutStep"]
    # c1 Ready: c2 next, then c3, then complete.
    for expected in ({"c1": 1, "c2": 1, "c3": None}, {"c1": 1, "c2": 1, "c3": 1}):
        settle(hub)
        step(rec, hub, body(hub, good, 1))
        assert revisions_on(hub) == expected
        roll = hub.statuses["iris"]["rollout"]
        # The new step's clock starts afresh (the merge patch nulls the last step's).
        assert "stepReadySince" not in roll and roll["stepStarted"]
    settle(hub)
    out = step(rec, hub, body(hub, good, 1))
    status = hub.statuses["iris"]
    assert (status["rollout"]["phase"], status["rollout"]["stableRevision"]) == ("Complete", 1)
    assert status["phase"] == "Ready"
    # Each cluster's entry says which revision its work renders.
    assert {e["cluster"]: e.get("revision") for e in status["clusters"]} == dict.fromkeys(
        CLUSTERS, 1)
    conds = {x["type"]: x for x in status["conditions"]}
    assert (conds["RolledOut"]["status"], conds["RolledOut"]["reason"]) == ("True", "Complete")
    # A bad model: revision 2 goes to c1 only, fails there, and every cluster is back on 1.
    step(rec, hub, body(hub, "s3://models/missing", 2))
    assert revisions_on(hub) == {"c1": 2, "c2": 1, "c3": 1}
    settle(hub, failed="c1")
    out = step(rec, hub, body(hub, "s3://models/missing", 2))
    assert revisions_on(hub) == {"c1": 1, "c2": 1, "c3": 1}
    c1 = hub.bodies[("c1", WORK)]
    manifest = c1["spec"]["workload"]["manifests"][0]
    assert manifest["spec"]["predictor"]["model"]["storageUri"] == good
    status = hub.statuses["iris"]
    assert status["rollout"]["phase"] == "RolledBack"
    assert status["rollout"]["failedRevision"] == 2
    assert "on cluster c1: Ready: ModelLoadFailed" in status["rollout"]["message"]
    conds = {x["type"]: x for x in status["conditions"]}
    assert (conds["Ready"]["status"], conds["Ready"]["reason"]) == ("False", "RolledBack")
    assert status["phase"] == "Degraded"
    assert [e[:2] for e in out.events] == [("Warning", "RolloutRolledBack")]
    # Held: nothing is written again for the same spec.
    settle(hub)
    writes = len(hub.writes)
    step(rec, hub, body(hub, "s3://models/missing", 2))
    assert [w for w in hub.writes[writes:] if w[0] != "status"] == []


def test_old_revisions_beyond_the_limit_are_pruned() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    platform_ready(hub, "c1")
    rec = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    for n in range(1, 5):
        step(rec, hub, body(hub, f"s3://models/v{n}", n, revisionHistoryLimit=2))
        settle(hub)
        step(rec, hub, body(hub, f"s3://models/v{n}", n, revisionHistoryLimit=2))
    assert hub.statuses["iris"]["rollout"]["stableRevision"] == 4
    assert sorted(f.number for f in hub.revisions[(KIND, "ns", "iris")]) == [3, 4]
    assert any(w[0] == "delete-revision" for w in hub.writes)


def test_the_metric_gate_is_asked_and_its_answer_decides() -> None:
    asked: list[tuple[str, ...]] = []

    class Gate:
        async def evaluate(self, gate: Any, clusters: tuple[str, ...]) -> MetricAnswer:
            asked.append(clusters)
            return MetricAnswer(clusters, "Failed", "0.5 is not <= 0.1", "c1")

    hub = FakeHub(placements={("ns", "p"): frozenset(CLUSTERS)})
    platform_ready(hub, *CLUSTERS)
    rec = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY, gate=Gate())
    gate = {"metricGate": {"query": 'errors{cluster=~"$clusters"}', "maxValue": 0.1}}
    step(rec, hub, body(hub, "s3://models/v1", 1))
    for _ in range(3):
        settle(hub)
        step(rec, hub, body(hub, "s3://models/v1", 1))
    assert hub.statuses["iris"]["rollout"]["phase"] == "Complete"
    step(rec, hub, body(hub, "s3://models/v2", 2, **gate))
    settle(hub)
    out = step(rec, hub, body(hub, "s3://models/v2", 2, **gate))
    assert asked == [("c1",)] and out.recheck_after == 0.0
    step(rec, hub, body(hub, "s3://models/v2", 2, **gate))
    status = hub.statuses["iris"]
    assert status["rollout"]["phase"] == "RolledBack"
    assert "Metric: 0.5 is not <= 0.1" in status["rollout"]["message"]
    assert revisions_on(hub) == {"c1": 1, "c2": 1, "c3": 1}


def test_a_report_from_before_the_revision_neither_passes_nor_fails_the_step() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset(CLUSTERS)})
    platform_ready(hub, *CLUSTERS)
    rec = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    step(rec, hub, body(hub, "s3://models/v1", 1))
    # The work agent reports Ready, and a failure, from the object as it was before (no
    # revision on it yet): neither counts.
    for cl, failed in (("c1", False), ("c1", True)):
        key = (cl, WORK)
        work = hub.works[key]
        feedback = (("ready", "True"),) if not failed else (
            ("failureReason", "ModelLoadFailed"), ("ready", "False"))
        hub.works[key] = replace(work, applied="True", available="True", feedback=feedback)
        step(rec, hub, body(hub, "s3://models/v1", 1))
        roll = hub.statuses["iris"]["rollout"]
        assert (roll["phase"], roll["step"]) == ("Progressing", 1), roll
    assert revisions_on(hub) == {"c1": 1, "c2": None, "c3": None}
    # Rendered works carry the revision on the InferenceService and feed it back.
    manifest = hub.bodies[("c1", WORK)]["spec"]["workload"]["manifests"][0]
    assert manifest["metadata"]["annotations"][c.ANNOTATION_REVISION] == "1"
    paths = hub.bodies[("c1", WORK)]["spec"]["manifestConfigs"][0]["feedbackRules"][0]
    assert {"name": "revision",
            "path": ".metadata.annotations.modelserving\\.opendatahub\\.io/revision"} in (
        paths["jsonPaths"])


def test_a_partitioned_cluster_in_the_step_counts_as_not_ready() -> None:
    from datetime import UTC, datetime, timedelta

    from addon_manager.facts.records import ClusterFact

    hub = FakeHub(placements={("ns", "p"): frozenset(CLUSTERS)})
    platform_ready(hub, *CLUSTERS)
    rec = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    step(rec, hub, body(hub, "s3://models/v1", 1))
    settle(hub)  # c1 reported Ready on revision 1 ...
    hub.health["c1"] = ClusterFact(available="Unknown", name="c1",  # ... then went dark
                                   since=datetime.now(UTC) - timedelta(minutes=5))
    step(rec, hub, body(hub, "s3://models/v1", 1))
    roll = hub.statuses["iris"]["rollout"]
    assert (roll["phase"], roll["step"]) == ("Progressing", 1)
    assert revisions_on(hub) == {"c1": 1, "c2": None, "c3": None}
    del hub.health["c1"]  # back: its (unchanged) report counts again
    step(rec, hub, body(hub, "s3://models/v1", 1))
    assert revisions_on(hub)["c2"] == 1


def _stack_body(hub: FakeHub, version: str, generation: int) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION, "kind": c.KIND_MODEL_SERVING,
        "metadata": {"name": "kserve", "namespace": "ns", "generation": generation,
                     "uid": "uid-kserve", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"platform": "KServe", "placementRef": {"name": "p"}, "version": version,
                 "rollout": {"strategy": "Progressive", "minSuccessTime": "0s"}},
        "status": hub.statuses.get("kserve"),
    }


def test_a_stack_upgrade_steps_on_only_once_the_models_on_the_cluster_are_ready() -> None:
    """ModelServing rollouts: a step's cluster needs its stack Available on the new revision
    and every model on it Ready; a model that went not Ready holds the rollout there."""
    hub = FakeHub(placements={("ns", "p"): frozenset(CLUSTERS)})
    rec = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    stack = naming.work_name(c.KIND_MODEL_SERVING, "ns", "kserve")

    def report(version: str, models_ready: dict[str, bool]) -> None:
        for (cl, name), work in list(hub.works.items()):
            if name == stack:
                hub.works[(cl, name)] = replace(work, applied="True", feedback=(
                    ("phase", "Available"), ("revision", str(work.revision)),
                    ("stackVersion", version)))
        for cl, ok in models_ready.items():
            hub.works[(cl, WORK)] = replace(
                hub.works[(cl, WORK)], applied="True", available="True",
                feedback=(("ready", "True" if ok else "False"),))

    def on(version: int) -> list[str]:
        return sorted(cl for cl in CLUSTERS if hub.works[(cl, stack)].revision == version)

    asyncio.run(rec.reconcile(c.KIND_MODEL_SERVING, _stack_body(hub, "v0.17.0", 1)))
    for _ in CLUSTERS:  # revision 1 everywhere, one step at a time
        report("v0.17.0", {})
        asyncio.run(rec.reconcile(c.KIND_MODEL_SERVING, _stack_body(hub, "v0.17.0", 1)))
    assert on(1) == list(CLUSTERS)
    # A model on every cluster.
    asyncio.run(rec.reconcile(KIND, body(hub, "s3://models/v1", 1, strategy="All")))
    report("v0.17.0", dict.fromkeys(CLUSTERS, True))
    # The upgrade: revision 2 reaches c1 only.
    asyncio.run(rec.reconcile(c.KIND_MODEL_SERVING, _stack_body(hub, "v0.20.0", 2)))
    assert on(2) == ["c1"]
    # c1's stack is Available on it, but the model there is not Ready: the step holds.
    report("v0.20.0", {"c1": False})
    asyncio.run(rec.reconcile(c.KIND_MODEL_SERVING, _stack_body(hub, "v0.20.0", 2)))
    assert on(2) == ["c1"]
    assert hub.statuses["kserve"]["rollout"]["phase"] == "Progressing"
    # The model Ready again: c2 next.
    report("v0.20.0", {"c1": True})
    asyncio.run(rec.reconcile(c.KIND_MODEL_SERVING, _stack_body(hub, "v0.20.0", 2)))
    assert on(2) == ["c1", "c2"]
    assert hub.bodies[("c2", stack)]["spec"]["workload"]["manifests"][0]["spec"][
        "version"] == "v0.20.0"
    assert hub.bodies[("c3", stack)]["spec"]["workload"]["manifests"][0]["spec"][
        "version"] == "v0.17.0"


def test_an_undo_renders_the_old_revision_under_todays_policy() -> None:
    """Revision 1 ran its pods as a ServiceAccount the admin allowed then; the admin has
    withdrawn it since: undoing to revision 1 sends nothing (PodNotAllowed naming the field)
    and the clusters keep what they run."""
    from addon_api.confinement import PodRules

    then = replace(OPEN_POLICY, pods=PodRules(service_accounts=frozenset({"reader"})))
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    platform_ready(hub, "c1")
    first = body(hub, "s3://models/v1", 1)
    first["spec"]["template"]["predictor"]["serviceAccountName"] = "reader"
    rec = Reconciler(hub, hub, memory_sealer(), admin=then)
    step(rec, hub, first)
    settle(hub)
    step(rec, hub, first)
    assert revisions_on(hub)["c1"] == 1
    second = body(hub, "s3://models/v2", 2)
    step(rec, hub, second)
    settle(hub)
    step(rec, hub, second)
    assert revisions_on(hub)["c1"] == 2
    now = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    hub.writes.clear()
    second["metadata"]["annotations"] = {c.ANNOTATION_ROLLOUT_UNDO: "2:1"}
    step(now, hub, second)
    entry = next(e for e in hub.statuses["iris"]["clusters"] if e["cluster"] == "c1")
    assert entry["reason"] == "PodNotAllowed", entry
    assert "spec.template.predictor.serviceAccountName" in entry["message"]
    assert [w for w in hub.writes if w[0] == "apply"] == []
    assert revisions_on(hub)["c1"] == 2
