"""A model's serving set (issue 34): every reason a cluster takes no traffic, the Spread and
Failover policies, the rollout's revisions, the events of a change, and the set in the status
the reconciler writes."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from addon_api import constants as c
from addon_api.common import ClusterStatus, EndpointStatus, IntentStatus
from addon_api.hub import FleetEndpoint, MultiClusterInferenceService
from addon_api.rollout import RolloutStatus
from addon_manager.engine.endpoint import Excluded, changes, failover_order, serving_set
from addon_manager.facts import naming
from addon_manager.facts.records import ClusterFact, parse_cluster
from addon_manager.shell.reconcile import Reconciler
from testbed.support.fake_hub import OPEN_POLICY, FakeHub
from testbed.support.sealing import memory_sealer
from tests.unit.test_manager_reconcile import isvc_body, platform_ready

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def entry(cluster: str, ready: bool = True, **kw: Any) -> ClusterStatus:
    return ClusterStatus(cluster=cluster, ready=ready, phase="Available" if ready else "Failed",
                         url=kw.pop("url", f"http://iris.{cluster}.example.com"), **kw)


def status(*entries: ClusterStatus, rollout: RolloutStatus | None = None,
           omitted: int = 0) -> IntentStatus:
    return IntentStatus(clusters=list(entries), rollout=rollout, clusters_omitted=omitted)


def fact(name: str, cordoned: str | None = None, **labels: str) -> ClusterFact:
    return ClusterFact(labels=tuple(sorted(labels.items())), available="True", name=name,
                       cordoned=cordoned)


def endpoint(**spec: Any) -> FleetEndpoint:
    return FleetEndpoint.model_validate(spec)


def members(out: EndpointStatus) -> dict[str, int]:
    return {m.cluster: m.weight for m in out.members}


def reasons(out: EndpointStatus) -> dict[str, str]:
    return {x.cluster: x.reason for x in out.excluded}


def test_by_default_every_ready_cluster_takes_an_equal_share() -> None:
    out = serving_set(None, status(entry("c2"), entry("c1")), frozenset({"c1", "c2"}), {},
                      None, NOW)
    assert members(out) == {"c1": 100, "c2": 100}
    assert [m.cluster for m in out.members] == ["c1", "c2"]
    assert out.members[0].url == "http://iris.c1.example.com"
    assert (out.policy, out.serving, out.excluded, out.last_change_time) == (
        "Spread", 2, [], NOW)


@pytest.mark.parametrize(("the_entry", "the_fact", "spec", "selected", "reason", "says"), [
    (entry("c1"), None, endpoint(), frozenset({"c2"}), Excluded.NOT_SELECTED,
     "no longer selects"),
    (entry("c1"), fact("c1", env="dev"),
     endpoint(clusterSelector={"matchLabels": {"env": "prod"}}), None,
     Excluded.OUTSIDE_SELECTOR, "clusterSelector"),
    (entry("c1"), fact("c1", cordoned="maintenance until 14:00"), endpoint(), None,
     Excluded.CORDONED, "maintenance until 14:00"),
    (entry("c1", stale=True, message="no report since 11:58"), fact("c1"), endpoint(), None,
     Excluded.STALE, "no report since 11:58"),
    (entry("c1", ready=False, reason="StorageDownloadFailed"), None, endpoint(), None,
     Excluded.NOT_READY, "Failed: StorageDownloadFailed"),
    (entry("c1", url=""), None, endpoint(), None, Excluded.NO_URL, "no URL"),
    (entry("c1"), None, endpoint(weights=[{"cluster": "c1", "weight": 0}]), None,
     Excluded.ZERO_WEIGHT, "gives it 0"),
    # A cordon without a value still says why.
    (entry("c1"), fact("c1", cordoned=""), endpoint(), None, Excluded.CORDONED,
     "cordoned for endpoints"),
    # A partitioned cluster leaves its Placement too: staleness, which says why, comes first.
    (entry("c1", stale=True, message="left the Placement while not Available"), None,
     endpoint(), frozenset({"c2"}), Excluded.STALE, "while not Available"),
])
def test_each_reason_a_cluster_takes_no_traffic(
        the_entry: ClusterStatus, the_fact: ClusterFact | None, spec: FleetEndpoint,
        selected: frozenset[str] | None, reason: Excluded, says: str) -> None:
    out = serving_set(spec, status(the_entry, entry("c9")), selected and selected | {"c9"},
                      {"c1": the_fact, "c9": fact("c9", env="prod")}, None, NOW)
    assert members(out) == {"c9": 100}
    [excluded] = out.excluded
    assert (excluded.cluster, excluded.reason) == ("c1", reason)
    assert says in excluded.message


@pytest.mark.parametrize(("phase", "revisions", "expected"), [
    # Progressing: the stable and the target revision both serve (a canary across clusters).
    ("Progressing", {"c1": 2, "c2": 1, "c3": 1}, {}),
    ("Paused", {"c1": 2, "c2": 1, "c3": 3}, {"c3": Excluded.OTHER_REVISION}),
    # Halted: the revision whose step failed takes no traffic.
    ("Halted", {"c1": 2, "c2": 1, "c3": 1}, {"c1": Excluded.REVISION_HALTED}),
    # Rolled back: a cluster not back on the stable revision yet takes none.
    ("RolledBack", {"c1": 2, "c2": 1, "c3": 1}, {"c1": Excluded.REVISION_ROLLED_BACK}),
    ("RolledBack", {"c1": 1, "c2": 1, "c3": 1}, {}),
    ("Complete", {"c1": 2, "c2": 2, "c3": 2}, {}),
])
def test_a_rollout_keeps_traffic_off_a_revision_being_halted_or_rolled_back(
        phase: str, revisions: dict[str, int], expected: dict[str, str]) -> None:
    stable, target = (2, 2) if phase == "Complete" else (1, 2)
    rollout = RolloutStatus(phase=phase, stable_revision=stable, target_revision=target)
    entries = [entry(cl, revision=rev) for cl, rev in revisions.items()]
    out = serving_set(None, status(*entries, rollout=rollout), None, {}, None, NOW)
    assert reasons(out) == expected
    assert set(members(out)) == set(revisions) - set(expected)
    assert {m.cluster: m.revision for m in out.members} == {
        cl: rev for cl, rev in revisions.items() if cl not in expected}


def test_spread_weights_name_some_clusters_the_rest_get_the_default() -> None:
    spec = endpoint(weights=[{"cluster": "c1", "weight": 300}, {"cluster": "c3", "weight": 1}])
    out = serving_set(spec, status(entry("c1"), entry("c2"), entry("c3")), None, {}, None, NOW)
    assert members(out) == {"c1": 300, "c2": 100, "c3": 1}


def test_failover_sends_everything_to_the_first_serving_cluster_in_priority() -> None:
    spec = endpoint(policy="Failover", priority=["c3", "c1"])
    entries = [entry("c1"), entry("c2"), entry("c3")]
    out = serving_set(spec, status(*entries), None, {}, None, NOW)
    assert [(m.cluster, m.weight) for m in out.members] == [("c3", 100), ("c1", 0), ("c2", 0)]
    assert out.serving == 1
    # c3 fails: c1 takes it all, c2 stays the standby.
    entries[2] = entry("c3", ready=False, reason="CrashLooping")
    after = serving_set(spec, status(*entries), None, {}, out, NOW + timedelta(seconds=5))
    assert [(m.cluster, m.weight) for m in after.members] == [("c1", 100), ("c2", 0)]
    assert after.last_change_time == NOW + timedelta(seconds=5)
    assert changes(out, after) == [
        ("Warning", "EndpointMemberRemoved",
         "c3 left the serving set: NotReady (Failed: CrashLooping)"),
        ("Normal", "EndpointFailover", "traffic moves from c3 to c1"),
    ]


def test_failover_orders_the_unnamed_clusters_by_their_priority_label() -> None:
    spec = endpoint(policy="Failover", priority=["east"], priorityLabel="failover-rank")
    facts = {"a": fact("a", **{"failover-rank": "10"}), "b": fact("b", **{"failover-rank": "9"}),
             "c": fact("c", **{"failover-rank": "z"}), "d": fact("d"), "east": fact("east")}
    assert failover_order(["d", "c", "b", "a", "east"], spec, facts) == [
        "east", "b", "a", "c", "d"]  # numbers by value (9 before 10), text, then none


def test_the_change_time_stays_while_the_members_stay() -> None:
    first = serving_set(None, status(entry("c1"), entry("c2")), None, {}, None, NOW)
    later = NOW + timedelta(minutes=3)
    same = serving_set(None, status(entry("c2"), entry("c1", message="still fine")), None, {},
                       first, later)
    assert same.last_change_time == NOW and changes(first, same) == []
    moved = serving_set(None, status(entry("c1"), entry("c2", url="http://other")), None, {},
                        first, later)
    assert moved.last_change_time == later
    assert changes(first, moved) == []  # the same members: no event for a new URL


def test_events_for_a_cluster_joining_and_for_the_last_one_leaving() -> None:
    one = serving_set(None, status(entry("c1"), entry("c2", ready=False)), None, {}, None, NOW)
    assert changes(None, one) == []  # a new model's clusters come up: nothing went down
    two = serving_set(None, status(entry("c1"), entry("c2")), None, {}, one, NOW)
    assert changes(one, two) == [("Normal", "EndpointMemberAdded",
                                  "c2 joined the serving set (weight 100)")]
    none = serving_set(None, status(entry("c1", stale=True), entry("c2", stale=True)), None,
                       {}, two, NOW)
    assert [e[1] for e in changes(two, none)] == [
        "EndpointMemberRemoved", "EndpointMemberRemoved", "EndpointDown"]


def test_the_set_is_bounded_like_the_status_it_comes_from() -> None:
    out = serving_set(None, status(*(entry(f"c{i:03d}") for i in range(100)), omitted=400),
                      None, {}, None, NOW)
    assert len(out.members) == 100 and out.omitted == 400


def test_the_cordon_taint_is_read_from_the_managed_cluster() -> None:
    taint = {"key": c.ENDPOINT_CORDON_TAINT, "value": "disk swap", "effect": "PreferNoSelect"}
    cordoned = parse_cluster({"metadata": {"name": "c1"}, "spec": {"taints": [
        {"key": "other", "effect": "NoSelect"}, taint]}})
    assert cordoned.cordoned == "disk swap"
    assert parse_cluster({"metadata": {"name": "c1"}, "spec": {"taints": [
        {"key": "other", "effect": "NoSelect"}]}}).cordoned is None


def test_the_spec_checks_its_weights_and_priorities() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="weight"):
        endpoint(weights=[{"cluster": "c1", "weight": 1001}])
    with pytest.raises(ValidationError, match="policy"):
        endpoint(policy="RoundRobin")
    with pytest.raises(ValidationError):
        endpoint(weights=[{"cluster": "c1", "weight": 1}, {"cluster": "c1", "weight": 2}])
    isvc = MultiClusterInferenceService.model_validate({
        "metadata": {"name": "iris", "namespace": "ns"},
        "spec": {"placementRef": {"name": "p"}, "targetNamespace": "models",
                 "template": {"predictor": {"model": {"modelFormat": {"name": "sklearn"}}}},
                 "endpoint": {"policy": "Failover", "priority": ["c2", "c1"]}}})
    assert isvc.spec.endpoint is not None and isvc.spec.endpoint.priority == ["c2", "c1"]


KIND = c.KIND_INFERENCE_SERVICE
WORK = naming.work_name(KIND, "ns", "iris")


def settle(hub: FakeHub, failed: str = "") -> None:
    """The work agents report each model Ready with its URL, or ``failed`` failing to load."""
    for key, work in list(hub.works.items()):
        if work.kind != KIND:
            continue
        feedback: tuple[tuple[str, Any], ...] = (
            ("ready", "True"), ("url", f"http://iris-models.{work.cluster}.example.com"))
        if work.cluster == failed:
            feedback = (("failureReason", "ModelLoadFailed"), ("failureMessage", "no such model"),
                        ("ready", "False"))
        hub.works[key] = replace(work, applied="True", available="True", feedback=feedback)


def test_the_reconciler_writes_the_set_and_says_when_a_cluster_leaves_it() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    platform_ready(hub, "c1", "c2")
    rec = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)

    def step() -> Any:
        b = isvc_body(hub.statuses.get("iris"))
        b["spec"]["endpoint"] = {"policy": "Failover", "priority": ["c2"]}
        return asyncio.run(rec.reconcile(KIND, b))

    step()
    assert hub.statuses["iris"]["endpoint"]["members"] == []  # nothing reported yet
    settle(hub)
    out = step()
    got = hub.statuses["iris"]["endpoint"]
    assert [(m["cluster"], m["weight"], m["url"]) for m in got["members"]] == [
        ("c2", 100, "http://iris-models.c2.example.com"),
        ("c1", 0, "http://iris-models.c1.example.com")]
    assert [e[1] for e in out.events] == ["EndpointMemberAdded", "EndpointMemberAdded"]
    settle(hub, failed="c2")
    out = step()
    got = hub.statuses["iris"]["endpoint"]
    assert [(m["cluster"], m["weight"]) for m in got["members"]] == [("c1", 100)]
    assert got["excluded"] == [{"cluster": "c2", "reason": "NotReady",
                                "message": "Failed: ModelLoadFailed"}]
    assert ("Normal", "EndpointFailover", "traffic moves from c2 to c1") in out.events


def test_a_member_whose_work_is_being_updated_keeps_its_place_until_it_reports() -> None:
    spec = endpoint()
    first = serving_set(spec, status(entry("c1"), entry("c2")), None, {}, None, NOW)
    updating = ClusterStatus(cluster="c1", ready=False, phase="Applying", reason="WorkUpdating")
    later = serving_set(spec, status(updating, entry("c2")), None, {}, first, NOW)
    assert members(later) == {"c1": 100, "c2": 100}
    assert later.members[0].url == "http://iris.c1.example.com"
    assert later.last_change_time == first.last_change_time  # nothing moved
    # a cluster that was not a member does not join by updating; nor does a stale one stay
    fresh = serving_set(spec, status(updating, entry("c2")), None, {}, None, NOW)
    assert reasons(fresh) == {"c1": "NotReady"}
    stale = updating.model_copy(update={"stale": True, "phase": "Stale"})
    assert reasons(serving_set(spec, status(stale, entry("c2")), None, {}, first, NOW)) == {
        "c1": "Stale"}


def _exports(hub: FakeHub) -> dict[str, list[str]]:
    """The ServiceExports each cluster's model work carries."""
    out: dict[str, list[str]] = {}
    for (cluster, name), body in hub.bodies.items():
        if name != WORK:
            continue
        out[cluster] = [f"{m['metadata']['namespace']}/{m['metadata']['name']}"
                        for m in body["spec"]["workload"]["manifests"]
                        if m["kind"] == "ServiceExport"]
    return out


def test_the_works_of_clusters_taking_traffic_export_the_predictor_service() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    platform_ready(hub, "c1", "c2")
    rec = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    spec: dict[str, Any] = {"serviceExport": True}

    def step() -> Any:
        b = isvc_body(hub.statuses.get("iris"))
        b["spec"]["endpoint"] = spec
        return asyncio.run(rec.reconcile(KIND, b))

    step()
    assert _exports(hub) == {"c1": [], "c2": []}  # nobody serves yet
    settle(hub)
    out = step()
    assert out.recheck_after == 0  # the set changed: the works follow it at once
    assert _exports(hub) == {"c1": [], "c2": []}
    out = step()
    assert _exports(hub) == {"c1": ["models/iris-predictor"], "c2": ["models/iris-predictor"]}
    assert out.recheck_after != 0
    config = next(cfg for cfg in hub.bodies[("c1", WORK)]["spec"]["manifestConfigs"]
                  if cfg["resourceIdentifier"]["resource"] == "serviceexports")
    assert config["resourceIdentifier"] == {"group": "multicluster.x-k8s.io",
                                            "resource": "serviceexports",
                                            "name": "iris-predictor", "namespace": "models"}
    # The work agent picks the new generation up: no flapping, nothing more written.
    settle(hub)
    writes = len(hub.writes)
    step()
    step()
    assert len(hub.writes) == writes
    assert [m["cluster"] for m in hub.statuses["iris"]["endpoint"]["members"]] == ["c1", "c2"]
    # c2 fails to load the model: it leaves the set, then loses its export; c1 keeps its own.
    settle(hub, failed="c2")
    assert step().recheck_after == 0
    step()
    assert _exports(hub) == {"c1": ["models/iris-predictor"], "c2": []}
    # Failover: only the active cluster exports (MCS has no weights).
    settle(hub)
    spec.update({"policy": "Failover", "priority": ["c2", "c1"]})
    for _ in range(3):
        step()
        settle(hub)
    assert _exports(hub) == {"c1": [], "c2": ["models/iris-predictor"]}
    # With a spillover too, a set that changes still has the works follow it at once (the
    # spillover's refresh does not stretch the "at once" to 15 s).
    spec.update({"policy": "Spread", "priority": [],
                 "spillover": {"metric": "request_error_ratio", "maxValue": 0.1}})
    rec.gate = SpillGate()
    assert step().recheck_after == 0  # Spread: c1 joins c2
    step()
    assert _exports(hub) == {"c1": ["models/iris-predictor"], "c2": ["models/iris-predictor"]}
    del spec["spillover"]
    # Export off: no work carries one.
    spec["serviceExport"] = False
    step()
    assert _exports(hub) == {"c1": [], "c2": []}


# Spillover (spec.endpoint.spillover) ---------------------------------------------------------

SPILL = {"metric": "request_error_ratio", "maxValue": 0.1}


def test_a_member_out_of_bounds_spills_its_traffic_to_the_others_but_never_all() -> None:
    spec = endpoint(spillover=SPILL)
    both = status(entry("c1"), entry("c2"), entry("c3", ready=False))
    out = serving_set(spec, both, None, {}, None, NOW, spilled={"c1": "its metric is 0.5"})
    assert members(out) == {"c2": 100}
    assert reasons(out) == {"c1": "MetricOutOfBounds", "c3": "NotReady"}
    assert next(x for x in out.excluded if x.cluster == "c1").message == "its metric is 0.5"
    # every member out of bounds: moving the traffic helps nobody, all keep it
    out = serving_set(spec, both, None, {}, None, NOW, spilled={"c1": "0.5", "c2": "0.7"})
    assert members(out) == {"c1": 100, "c2": 100}
    # a cluster already out for another reason is not counted as a member that could serve
    out = serving_set(spec, both, None, {}, None, NOW, spilled={"c1": "0.5", "c3": "0.9"})
    assert members(out) == {"c2": 100} and reasons(out)["c3"] == "NotReady"
    # no spillover asked: an answer from before counts for nothing
    assert members(serving_set(endpoint(), both, None, {}, None, NOW,
                               spilled={"c1": "0.5"})) == {"c1": 100, "c2": 100}
    # Failover: a spilled active cluster hands over to the next in priority
    fo = endpoint(policy="Failover", priority=["c1", "c2"], spillover=SPILL)
    out = serving_set(fo, both, None, {}, None, NOW, spilled={"c1": "0.5"})
    assert members(out) == {"c2": 100}


def test_each_cluster_is_judged_by_its_own_sample() -> None:
    from addon_api.rollout import MetricGate
    from addon_manager.shell.metricgate import judge_each

    gate = MetricGate.model_validate({"metric": "errors", "maxValue": 0.1})
    result = [{"metric": {"cluster": "c1"}, "value": [0, "0.5"]},
              {"metric": {"cluster": "c2"}, "value": [0, "0.01"]},
              {"metric": {"cluster": "c9"}, "value": [0, "0.9"]},  # not asked about
              {"metric": {}, "value": [0, "0.9"]},  # no cluster: judges nobody
              {"metric": {"cluster": "c3"}, "value": [0, "NaN"]}]
    assert judge_each(gate, ("c1", "c2", "c3", "c4"), result) == {
        "c1": "its metric is 0.5, not <= 0.1 (spec.endpoint.spillover)",
        "c3": "its metric is nan, not <= 0.1 (spec.endpoint.spillover)"}
    assert judge_each(gate, ("c1",), [0, "0.9"]) == {}  # a scalar names no cluster


class SpillGate:
    """A Prometheus stand-in: the clusters out of bounds, or an error, as the test sets."""

    def __init__(self) -> None:
        self.out: dict[str, str] | str = {}
        self.asked: list[tuple[tuple[str, ...], str]] = []

    async def evaluate(self, gate: Any, clusters: tuple[str, ...]) -> Any:
        raise AssertionError("no rollout gate in these tests")

    async def evaluate_each(self, gate: Any, clusters: tuple[str, ...]) -> dict[str, str] | str:
        self.asked.append((clusters, str(gate.query)))
        return self.out if isinstance(self.out, str) else {
            k: v for k, v in self.out.items() if k in clusters}


def test_the_reconciler_asks_the_metric_and_moves_the_traffic_off_and_back() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    platform_ready(hub, "c1", "c2")
    prom = SpillGate()
    rec = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY, gate=prom)

    def step(**spec: Any) -> Any:
        b = isvc_body(hub.statuses.get("iris"))
        b["spec"]["endpoint"] = {"spillover": SPILL, **spec}
        return asyncio.run(rec.reconcile(KIND, b))

    def got() -> tuple[dict[str, int], dict[str, str]]:
        out = EndpointStatus.model_validate(hub.statuses["iris"]["endpoint"])
        return members(out), reasons(out)

    step()
    settle(hub)
    prom.out = {"c1": "its metric is 0.5, not <= 0.1 (spec.endpoint.spillover)"}
    out = step()
    assert got() == ({"c1": 100, "c2": 100}, {})  # judged with the answer it had: none
    assert out.recheck_after == 0  # a new answer: the set again at once
    (clusters, query), = prom.asked[-1:]
    assert clusters == ("c1", "c2")
    # the metric is scoped to this model's own pods in its spoke namespace
    assert 'namespace=~"models"' in query and 'pod=~"iris-predictor-.*"' in query
    out = step()
    assert got() == ({"c2": 100}, {"c1": "MetricOutOfBounds"})
    assert out.recheck_after is not None and 0 < out.recheck_after <= 15  # judged again soon
    assert [e[1] for e in out.events] == ["EndpointMemberRemoved"]
    asked = len(prom.asked)
    step()
    assert len(prom.asked) == asked  # a fresh answer is not asked again
    step(spillover={**SPILL, "maxValue": 0.2})
    assert len(prom.asked) == asked + 1  # but a changed gate is, at once
    # back within bounds: the next answer returns it
    prom.out = {}
    age(rec)
    out = step()
    assert got() == ({"c2": 100}, {"c1": "MetricOutOfBounds"})  # until the answer is read
    assert out.recheck_after == 0 and prom.asked[-1][0] == ("c1", "c2")  # c1 still judged
    step()
    assert got() == ({"c1": 100, "c2": 100}, {})
    # Prometheus unreachable: no answer moves no traffic
    prom.out = {"c2": "its metric is 0.9"}
    age(rec)
    step()
    step()
    assert got() == ({"c1": 100}, {"c2": "MetricOutOfBounds"})
    prom.out = "query failed: connection refused"
    age(rec)
    step()
    step()
    assert got() == ({"c1": 100, "c2": 100}, {})


def age(rec: Reconciler) -> None:
    """Make every spillover answer older than its refresh, as 15 s would."""
    for key, (clusters, out, _) in list(rec.spills.items()):
        rec.spills[key] = (clusters, out, float("-inf"))


def test_free_promql_for_spillover_is_the_platform_admins() -> None:
    from addon_manager.engine import policy

    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    platform_ready(hub, "c1")
    rec = Reconciler(hub, hub, memory_sealer(), admin=policy.Policy(
        namespaces=OPEN_POLICY.namespaces, stack_owner_namespaces=frozenset({"platform"})))
    b = isvc_body()
    b["spec"]["endpoint"] = {"spillover": {"query": "sum(secret)", "maxValue": 1}}
    asyncio.run(rec.reconcile(KIND, b))
    ready = next(x for x in hub.statuses["iris"]["conditions"] if x["type"] == "Ready")
    assert ready["reason"] == "MetricQueryNotAllowed"
    assert ready["message"].startswith("spec.endpoint.spillover.query: free PromQL")
    assert all(w.kind != KIND for w in hub.works.values())  # nothing written


# InferencePoolImport (spec.endpoint.inferencePoolImport) -------------------------------------

def _import(hub: FakeHub) -> dict[str, Any] | None:
    return hub.objects.get(("inferencepoolimports", "ns", "iris"))


def test_the_serving_set_is_published_as_an_inference_pool_import_owned_by_the_model() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    platform_ready(hub, "c1", "c2")
    rec = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    spec: dict[str, Any] = {"inferencePoolImport": True, "policy": "Failover",
                            "priority": ["c2", "c1"]}

    def step() -> Any:
        b = isvc_body(hub.statuses.get("iris"))
        b["metadata"]["uid"] = "0b5e-uid"
        b["spec"]["endpoint"] = spec
        return asyncio.run(rec.reconcile(KIND, b))

    step()
    got = _import(hub)
    assert got is not None
    assert got["metadata"]["ownerReferences"] == [{
        "apiVersion": c.API_VERSION, "kind": KIND, "name": "iris", "uid": "0b5e-uid",
        "controller": True, "blockOwnerDeletion": False}]
    (entry,) = got["status"]["controllers"]
    assert entry["name"] == "modelserving.opendatahub.io/fleet-endpoint"
    assert entry["exportingClusters"] == []
    assert entry["conditions"][0]["status"] == "False"
    assert hub.statuses["iris"]["endpoint"]["poolImport"] == "iris"
    settle(hub)
    step()
    (entry,) = _import(hub)["status"]["controllers"]  # type: ignore[index]
    assert entry["exportingClusters"] == [{"name": "c2"}]  # Failover: the active one
    assert (entry["conditions"][0]["status"], entry["conditions"][0]["reason"]) == (
        "True", "Accepted")
    # Steady: nothing written again.
    writes = len(hub.writes)
    step()
    step()
    assert len(hub.writes) == writes
    # Turned off: deleted, and the status forgets it.
    spec["inferencePoolImport"] = False
    step()
    assert _import(hub) is None
    assert hub.statuses["iris"]["endpoint"]["poolImport"] == ""
    assert ("delete", "inferencepoolimports/ns/iris") in hub.writes


def test_a_hub_without_the_inference_extension_gets_no_import_and_is_asked_again_later() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})}, served=set())
    platform_ready(hub, "c1")
    rec = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    b = isvc_body()
    b["spec"]["endpoint"] = {"inferencePoolImport": True}
    asyncio.run(rec.reconcile(KIND, b))
    assert hub.objects == {} and hub.statuses["iris"]["endpoint"]["poolImport"] == ""
    tried = [w for w in hub.writes if w[0] == "apply" and "inferencepoolimports" in w[1]]
    assert len(tried) == 1
    asyncio.run(rec.reconcile(KIND, isvc_body(hub.statuses["iris"], endpoint={
        "inferencePoolImport": True})))
    assert [w for w in hub.writes if "inferencepoolimports" in w[1]] == tried  # not again yet
    hub.served.add("inferencepoolimports")  # installed later: tried again after a while
    rec.pool_imports_unserved_until = 0.0
    asyncio.run(rec.reconcile(KIND, isvc_body(hub.statuses["iris"], endpoint={
        "inferencePoolImport": True})))
    assert _import(hub) is not None
