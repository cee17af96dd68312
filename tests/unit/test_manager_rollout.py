"""The pure rollout decision: steps, gates, rollback, pause, approval, undo (no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from addon_api.rollout import MetricGate, Rollout, RolloutStatus
from addon_manager.engine import rollout as ro
from addon_manager.engine.rollout import KEEP, ClusterState, Decision, Inputs, MetricAnswer

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
NAMES = ("c1", "c2", "c3", "c4")


def progressive(**kw: object) -> Rollout:
    return Rollout.model_validate({"strategy": "Progressive", "minSuccessTime": "0s", **kw})


def states(revs: dict[str, int | None], ready: Sequence[str] = (), failed: str = "",
           failure: str = "InferenceService failed: ModelLoadFailed") -> list[ClusterState]:
    return [ClusterState(n, revs.get(n), has_work=revs.get(n) is not None, ready=n in ready,
                         failure=failure if n == failed else "") for n in NAMES]


def decide(settings: Rollout, target: int, clusters: list[ClusterState],
           previous: RolloutStatus | None = None, at: float = 0, **kw: object) -> Decision:
    known = frozenset(kw.pop("known", {1, 2, 3}))  # type: ignore[arg-type]
    return ro.decide(Inputs(settings, target, clusters, T0 + timedelta(seconds=at), previous,
                            known, **kw))  # type: ignore[arg-type]


def test_a_first_revision_goes_one_cluster_at_a_time_to_complete() -> None:
    s = progressive()
    d = decide(s, 1, states({}))
    assert d.assign == {"c1": 1, "c2": None, "c3": None, "c4": None}
    assert (d.status.phase, d.status.step, d.status.steps) == ("Progressing", 1, 4)
    assert d.status.step_clusters == ["c1"]
    # c1's work now carries revision 1 but is not Ready: the step waits, nobody else moves.
    d = decide(s, 1, states({"c1": 1}), d.status, at=5)
    assert d.assign == {"c1": 1, "c2": None, "c3": None, "c4": None}
    assert [(g.gate, g.state, g.message) for g in d.status.gates] == [("Ready", "Pending",
                                                                       "0/1 Ready")]
    # Ready: the step passes and the next starts in the same decision.
    d = decide(s, 1, states({"c1": 1}, ready=["c1"]), d.status, at=10)
    assert d.assign == {"c1": 1, "c2": 1, "c3": None, "c4": None}
    assert (d.status.step, d.status.step_clusters, d.status.updated) == (2, ["c2"], 1)
    assert [e[1] for e in d.events] == ["RolloutStepPassed", "RolloutStep"]
    all_on = {n: 1 for n in NAMES}
    d = decide(s, 1, states(all_on, ready=NAMES), d.status.model_copy(
        update={"step": 4, "step_clusters": ["c4"]}), at=20)
    assert (d.status.phase, d.status.stable_revision, d.status.updated) == ("Complete", 1, 4)
    assert d.assign == all_on
    assert ("Normal", "RolloutComplete", "revision 1 is on every cluster") in d.events


def test_never_more_clusters_on_the_new_revision_than_max_concurrency_before_gates_pass(
) -> None:
    """Simulated fleet: each cluster takes two ticks to be Ready on what it was sent."""
    s = progressive(maxConcurrency=2, minSuccessTime="10s")
    revs: dict[str, int | None] = {n: 1 for n in NAMES}
    sent_at: dict[str, float] = {}
    status = RolloutStatus(phase="Complete", stable_revision=1, target_revision=1)
    for tick in range(40):
        now = tick * 5.0
        ready = [n for n in NAMES if now - sent_at.get(n, -100) >= 10]
        d = decide(s, 2, states(revs, ready=ready), status, at=now)
        status = d.status
        unproven = [n for n, a in d.assign.items() if a == 2 and not (
            revs[n] == 2 and n in ready and n not in status.step_clusters)]
        assert len(unproven) <= 2, (tick, d.assign, status)
        for n, a in d.assign.items():
            if a != revs[n]:
                revs[n], sent_at[n] = a if isinstance(a, int) else None, now
        if status.phase == "Complete":
            break
    assert status.phase == "Complete" and set(revs.values()) == {2}
    assert status.stable_revision == 2


def test_a_failing_step_rolls_every_cluster_back_and_holds_until_the_spec_changes() -> None:
    s = progressive()
    stable = RolloutStatus(phase="Complete", stable_revision=1, target_revision=1)
    d = decide(s, 2, states({n: 1 for n in NAMES}), stable)
    assert d.assign == {"c1": 2, "c2": 1, "c3": 1, "c4": 1}
    revs = {"c1": 2, "c2": 1, "c3": 1, "c4": 1}
    d = decide(s, 2, states(revs, failed="c1"), d.status, at=30)
    assert d.assign == {n: 1 for n in NAMES}
    st = d.status
    assert (st.phase, st.failed_revision, st.stable_revision) == ("RolledBack", 2, 1)
    assert "revision 2 failed at step 1 on cluster c1: Ready: InferenceService failed" in (
        st.message)
    assert [e[:2] for e in d.events] == [("Warning", "RolloutRolledBack")]
    # Held: the same spec is not tried again, even when c1 recovers.
    d = decide(s, 2, states({n: 1 for n in NAMES}, ready=NAMES), st, at=60)
    assert d.assign == {n: 1 for n in NAMES} and d.status.phase == "RolledBack"
    assert d.events == []
    # A new spec (revision 3) starts again from the stable revision.
    d = decide(s, 3, states({n: 1 for n in NAMES}, ready=NAMES), st, at=90)
    assert d.assign == {"c1": 3, "c2": 1, "c3": 1, "c4": 1}
    assert (d.status.phase, d.status.failed_revision, d.status.step) == ("Progressing",
                                                                          None, 1)


def test_a_failure_from_the_old_revision_does_not_fail_the_step() -> None:
    stable = RolloutStatus(phase="Complete", stable_revision=1, target_revision=1)
    d = decide(progressive(), 2, states({n: 1 for n in NAMES}, failed="c1"), stable)
    assert d.status.phase == "Progressing" and d.assign["c1"] == 2


def test_the_progress_deadline_fails_a_step_that_never_gets_ready() -> None:
    s = progressive(progressDeadline="1m", failurePolicy="Pause")
    stable = RolloutStatus(phase="Complete", stable_revision=1, target_revision=1)
    d = decide(s, 2, states({n: 1 for n in NAMES}), stable)
    revs = {"c1": 2, "c2": 1, "c3": 1, "c4": 1}
    d = decide(s, 2, states(revs), d.status, at=30)
    assert d.status.phase == "Progressing" and d.recheck_after == 30
    d = decide(s, 2, states(revs), d.status, at=61)
    st = d.status
    assert st.phase == "Halted" and st.gates[-1].gate == "ProgressDeadline"
    assert st.gates[-1].cluster == "c1"
    assert d.assign == revs  # Pause: the rollout stops where it is
    assert "halted (failurePolicy Pause)" in st.message
    d = decide(s, 2, states(revs, ready=["c1"]), st, at=90)  # held even if c1 gets Ready
    assert d.status.phase == "Halted" and d.assign == revs


def test_min_success_time_counts_from_when_the_step_was_all_ready() -> None:
    s = progressive(minSuccessTime="30s")
    stable = RolloutStatus(phase="Complete", stable_revision=1, target_revision=1)
    revs = {"c1": 2, "c2": 1, "c3": 1, "c4": 1}
    d = decide(s, 2, states({n: 1 for n in NAMES}), stable)
    d = decide(s, 2, states(revs, ready=["c1"]), d.status, at=10)
    assert d.status.step_ready_since == T0 + timedelta(seconds=10)
    assert d.recheck_after == 30
    d = decide(s, 2, states(revs, ready=[]), d.status, at=20)  # not Ready: starts again
    assert d.status.step_ready_since is None
    d = decide(s, 2, states(revs, ready=["c1"]), d.status, at=25)
    d = decide(s, 2, states(revs, ready=["c1"]), d.status, at=50)
    assert d.status.step == 1 and d.status.gates[-1].state == "Pending"
    d = decide(s, 2, states(revs, ready=["c1"]), d.status, at=56)
    assert d.status.step == 2 and d.assign["c2"] == 2


def test_manual_approval_holds_each_later_step_until_annotated() -> None:
    s = progressive(manualApproval=True)
    stable = RolloutStatus(phase="Complete", stable_revision=1, target_revision=1)
    revs = {"c1": 2, "c2": 1, "c3": 1, "c4": 1}
    d = decide(s, 2, states({n: 1 for n in NAMES}), stable)  # the first step needs none
    d = decide(s, 2, states(revs, ready=["c1"]), d.status, at=5)
    assert d.status.phase == "WaitingForApproval" and d.assign["c2"] == 1
    assert "rollout.modelserving.opendatahub.io/approve=2/2" in d.status.message
    d = decide(s, 2, states(revs, ready=["c1"]), d.status, at=6, approved="2/3")
    assert d.status.phase == "WaitingForApproval"
    d = decide(s, 2, states(revs, ready=["c1"]), d.status, at=7, approved="2/2")
    assert d.status.phase == "Progressing" and d.assign["c2"] == 2


def test_paused_starts_no_step() -> None:
    stable = RolloutStatus(phase="Complete", stable_revision=1, target_revision=1)
    d = decide(progressive(), 2, states({n: 1 for n in NAMES}), stable, paused=True)
    assert d.status.phase == "Paused" and set(d.assign.values()) == {1}


def test_a_metric_gate_is_asked_for_the_step_and_its_failure_rolls_back() -> None:
    s = progressive(metricGate=MetricGate(query='x{cluster=~"$clusters"}', max_value=0.1))
    stable = RolloutStatus(phase="Complete", stable_revision=1, target_revision=1)
    revs = {"c1": 2, "c2": 1, "c3": 1, "c4": 1}
    d = decide(s, 2, states({n: 1 for n in NAMES}), stable)
    d = decide(s, 2, states(revs, ready=["c1"]), d.status, at=5)
    assert d.metric_for == ("c1",) and d.status.gates[-1].state == "Pending"
    ok = MetricAnswer(("c1",), "Passed", "max 0.02 <= 0.1")
    d2 = decide(s, 2, states(revs, ready=["c1"]), d.status, at=6, metric=ok)
    assert d2.status.step == 2 and d2.assign["c2"] == 2
    bad = MetricAnswer(("c1",), "Failed", "0.4 > 0.1", cluster="c1")
    d3 = decide(s, 2, states(revs, ready=["c1"]), d.status, at=6, metric=bad)
    assert d3.status.phase == "RolledBack" and set(d3.assign.values()) == {1}
    assert "Metric: 0.4 > 0.1" in d3.status.message
    stale = MetricAnswer(("c9",), "Passed", "for other clusters")
    d4 = decide(s, 2, states(revs, ready=["c1"]), d.status, at=6, metric=stale)
    assert d4.status.step == 1


def test_percentages_and_groups_make_the_steps() -> None:
    assert ro.step_size(progressive(maxConcurrency="25%"), 10) == 2
    assert ro.step_size(progressive(maxConcurrency="10%"), 4) == 1
    s = Rollout.model_validate({"strategy": "ProgressivePerGroup", "maxConcurrency": "100%",
                                "mandatoryGroups": ["canary"]})
    clusters = [ClusterState("a", group="prod", group_index=0),
                ClusterState("b", group="prod", group_index=0),
                ClusterState("z", group="canary", group_index=1)]
    assert ro.next_batch(s, clusters, 1) == ["z"]
    d = ro.decide(Inputs(s, 1, clusters, T0))
    assert d.status.step_clusters == ["z"] and d.status.steps == 2


def test_works_from_before_rollouts_are_kept_until_reached() -> None:
    clusters = [ClusterState(n, None, has_work=True) for n in NAMES]
    d = ro.decide(Inputs(progressive(), 1, clusters, T0))
    assert d.assign == {"c1": 1, "c2": KEEP, "c3": KEEP, "c4": KEEP}


def test_an_undo_sends_everyone_to_the_named_revision_and_holds() -> None:
    st = RolloutStatus(phase="Progressing", stable_revision=1, target_revision=3, step=1,
                       step_clusters=["c1"], step_started=T0)
    revs = {"c1": 3, "c2": 1, "c3": 1, "c4": 1}
    d = decide(progressive(), 3, states(revs), st, undo=2)
    assert set(d.assign.values()) == {2}
    assert (d.status.phase, d.status.stable_revision, d.status.failed_revision) == (
        "RolledBack", 2, 3)
    assert d.events[0][1] == "RolloutUndone"
    d = decide(progressive(), 3, states({n: 2 for n in NAMES}), d.status, undo=2)
    assert d.events == [] and set(d.assign.values()) == {2}


def test_no_revision_to_return_to_halts_instead() -> None:
    d = decide(progressive(), 1, states({}))
    d = decide(progressive(), 1, states({"c1": 1}, failed="c1"), d.status, at=5)
    assert d.status.phase == "Halted" and "no earlier revision to return to" in (
        d.status.message)
    assert d.assign == {"c1": 1, "c2": None, "c3": None, "c4": None}


def test_a_failure_on_a_cluster_of_a_passed_step_fails_the_rollout() -> None:
    st = RolloutStatus(phase="Progressing", stable_revision=1, target_revision=2, step=2,
                       step_clusters=["c2"], step_started=T0)
    revs = {"c1": 2, "c2": 2, "c3": 1, "c4": 1}
    d = decide(progressive(), 2, states(revs, failed="c1"), st, at=5)
    assert d.status.phase == "RolledBack" and "on cluster c1" in d.status.message
