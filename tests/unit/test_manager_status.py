"""Status aggregation, placement resolution, conflicts, ordering gates and work facts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from addon_api import constants as c
from addon_manager import conflicts, ordering, placement
from addon_manager import status as st
from addon_manager.facts import WorkFact, parse_work
from addon_manager.render import owner_labels

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def fact(
    cluster: str, kind: str = c.KIND_INFERENCE_SERVICE, applied: str = "True", **feedback: Any
) -> WorkFact:
    return WorkFact(
        name="w",
        cluster=cluster,
        kind=kind,
        intent_namespace="ns",
        intent_name="x",
        render_hash="h",
        applied=applied,
        available=applied,
        feedback=tuple(sorted(feedback.items())),
    )


def test_parse_work_reads_labels_conditions_and_feedback() -> None:
    work = {
        "metadata": {
            "name": "w",
            "namespace": "cluster1",
            "labels": owner_labels(c.KIND_INFERENCE_SERVICE, "ns", "iris"),
            "annotations": {c.ANNOTATION_RENDER_HASH: "abc"},
        },
        "status": {
            "conditions": [
                {"type": "Applied", "status": "True", "reason": "Done"},
                {"type": "Available", "status": "False", "reason": "NotFound", "message": "gone"},
            ],
            "resourceStatus": {
                "manifests": [
                    {
                        "statusFeedback": {
                            "values": [
                                {
                                    "name": "ready",
                                    "fieldValue": {"type": "String", "string": "True"},
                                },
                                {"name": "n", "fieldValue": {"type": "Integer", "integer": 3}},
                                {"name": "b", "fieldValue": {"type": "Boolean", "boolean": True}},
                            ]
                        }
                    }
                ]
            },
        },
    }
    got = parse_work(work)
    assert got is not None
    assert got.owner == (c.KIND_INFERENCE_SERVICE, "ns", "iris")
    assert got.cluster == "cluster1" and got.render_hash == "abc"
    assert got.applied == "True" and got.available == "False"
    assert got.reason == "NotFound" and got.message == "gone"
    assert got.value("ready") == "True" and got.value("n") == 3 and got.value("b") is True
    assert parse_work({"metadata": {"name": "w", "labels": {"app": "x"}}}) is None


def test_placement_decisions_to_clusters() -> None:
    pd = {
        "metadata": {"namespace": "ns", "labels": {placement.PLACEMENT_LABEL: "p"}},
        "status": {"decisions": [{"clusterName": "b"}, {"clusterName": "a"}]},
    }
    assert placement.decision_key(pd) == ("ns", "p")
    assert placement.decided_clusters(pd) == ("a", "b")
    assert placement.decision_key({"metadata": {"namespace": "ns"}}) is None
    assert placement.clusters_of([("a", "b"), ("c",), ()]) == frozenset({"a", "b", "c"})


def test_oldest_model_serving_wins_each_cluster() -> None:
    old = conflicts.Claim("ns", "old", "2026-01-01T00:00:00Z", frozenset({"c1", "c2"}))
    new = conflicts.Claim("ns", "new", "2026-02-01T00:00:00Z", frozenset({"c2", "c3"}))
    owners = conflicts.winners([new, old])
    assert owners == {"c1": ("ns", "old"), "c2": ("ns", "old"), "c3": ("ns", "new")}
    assert conflicts.lost_clusters(("ns", "new"), new.clusters, owners) == {"c2": ("ns", "old")}
    assert conflicts.lost_clusters(("ns", "old"), old.clusters, owners) == {}


def test_gates() -> None:
    sp_ok = fact("c1", c.KIND_MODEL_SERVING, phase="Available")
    sp_installing = fact("c1", c.KIND_MODEL_SERVING, phase="Installing")
    assert ordering.waits_for_runtime([sp_ok]) == []
    assert [w.reason for w in ordering.waits_for_runtime([sp_installing])] == [
        ordering.WAITING_FOR_PLATFORM
    ]
    assert [w.reason for w in ordering.waits_for_runtime([])] == [ordering.WAITING_FOR_PLATFORM]
    delivered = fact("c1", c.KIND_STORAGE_CONNECTION, phase="Delivered")
    waits = ordering.waits_for_inference_service([sp_ok], ["a", "b"], {"a": delivered, "b": None})
    assert [(w.reason, w.what) for w in waits] == [
        (ordering.WAITING_FOR_STORAGE, "StorageConnection b delivered")
    ]
    assert ordering.agent_key(None) is None
    assert ordering.agent_key(fact("c1", "AgentIdentity")) is None
    key = ordering.agent_key(fact("c1", "AgentIdentity", publicKey="k", keyId="i"))
    assert key == ordering.AgentKey("k", "i")
    assert [w.reason for w in ordering.waits_for_storage(None)] == [ordering.WAITING_FOR_AGENT_KEY]
    assert ordering.waits_for_storage(key) == []


def test_cluster_status_per_kind() -> None:
    isvc = c.KIND_INFERENCE_SERVICE
    ready, cat = st.cluster_status(
        isvc,
        st.ClusterInput("c1", fact("c1", ready="True", url="http://u", activeModelState="Loaded")),
    )
    assert cat == "ready" and ready.ready and ready.url == "http://u"
    assert ready.model_state == "Loaded"
    failed, cat = st.cluster_status(
        isvc,
        st.ClusterInput(
            "c1", fact("c1", ready="False", failureReason="ModelLoadFailed", failureMessage="boom")
        ),
    )
    assert cat == "failed" and failed.reason == "ModelLoadFailed" and failed.message == "boom"
    _, cat = st.cluster_status(isvc, st.ClusterInput("c1", fact("c1", ready="False")))
    assert cat == "progressing"
    waiting, cat = st.cluster_status(
        isvc,
        st.ClusterInput(
            "c1", waits=[ordering.Wait(ordering.WAITING_FOR_PLATFORM, "ServingPlatform Available")]
        ),
    )
    assert cat == "progressing" and waiting.phase == "Waiting"
    assert waiting.waiting_for == ["ServingPlatform Available"]
    conflict, cat = st.cluster_status(
        c.KIND_MODEL_SERVING, st.ClusterInput("c1", conflict_with="ModelServing ns/old")
    )
    assert cat == "failed" and conflict.reason == "Conflict" and "ns/old" in conflict.message
    _, cat = st.cluster_status(isvc, st.ClusterInput("c1", fact("c1", applied="False")))
    assert cat == "failed"
    msv = c.KIND_MODEL_SERVING
    assert (
        st.cluster_status(msv, st.ClusterInput("c1", fact("c1", msv, phase="Available")))[1]
        == "ready"
    )
    assert (
        st.cluster_status(
            msv, st.ClusterInput("c1", fact("c1", msv, phase="Available")), removed=True
        )[1]
        == "progressing"
    )
    assert (
        st.cluster_status(
            msv, st.ClusterInput("c1", fact("c1", msv, phase="Removed")), removed=True
        )[1]
        == "ready"
    )
    assert (
        st.cluster_status(msv, st.ClusterInput("c1", fact("c1", msv, phase="Degraded")))[1]
        == "failed"
    )
    sc = c.KIND_STORAGE_CONNECTION
    assert (
        st.cluster_status(sc, st.ClusterInput("c1", fact("c1", sc, phase="Delivered")))[1]
        == "ready"
    )
    assert (
        st.cluster_status(
            c.KIND_SERVING_RUNTIME, st.ClusterInput("c1", fact("c1", c.KIND_SERVING_RUNTIME))
        )[1]
        == "ready"
    )


def _entries(ready: int, progressing: int, failed: int) -> list[Any]:
    out = []
    for i in range(ready):
        out.append(
            st.cluster_status(
                c.KIND_INFERENCE_SERVICE,
                st.ClusterInput(f"r{i:04d}", fact(f"r{i:04d}", ready="True")),
            )
        )
    for i in range(progressing):
        out.append(st.cluster_status(c.KIND_INFERENCE_SERVICE, st.ClusterInput(f"p{i:04d}")))
    for i in range(failed):
        out.append(
            st.cluster_status(c.KIND_INFERENCE_SERVICE, st.ClusterInput(f"f{i:04d}", error="nope"))
        )
    return out


def _conds(status: Any) -> dict[str, Any]:
    return {x.type: x for x in status.conditions}


def test_aggregate_summary_conditions_and_bounded_list() -> None:
    pl = st.PlacementState("p", True, frozenset({"x"}))
    status = st.aggregate(_entries(150, 20, 3), pl, 4, None, NOW)
    assert status.summary.desired == 173 and status.summary.ready == 150
    assert status.summary.progressing == 20 and status.summary.failed == 3
    assert status.summary.ready_text == "150/173"
    assert status.phase == "Degraded" and status.observed_generation == 4
    assert len(status.clusters) == c.MAX_CLUSTER_STATUSES and status.clusters_omitted == 73
    assert [x.cluster for x in status.clusters[:3]] == ["f0000", "f0001", "f0002"]
    assert status.clusters[3].cluster == "p0000"  # non-ready first
    conds = _conds(status)
    assert conds["Degraded"].status == "True" and "f0000" in conds["Degraded"].message
    assert conds["Ready"].status == "False" and conds["PlacementResolved"].status == "True"
    ok = st.aggregate(_entries(2, 0, 0), pl, 5, status, NOW)
    assert ok.phase == "Ready" and _conds(ok)["Ready"].status == "True"
    assert _conds(ok)["Ready"].reason == "AllClustersReady"


def test_transition_time_is_kept_while_status_holds() -> None:
    pl = st.PlacementState("p", True, frozenset({"x"}))
    first = st.aggregate(_entries(1, 0, 0), pl, 1, None, NOW)
    later = st.aggregate(_entries(1, 0, 0), pl, 1, first, datetime(2026, 1, 2, tzinfo=UTC))
    assert _conds(later)["Ready"].last_transition_time == NOW
    assert st.comparable(first.to_dict()) == st.comparable(later.to_dict())


def test_missing_placement_and_empty_placement() -> None:
    missing = st.aggregate([], st.PlacementState("p", False), 1, None, NOW)
    cond = _conds(missing)["PlacementResolved"]
    assert cond.status == "False" and cond.reason == "PlacementNotFound"
    assert missing.phase == "Pending" and _conds(missing)["Ready"].reason == "NoClusters"
    empty = st.aggregate([], st.PlacementState("p", True), 1, None, NOW)
    assert _conds(empty)["PlacementResolved"].reason == "NoClustersSelected"


def test_deletion_blocked_names_clusters() -> None:
    cond = st.deletion_blocked([f"c{i}" for i in range(12)], 1, NOW)
    assert cond.type == "DeletionBlocked" and "c0" in cond.message and "2 more" in cond.message
