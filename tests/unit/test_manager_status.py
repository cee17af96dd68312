"""Status aggregation, placement resolution, conflicts, ordering gates and work facts."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from addon_api import constants as c
from addon_api.common import ClusterStatus
from addon_manager.engine import status as st
from addon_manager.facts import conflicts, placement
from addon_manager.facts.records import ClusterFact, WorkFact, parse_cluster
from addon_manager.facts.sealing import AgentKey
from addon_manager.kinds import (
    agent_identity,
    base,
    inference_service,
    model_serving,
    storage_connection,
)
from addon_manager.kinds.registry import parse as parse_work
from addon_manager.kinds.render import owner_labels

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
    assert model_serving.platform_waits([sp_ok]) == []
    assert [w.reason for w in model_serving.platform_waits([sp_installing])] == [
        model_serving.WAITING_FOR_PLATFORM
    ]
    assert [w.reason for w in model_serving.platform_waits([])] == [
        model_serving.WAITING_FOR_PLATFORM]
    delivered = fact("c1", c.KIND_STORAGE_CONNECTION, phase="Delivered")
    waits = inference_service.waits([sp_ok], ["a", "b"], {"a": delivered, "b": None})
    assert [(w.reason, w.what) for w in waits] == [
        (storage_connection.WAITING_FOR_STORAGE, "StorageConnection b delivered")
    ]
    assert agent_identity.published_key(None) is None
    assert agent_identity.published_key(fact("c1", "AgentIdentity")) is None
    key = agent_identity.published_key(fact("c1", "AgentIdentity", publicKey="k", keyId="i"))
    assert key == AgentKey("k", "i")
    assert [w.reason for w in agent_identity.key_waits(None)] == [
        agent_identity.WAITING_FOR_AGENT_KEY]
    assert agent_identity.key_waits(key) == []


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
    # KServe keeps the previous model Ready while it rejects the new spec: not in effect.
    rejected, cat = st.cluster_status(isvc, st.ClusterInput("c1", fact(
        "c1", ready="True", transitionStatus="InvalidSpec", failureReason="NoSupportingRuntime",
        failureMessage="No runtime found")))
    assert (cat, rejected.phase, rejected.reason) == ("failed", "Failed", "NoSupportingRuntime")
    assert rejected.message == "No runtime found (the previous model still serves)"
    # An old failure with the model up to date (or loading) is history.
    _, cat = st.cluster_status(isvc, st.ClusterInput("c1", fact(
        "c1", ready="True", transitionStatus="UpToDate", failureReason="ModelLoadFailed")))
    assert cat == "ready"
    _, cat = st.cluster_status(isvc, st.ClusterInput("c1", fact(
        "c1", ready="False", transitionStatus="InProgress", failureReason="NoSupportingRuntime")))
    assert cat == "progressing"
    waiting, cat = st.cluster_status(
        isvc,
        st.ClusterInput(
            "c1", waits=[base.Wait(model_serving.WAITING_FOR_PLATFORM, "ServingPlatform Available")]
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
    # The agent's reason reaches the hub, not just "Failed".
    failed, category = st.cluster_status(sc, st.ClusterInput("c1", fact(
        "c1", sc, phase="Failed", reason="DecryptFailed", message="cannot open the payload"
    )))
    assert (failed.phase, failed.reason, category) == ("Failed", "DecryptFailed", "failed")
    assert failed.message == "cannot open the payload"
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
    pl = st.PlacementState("p", True, frozenset(e.cluster for e, _ in _entries(150, 20, 3)))
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


def test_a_cluster_that_left_the_placement_is_neither_desired_nor_ready() -> None:
    """Issue 30: a cluster leaving the Placement while its stack installed kept counting
    ("Ready 2/2" with the Placement selecting one, for about a minute). Its entry stays
    while its work goes; its removal's progress and failures still count."""
    two = _entries(2, 0, 0)
    left = two[1][0].cluster
    pl = st.PlacementState("p", True, frozenset({two[0][0].cluster}))
    status = st.aggregate(two, pl, 1, None, NOW)
    assert (status.summary.desired, status.summary.ready) == (1, 1)
    assert status.summary.ready_text == "1/1" and status.phase == "Ready"
    assert left in {x.cluster for x in status.clusters}
    failing = [two[0], (two[1][0].model_copy(update={"ready": False}), "failed")]
    assert st.aggregate(failing, pl, 1, None, NOW).phase == "Degraded"
    gone = st.PlacementState("p", False)
    assert st.aggregate(two, gone, 1, None, NOW).summary.desired == 2


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


# Staleness -----------------------------------------------------------------------------------

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def _work_body(generation: int, observed: int | None, **status: Any) -> dict[str, Any]:
    conds = [
        {"type": t, "status": "True", "reason": "Done",
         **({"observedGeneration": observed} if observed is not None else {})}
        for t in ("Applied", "Available")
    ]
    return {
        "metadata": {
            "name": "w", "namespace": "cluster1", "generation": generation,
            "creationTimestamp": "2026-01-01T11:00:00Z",
            "labels": owner_labels(c.KIND_INFERENCE_SERVICE, "ns", "iris"),
            "managedFields": [
                {"manager": c.FIELD_MANAGER, "operation": "Apply", "time": "2026-01-01T12:00:00Z"},
                # the work agent's status writes are not a spec change
                {"manager": "work-agent", "operation": "Update", "subresource": "status",
                 "time": "2026-01-01T12:30:00Z"},
            ],
        },
        "status": {"conditions": conds, **status},
    }


def _stale_fact(generation: int = 2, observed: int | None = 1, reported: bool = True,
                **feedback: Any) -> WorkFact:
    return WorkFact(
        name="w", cluster="cluster1", kind=c.KIND_INFERENCE_SERVICE, intent_namespace="ns",
        intent_name="iris", render_hash="h", applied="True", available="True",
        feedback=tuple(sorted(feedback.items())), generation=generation,
        observed_generation=observed, reported=reported, spec_time=T0,
    )


def test_parse_work_reads_generations_and_when_the_manager_last_changed_it() -> None:
    got = parse_work(_work_body(3, 2))
    assert got is not None
    assert (got.generation, got.observed_generation, got.reported) == (3, 2, True)
    assert got.spec_time == T0 and got.unobserved
    current = parse_work(_work_body(3, 3))
    assert current is not None and not current.unobserved
    # Conditions without observedGeneration (an older writer): nothing to compare.
    legacy = parse_work(_work_body(3, None))
    assert legacy is not None and legacy.observed_generation is None and not legacy.unobserved
    # Never reported: unobserved; no managedFields of ours: the creation time.
    body = _work_body(1, None)
    body["status"] = {}
    body["metadata"]["managedFields"] = []
    fresh = parse_work(body)
    assert fresh is not None and fresh.unobserved and not fresh.reported
    assert fresh.spec_time == datetime(2026, 1, 1, 11, 0, 0, tzinfo=UTC)


def test_parse_cluster_reads_labels_and_availability() -> None:
    mc = {
        "metadata": {"name": "cluster1", "labels": {"b": "2", "a": "1"}},
        "status": {"conditions": [
            {"type": "HubAcceptedManagedCluster", "status": "True"},
            {"type": "ManagedClusterConditionAvailable", "status": "Unknown",
             "lastTransitionTime": "2026-01-01T12:00:00Z",
             "message": "Registration agent stopped updating its lease."},
        ]},
    }
    got = parse_cluster(mc)
    assert got.labels == (("a", "1"), ("b", "2"))
    assert (got.available, got.since) == ("Unknown", T0)
    assert "lease" in got.message
    assert parse_cluster({"metadata": {"name": "x"}}) == ClusterFact(name="x")
    assert got.name == "cluster1"


def test_staleness_of_a_work_the_agent_has_not_picked_up() -> None:
    work = _stale_fact()
    # Not yet: how long until it would be.
    assert st.staleness(work, None, T0 + timedelta(seconds=20), 60) == (None, 40.0)
    stale, wait = st.staleness(work, None, T0 + timedelta(seconds=61), 60)
    assert wait is None and stale is not None
    assert (stale.reason, stale.since) == (st.STALE_WORK, T0)
    assert "generation 2" in stale.message and "reports generation 1" in stale.message
    assert "2026-01-01T12:00:00Z" in stale.message and "60s" in stale.message
    # Never reported on: nothing stale to show (the entry says Applying / WorkNotApplied).
    never = WorkFact(**{**_stale_fact(observed=None, reported=False).__dict__,
                        "applied": "Unknown", "available": "Unknown"})
    assert st.staleness(never, None, T0 + timedelta(hours=1), 60) == (None, None)
    entry, _ = st.cluster_status(c.KIND_INFERENCE_SERVICE, st.ClusterInput("cluster1", work=never),
                                 now=T0 + timedelta(hours=1), stale_after=60)
    assert (entry.phase, entry.reason) == ("Applying", "WorkNotApplied")
    # Current, off, or on its way out: never stale by the clock.
    late = T0 + timedelta(hours=1)
    assert st.staleness(_stale_fact(observed=2), None, late, 60) == (None, None)
    assert st.staleness(work, None, late, 0) == (None, None)
    gone = WorkFact(**{**work.__dict__, "deleting": True})
    assert st.staleness(gone, None, late, 60) == (None, None)
    assert st.staleness(None, None, late, 60) == (None, None)


def test_staleness_of_an_unavailable_cluster_is_immediate() -> None:
    work = _stale_fact(observed=2)
    down = ClusterFact(available="Unknown", since=T0, message="lease not renewed")
    stale, _ = st.staleness(work, down, T0 + timedelta(seconds=1), 60)
    assert stale is not None and stale.reason == st.STALE_CLUSTER and stale.since == T0
    assert "not Available (Unknown)" in stale.message and "lease not renewed" in stale.message
    assert st.staleness(work, ClusterFact(available="False", since=T0), T0, 60)[0] is not None
    # Available, or no condition yet (not joined): judged by the work alone.
    for ok in (ClusterFact(available="True", since=T0), ClusterFact()):
        assert st.staleness(work, ok, T0 + timedelta(hours=1), 60) == (None, None)


def test_stale_entry_says_so_and_is_not_ready() -> None:
    work = _stale_fact(ready="True", url="http://iris", activeModelState="Loaded")
    item = st.ClusterInput("cluster1", work=work)
    # Before the threshold the old report does not count as ready for the new spec.
    entry, cat = st.cluster_status(c.KIND_INFERENCE_SERVICE, item, now=T0, stale_after=60)
    assert (entry.phase, entry.reason, entry.ready, entry.stale, cat) == (
        "Applying", "WorkUpdating", False, False, "progressing")
    entry, cat = st.cluster_status(c.KIND_INFERENCE_SERVICE, item,
                                   now=T0 + timedelta(seconds=90), stale_after=60)
    assert cat == "stale"
    assert (entry.phase, entry.reason, entry.ready, entry.stale) == (
        "Stale", st.STALE_WORK, False, True)
    assert entry.stale_since == T0
    assert entry.message.endswith("last reported: Ready")
    assert (entry.url, entry.model_state) == ("http://iris", "Loaded")  # last reported values
    # Once the work agent observed the generation, the report is current again.
    healed = st.ClusterInput("cluster1", work=_stale_fact(observed=2, ready="True"))
    entry, cat = st.cluster_status(c.KIND_INFERENCE_SERVICE, healed,
                                   now=T0 + timedelta(hours=1), stale_after=60)
    assert (entry.phase, entry.stale, cat) == ("Ready", False, "ready")
    # Hub-side problems are current by nature: never stale.
    err = st.ClusterInput("cluster1", work=work, error="boom", error_reason="RenderFailed")
    entry, cat = st.cluster_status(c.KIND_INFERENCE_SERVICE, err,
                                   now=T0 + timedelta(hours=1), stale_after=60)
    assert (entry.reason, cat) == ("RenderFailed", "failed")
    assert st.recheck_in([item, healed, err], T0 + timedelta(seconds=15), 60) == 45.0
    assert st.recheck_in([healed], T0, 60) is None


def test_aggregate_counts_stale_clusters_and_degrades() -> None:
    pl = st.PlacementState("p", True, frozenset({"a", "b", "c"}))
    later = NOW + timedelta(minutes=5)
    ready = ClusterStatus(cluster="a", phase="Ready", ready=True)
    stale = ClusterStatus(cluster="b", phase="Stale", stale=True, stale_since=NOW,
                          reason=st.STALE_WORK)
    going = ClusterStatus(cluster="c", phase="Applying")
    status = st.aggregate([(ready, "ready"), (going, "progressing"), (stale, "stale")],
                          pl, 2, None, NOW)
    assert status.phase == "Degraded"
    assert (status.summary.ready, status.summary.progressing, status.summary.stale,
            status.summary.failed, status.summary.ready_text) == (1, 1, 1, 0, "1/3")
    assert [x.cluster for x in status.clusters] == ["b", "c", "a"]
    conds = {x.type: x for x in status.conditions}
    assert conds["Degraded"].status == "True" and conds["Degraded"].reason == "ClustersStale"
    assert "no current report from b" in conds["Degraded"].message
    assert conds["Ready"].status == "False"
    assert all(x.last_update_time == NOW for x in status.clusters)
    # Nothing changed: lastUpdateTime kept; the healed entry gets a new one.
    healed = ClusterStatus(cluster="b", phase="Ready", ready=True)
    again = st.aggregate([(ready, "ready"), (going, "progressing"), (healed, "ready")],
                         pl, 2, status, later)
    times = {x.cluster: x.last_update_time for x in again.clusters}
    assert times == {"a": NOW, "b": later, "c": NOW}
    assert again.phase == "Progressing" and again.summary.stale == 0
    conds = {x.type: x for x in again.conditions}
    assert conds["Degraded"].status == "False" and conds["Degraded"].reason == "NoFailures"
    failed = ClusterStatus(cluster="c", phase="Failed")
    both = st.aggregate([(failed, "failed"), (stale, "stale")], pl, 2, None, NOW)
    deg = {x.type: x for x in both.conditions}["Degraded"]
    assert deg.reason == "ClustersFailed"
    assert deg.message == "failed on c; no current report from b (stale)"


def _failed_work(message: str) -> dict[str, Any]:
    failed = {"type": "Applied", "status": "False", "reason": "AppliedManifestFailed",
              "message": message}
    return {
        "metadata": {
            "name": "w", "namespace": "cluster1",
            "labels": owner_labels(c.KIND_MODEL_SERVING, "team", "kserve"),
        },
        "status": {
            "conditions": [{"type": "Applied", "status": "False",
                            "reason": "AppliedManifestWorkFailed",
                            "message": "Failed to apply manifest work"}],
            "resourceStatus": {"manifests": [{
                "resourceMeta": {"ordinal": 0, "group": c.GROUP, "kind": "ServingPlatform",
                                 "resource": "servingplatforms", "name": "model-serving"},
                "conditions": [failed],
            }]},
        },
    }


def test_a_forbidden_apply_names_cluster_identity_verb_and_kind() -> None:
    error = (
        'Failed to apply manifest: servingplatforms.modelserving.opendatahub.io "model-serving"'
        ' is forbidden: User "system:serviceaccount:open-cluster-management-agent:'
        'klusterlet-work-sa" cannot patch resource "servingplatforms" in API group '
        '"modelserving.opendatahub.io" at the cluster scope'
    )
    got = parse_work(_failed_work(error))
    assert got is not None
    assert got.reason == "ApplyForbidden"
    assert got.message.startswith(
        "cluster cluster1: system:serviceaccount:open-cluster-management-agent:klusterlet-work-sa"
        " may not patch servingplatforms.modelserving.opendatahub.io"
        " (ServingPlatform model-serving)"
    )
    entry, category = st._reported_status(
        c.KIND_MODEL_SERVING, st.ClusterInput(cluster="cluster1", work=got), removed=False
    )
    assert (entry.phase, entry.reason, category) == ("Failed", "ApplyForbidden", "failed")


def test_an_object_someone_else_owns_on_the_spoke_is_a_conflict_naming_the_owner() -> None:
    """Issue 29, item 5: tenant objects are applied without force; the spoke's refusal of a
    field a user's kubectl owns shows as Conflict naming that field manager and field."""
    error = (
        'Failed to apply manifest: Apply failed with 1 conflict: conflict with '
        '"kubectl-client-side-apply" using serving.kserve.io/v1beta1: '
        '.spec.predictor.minReplicas'
    )
    got = parse_work(_failed_work(error))
    assert got is not None and got.reason == "SpokeObjectOwned"
    assert ".spec.predictor.minReplicas is owned by 'kubectl-client-side-apply'" in got.message
    entry, category = st._reported_status(
        c.KIND_INFERENCE_SERVICE, st.ClusterInput(cluster="cluster1", work=got), removed=False
    )
    assert (entry.phase, entry.reason, category) == ("Conflict", "SpokeObjectOwned", "failed")


def test_another_refusal_carries_the_spoke_message_naming_the_field() -> None:
    error = 'Failed to apply manifest: .spec.metadata: field not declared in schema'
    got = parse_work(_failed_work(error))
    assert got is not None
    assert got.reason == "ApplyFailed"
    assert got.message == (
        "cluster cluster1: ServingPlatform model-serving was refused: " + error
    )


def test_a_model_serving_being_removed_or_deleted_is_never_ready() -> None:
    pl = st.PlacementState("p", True, frozenset({"a", "b"}))
    msv = c.KIND_MODEL_SERVING
    available = st.cluster_status(msv, st.ClusterInput("a", fact("a", msv, phase="Available")))
    blocked = st.cluster_status(msv, st.ClusterInput(
        "b", fact("b", msv, phase="Available"),
        blocked_by=("MultiClusterInferenceService ns/iris",)))
    assert (blocked[0].phase, blocked[0].reason, blocked[1]) == (
        "RemovalBlocked", "IntentsOnCluster", "failed")
    assert "MultiClusterInferenceService ns/iris" in blocked[0].message
    status = st.aggregate([available, blocked], pl, 1, None, NOW, platform=True)
    assert (_conds(status)["Ready"].status, _conds(status)["Ready"].reason) == (
        "False", "RemovalBlocked")
    # Both clusters report Available, but the intent is being deleted: not Ready.
    other = st.cluster_status(msv, st.ClusterInput("b", fact("b", msv, phase="Available")))
    status = st.aggregate([available, other], pl, 1, None, NOW, platform=True, deleting=True)
    assert status.phase != "Ready" and _conds(status)["Ready"].reason == "Deleting"
    removing = st.cluster_status(msv, st.ClusterInput("b", fact("b", msv, phase="Removing")),
                                 removed=True)
    status = st.aggregate([available, removing], pl, 1, None, NOW, platform=True)
    assert _conds(status)["Ready"].reason == "Removing"
    refused = st.deletion_refused({"b": ["MultiClusterServingRuntime ns/rt"]}, 1, NOW)
    assert (refused.type, refused.reason) == ("DeletionBlocked", "IntentsOnCluster")
    assert "b: MultiClusterServingRuntime ns/rt" in refused.message


def test_platform_going_makes_models_and_runtimes_not_ready() -> None:
    sp = fact("a", c.KIND_MODEL_SERVING, phase="Available")
    assert model_serving.platform_going([sp]) == ""
    going = model_serving.platform_going([fact("a", c.KIND_MODEL_SERVING, phase="RemovalBlocked",
                                               message="InferenceServices not created ...")])
    assert "reports RemovalBlocked: InferenceServices" in going
    for kind, work in ((c.KIND_INFERENCE_SERVICE, fact("a", ready="True")),
                       (c.KIND_SERVING_RUNTIME, fact("a", c.KIND_SERVING_RUNTIME))):
        entry, category = st.cluster_status(kind, st.ClusterInput("a", work,
                                                                  platform_going=going))
        assert (entry.ready, entry.reason, category) == (False, "PlatformRemoving", "failed")


def test_a_refusal_the_cluster_is_still_setting_up_for_is_progressing_not_failed() -> None:
    errors = [
        'Failed to apply manifest: Internal error occurred: failed calling webhook '
        '"servingruntime.serving.kserve-webhook-server.validator": failed to call webhook: '
        'Post "https://127.0.0.1:9443/validate-serving-kserve-io-v1alpha1-servingruntime?'
        'timeout=10s": dial tcp 127.0.0.1:9443: connect: connection refused',
        'Failed to apply manifest: no matches for kind "ServingRuntime" in version '
        '"serving.kserve.io/v1alpha1"',
    ]
    for error in errors:
        got = parse_work(_failed_work(error))
        assert got is not None and got.reason == "WaitingForSpoke", got
        assert "the work agent retries" in got.message and error in got.message
        entry, category = st._reported_status(
            c.KIND_SERVING_RUNTIME, st.ClusterInput(cluster="cluster1", work=got), removed=False
        )
        assert (entry.phase, entry.reason, category) == (
            "Applying", "WaitingForSpoke", "progressing")


def test_a_deleting_platform_work_carries_the_agents_account_of_the_removal() -> None:
    msv = c.KIND_MODEL_SERVING
    work = fact("a", msv, phase="Removing",
                message="waiting for InferenceServices to be deleted: models/iris")
    entry, category = st.cluster_status(msv, st.ClusterInput(
        "a", WorkFact(**{**work.__dict__, "deleting": True})))
    assert (entry.phase, entry.reason, category) == ("Removing", "WorkDeleting", "progressing")
    assert entry.message == "waiting for InferenceServices to be deleted: models/iris"
    still = fact("a", msv, phase="Available", message="all components available")
    entry, _ = st.cluster_status(msv, st.ClusterInput(
        "a", WorkFact(**{**still.__dict__, "deleting": True})))
    # its last report is about the stack being up: not shown, the deletion is
    assert "all components" not in entry.message
    assert entry.message.startswith(f"ManifestWork a/{still.name} is being deleted")


def _plain(value: Any) -> bool:
    """Whether every string in ``value`` (keys too) is a plain ``str``, not an enum member."""
    if isinstance(value, dict):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return not isinstance(value, str) or type(value) is str


def test_status_written_from_the_enums_is_plain_json_strings() -> None:
    # Phases and reasons come from the addon_api.reasons enums (constructed, and set through
    # model_copy for stale and platform-going entries): the dict written to the API server
    # holds plain strings equal to the wire values, and survives JSON and YAML unchanged.
    msv, isvc = c.KIND_MODEL_SERVING, c.KIND_INFERENCE_SERVICE
    going = "the ServingPlatform of this cluster reports Removing"
    items = [
        (isvc, st.ClusterInput("a", fact("a", ready="True"), platform_going=going)),
        (isvc, st.ClusterInput("cluster1", _stale_fact(ready="True"))),
        (isvc, st.ClusterInput("c", conflict_with="ModelServing ns/old")),
        (isvc, st.ClusterInput("d", waits=model_serving.platform_waits([]))),
        (isvc, st.ClusterInput("e", error="boom")),
        (msv, st.ClusterInput("f", fact("f", msv, phase="Degraded", message="m"))),
        (isvc, st.ClusterInput("g", fact("g", ready="True"))),
    ]
    entries = [st.cluster_status(kind, item, now=T0 + timedelta(seconds=90), stale_after=60)
               for kind, item in items]
    pl = st.PlacementState("p", True, frozenset([*"acdefg", "cluster1"]))
    status = st.aggregate(entries, pl, 3, None, T0, extra_conditions=[
        st.deletion_refused({"a": ["MultiClusterServingRuntime ns/rt"]}, 3, T0)])
    wire = status.to_dict()
    assert _plain(wire)
    assert json.loads(json.dumps(wire)) == wire
    assert yaml.safe_load(yaml.safe_dump(wire)) == wire
    assert wire["phase"] == "Degraded"
    assert {x["cluster"]: (x["phase"], x["reason"]) for x in wire["clusters"]} == {
        "a": ("Degraded", "PlatformRemoving"),
        "cluster1": ("Stale", "WorkNotObserved"),
        "c": ("Conflict", "Conflict"),
        "d": ("Waiting", "WaitingForPlatform"),
        "e": ("Failed", "ApplyFailed"),
        "f": ("Degraded", "Degraded"),
        "g": ("Ready", "Ready"),
    }
    assert [(x["type"], x["status"], x["reason"]) for x in wire["conditions"]] == [
        ("PlacementResolved", "True", "Resolved"),
        ("Ready", "False", "NotAllClustersReady"),
        ("Progressing", "True", "ClustersProgressing"),
        ("Degraded", "True", "ClustersFailed"),
        ("DeletionBlocked", "True", "IntentsOnCluster"),
    ]
    # The comparison that decides a status write sees no difference from what was read back.
    assert st.comparable(json.loads(json.dumps(wire))) == st.comparable(wire)


def test_a_status_patch_nulls_what_the_rollout_no_longer_has() -> None:
    from addon_api.common import IntentStatus
    from addon_api.rollout import RolloutStatus

    new = IntentStatus(rollout=RolloutStatus(phase="Progressing", step=2, target_revision=3))
    patch = st.merge_patch_of(new, new.to_dict(), {"rollout": {"stepReadySince": "x"}})
    assert patch["rollout"]["stepReadySince"] is None and patch["rollout"]["step"] == 2
    assert "stepReadySince" not in new.to_dict()["rollout"]  # what is compared has no nulls
    plain = IntentStatus()
    assert st.merge_patch_of(plain, plain.to_dict(), {"rollout": {"step": 1}})["rollout"] is None
    assert "rollout" not in st.merge_patch_of(plain, plain.to_dict(), {"phase": "Ready"})


def test_a_stack_is_ready_only_once_the_agent_reported_on_the_latest_spec() -> None:
    from addon_manager.kinds.model_serving import report as platform_report

    kind = c.KIND_MODEL_SERVING
    # the work agent applied generation 3 (spec.version changed); the agent's status is
    # still the Available of generation 2
    old = fact("c1", kind, phase="Available", observedGeneration=2, generation=3,
               stackVersion="v0.17.0")
    entry, category = platform_report(old, False)
    assert category == "progressing" and not entry.ready
    assert entry.message.startswith("the agent has not reported on generation 3 yet")
    assert entry.version == "v0.17.0"
    # the agent's upgrade in progress, then done
    upgrading = fact("c1", kind, phase="Upgrading", observedGeneration=3, generation=3,
                     stackVersion="v0.17.0", targetVersion="v0.20.0")
    entry, category = platform_report(upgrading, False)
    assert (entry.phase, entry.ready, category) == ("Upgrading", False, "progressing")
    done = fact("c1", kind, phase="Available", observedGeneration=3, generation=3,
                stackVersion="v0.20.0")
    entry, category = platform_report(done, False)
    assert (entry.ready, category, entry.version) == (True, "ready", "v0.20.0")
    # an agent that reports no generation (older) is judged as before
    assert platform_report(fact("c1", kind, phase="Available"), False)[1] == "ready"


def _route_failed(error: str, **feedback: str) -> dict[str, Any]:
    work = _failed_work(error)
    work["metadata"]["labels"] = owner_labels(c.KIND_INFERENCE_SERVICE, "team", "iris")
    work["status"]["resourceStatus"]["manifests"] = [
        {"resourceMeta": {"ordinal": 0, "group": "serving.kserve.io",
                          "kind": "InferenceService", "resource": "inferenceservices",
                          "name": "iris", "namespace": "models"},
         "conditions": [{"type": "Applied", "status": "True"}],
         "statusFeedback": {"values": [{"name": k, "fieldValue": {"type": "String", "string": v}}
                                       for k, v in feedback.items()]}},
        {"resourceMeta": {"ordinal": 1, "group": "route.openshift.io", "kind": "Route",
                          "resource": "routes", "name": "iris", "namespace": "models"},
         "conditions": [{"type": "Applied", "status": "False", "message": error}]},
    ]
    return work


def test_without_a_route_api_the_exposure_falls_back_to_none_and_the_model_counts() -> None:
    got = parse_work(_route_failed('Failed to apply manifest: the server doesn\'t have a '
                                   'resource type "Route"', ready="True", url="http://iris"))
    assert got is not None and got.reason == "NoRouteApi"
    entry, category = st._reported_status(
        c.KIND_INFERENCE_SERVICE, st.ClusterInput(cluster="cluster1", work=got), removed=False)
    assert (entry.phase, entry.ready, category) == ("Ready", True, "ready")
    assert entry.url == "http://iris" and entry.external_url == ""
    assert entry.message == ("not exposed: cluster cluster1 has no Route API "
                             "(route.openshift.io); the model serves inside the cluster only")
    loading = parse_work(_route_failed("no matches for kind \"Route\" in version "
                                       "\"route.openshift.io/v1\"", ready="False",
                                       readyReason="Loading", readyMessage="pulling"))
    assert loading is not None
    entry, category = st._reported_status(
        c.KIND_INFERENCE_SERVICE, st.ClusterInput(cluster="cluster1", work=loading),
        removed=False)
    assert (entry.phase, category) == ("Progressing", "progressing")
    assert entry.message.startswith("pulling; not exposed: cluster cluster1 has no Route API")


def test_a_route_the_route_api_refuses_fails_the_entry_saying_the_model_serves_inside() -> None:
    error = ('Failed to apply manifest: admission webhook denied the request: host '
             'iris.apps.example.com is already claimed')
    got = parse_work(_route_failed(error, ready="True"))
    assert got is not None and got.reason == "RouteNotCreated"
    assert got.message.startswith("cluster cluster1: Route models/iris was not created, the "
                                  "model is not reachable from outside the cluster")
    entry, category = st._reported_status(
        c.KIND_INFERENCE_SERVICE, st.ClusterInput(cluster="cluster1", work=got), removed=False)
    assert (entry.phase, entry.reason, category) == ("Failed", "RouteNotCreated", "failed")


def test_the_external_url_is_the_admitted_routes_host() -> None:
    ready = {"ready": "True", "url": "http://iris.models.svc.cluster.local"}
    admitted = fact("a", **ready, routeHost="iris.apps.example.com", routeAdmitted="True",
                    routeTermination="edge")
    entry, category = st.cluster_status(c.KIND_INFERENCE_SERVICE, st.ClusterInput("a", admitted))
    assert category == "ready" and entry.url == "http://iris.models.svc.cluster.local"
    assert entry.external_url == "https://iris.apps.example.com"
    plain = fact("a", **ready, routeHost="iris.apps.example.com", routeAdmitted="True")
    assert st.cluster_status(c.KIND_INFERENCE_SERVICE, st.ClusterInput("a", plain))[
        0].external_url == "http://iris.apps.example.com"
    pending = fact("a", **ready, routeHost="iris.apps.example.com")  # not admitted yet
    assert st.cluster_status(c.KIND_INFERENCE_SERVICE, st.ClusterInput("a", pending))[
        0].external_url == ""


def _export_failed(error: str, **feedback: str) -> dict[str, Any]:
    work = _route_failed(error, **feedback)
    work["status"]["resourceStatus"]["manifests"][1]["resourceMeta"] = {
        "ordinal": 1, "group": "multicluster.x-k8s.io", "kind": "ServiceExport",
        "resource": "serviceexports", "name": "iris-predictor", "namespace": "models"}
    return work


@pytest.mark.parametrize(("error", "reason", "said"), [
    ('Failed to apply manifest: no matches for kind "ServiceExport" in version '
     '"multicluster.x-k8s.io/v1alpha1"', "NoServiceExportApi",
     "not exported: cluster cluster1 has no Multi-Cluster Services API"),
    # Refused for any other reason, even a missing right: still the model's own state (a
    # failed export that failed the model would drop it from the serving set, which would drop
    # the export, which would make it Ready again: a loop).
    ('Failed to apply manifest: serviceexports.multicluster.x-k8s.io "iris-predictor" is '
     'forbidden: User "system:serviceaccount:open-cluster-management-agent:klusterlet-work-sa"'
     ' cannot get resource "serviceexports" in API group "multicluster.x-k8s.io" in the '
     'namespace "models"', "ServiceExportNotCreated",
     "not exported: cluster cluster1: ServiceExport models/iris-predictor was not created"),
])
def test_an_export_that_did_not_happen_leaves_the_model_counting_by_its_own_state(
        error: str, reason: str, said: str) -> None:
    got = parse_work(_export_failed(error, ready="True", url="http://iris"))
    assert got is not None and got.reason == reason
    entry, category = st._reported_status(
        c.KIND_INFERENCE_SERVICE, st.ClusterInput(cluster="cluster1", work=got), removed=False)
    assert (entry.phase, entry.ready, category) == ("Ready", True, "ready")
    assert entry.message.startswith(said)
