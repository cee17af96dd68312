"""Progressive rollout: which revision each cluster's work renders, and where the rollout stands.

Pure. :func:`decide` reads the intent's rollout settings, the revision of its spec (the
target), the previous ``status.rollout``, each selected cluster's state (the revision its
work carries, Ready, a failure) and the answers of the slow gates the reconciler fetched
(the metric query), and returns the revision each cluster gets and the new rollout status.

The rules:

* A step is a batch of clusters not yet on the target (cluster name order; per decision
  group with ``ProgressivePerGroup``, mandatory groups first), at most ``maxConcurrency``.
* A step passes when its clusters are all Ready, have stayed Ready for ``minSuccessTime``,
  and the metric gate (if any) passed; then the next step starts in the same reconcile (after
  an approval, when one is asked for). A step fails when one of its clusters reports a
  failure, the metric gate sees a value outside its bounds, or ``progressDeadline`` passes.
* A failed step with ``failurePolicy: Rollback`` returns every cluster on the target to the
  stable revision (the last one Ready everywhere) and records the target as failed: it is not
  tried again until the spec changes. With ``Pause`` (or no stable revision to return to) the
  rollout halts where it is.
* Clusters not reached keep the revision their work has (a work from before rollouts
  existed is kept as it is); a cluster without work gets the stable revision (none before the
  first rollout completes).
* Paused (annotation), nothing new starts; an undo (annotation ``<target>:<revision>``)
  sends every cluster to that revision and holds there until the spec changes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from addon_api.reasons import RolloutPhase
from addon_api.rollout import GateResult, Rollout, RolloutPhaseName, RolloutStatus, seconds


def _name(phase: RolloutPhase) -> RolloutPhaseName:
    return phase.value


class _P:
    """The rollout phases (:class:`~addon_api.reasons.RolloutPhase`) as the model's type."""

    PROGRESSING = _name(RolloutPhase.PROGRESSING)
    WAITING_FOR_APPROVAL = _name(RolloutPhase.WAITING_FOR_APPROVAL)
    PAUSED = _name(RolloutPhase.PAUSED)
    HALTED = _name(RolloutPhase.HALTED)
    ROLLED_BACK = _name(RolloutPhase.ROLLED_BACK)
    COMPLETE = _name(RolloutPhase.COMPLETE)


KEEP: Literal["keep"] = "keep"
"""Leave the cluster's work exactly as it is (it predates revisions)."""

Assignment = int | Literal["keep"] | None
"""A revision number, :data:`KEEP`, or None (no work on that cluster)."""

MAX_LISTED = 100
"""Most step clusters ``status.rollout.stepClusters`` lists."""


@dataclass(frozen=True)
class ClusterState:
    """One selected cluster as the rollout sees it."""

    cluster: str
    revision: int | None = None
    """The revision its work carries (None: no work, or one without a revision)."""
    has_work: bool = False
    ready: bool = False
    """Its work is at its latest render and reports Ready."""
    failure: str = ""
    """What failed there ("" when nothing did)."""
    group: str = ""
    """Its decision group's name (ProgressivePerGroup)."""
    group_index: int = 0
    """Its decision group's index in the Placement."""


@dataclass(frozen=True)
class MetricAnswer:
    """The metric gate's answer for a set of clusters."""

    clusters: tuple[str, ...]
    state: Literal["Pending", "Passed", "Failed"]
    message: str
    cluster: str = ""


@dataclass(frozen=True)
class Inputs:
    """Everything :func:`decide` reads."""

    settings: Rollout
    target: int
    """The revision of the current spec."""
    clusters: Sequence[ClusterState]
    now: datetime
    previous: RolloutStatus | None = None
    known: frozenset[int] = frozenset()
    """Revisions kept on the hub (a work's revision outside them is not kept)."""
    paused: bool = False
    approved: str = ""
    """The approve annotation (``<revision>/<step>``)."""
    undo: int | None = None
    """The revision the undo annotation asks for (only when it names this target)."""
    metric: MetricAnswer | None = None


@dataclass
class Decision:
    """What :func:`decide` returns."""

    assign: dict[str, Assignment]
    status: RolloutStatus
    events: list[tuple[str, str, str]] = field(default_factory=list)
    """(type, reason, message) of what happened in this reconcile."""
    metric_for: tuple[str, ...] = ()
    """Clusters the metric gate is to be evaluated for (empty: none)."""
    recheck_after: float | None = None
    """Seconds until a gate is decided by the clock alone (min success, deadline)."""


def step_size(settings: Rollout, selected: int) -> int:
    """Clusters per step: the count, or the percentage of ``selected`` (at least 1)."""
    value = settings.max_concurrency
    if isinstance(value, int):
        return max(1, value)
    return max(1, math.floor(selected * int(value.rstrip("%")) / 100))


def order(settings: Rollout, clusters: Sequence[ClusterState]) -> list[ClusterState]:
    """The order clusters are reached in."""
    if settings.strategy != "ProgressivePerGroup":
        return sorted(clusters, key=lambda c: c.cluster)
    first = {name: i for i, name in enumerate(settings.mandatory_groups)}
    return sorted(clusters, key=lambda c: (
        first.get(c.group, len(first)), c.group_index, c.cluster))


def next_batch(settings: Rollout, clusters: Sequence[ClusterState], target: int) -> list[str]:
    """The clusters of the next step: the first not on the target, one group at a time."""
    size = step_size(settings, len(clusters))
    todo = [c for c in order(settings, clusters) if c.revision != target]
    if not todo:
        return []
    if settings.strategy == "ProgressivePerGroup":
        todo = [c for c in todo if (c.group, c.group_index) == (todo[0].group,
                                                                 todo[0].group_index)]
    return [c.cluster for c in todo[:size]]


def _steps_left(settings: Rollout, clusters: Sequence[ClusterState], target: int) -> int:
    size = step_size(settings, len(clusters))
    todo = [c for c in order(settings, clusters) if c.revision != target]
    if settings.strategy != "ProgressivePerGroup":
        return math.ceil(len(todo) / size)
    groups: dict[tuple[str, int], int] = {}
    for c in todo:
        groups[(c.group, c.group_index)] = groups.get((c.group, c.group_index), 0) + 1
    return sum(math.ceil(n / size) for n in groups.values())


def _fresh(previous: RolloutStatus | None, target: int) -> RolloutStatus:
    """The rollout status to continue from: the previous one for this target, else a new one."""
    stable = previous.stable_revision if previous else None
    if previous is not None and previous.target_revision == target:
        return previous.model_copy(deep=True)
    return RolloutStatus(phase=_P.PROGRESSING, stable_revision=stable, target_revision=target)


def decide(inp: Inputs) -> Decision:
    """The revision of every selected cluster and the rollout's status (module docstring)."""
    st = _fresh(inp.previous, inp.target)
    by_name = {c.cluster: c for c in inp.clusters}
    target = inp.target
    out = Decision({}, st)

    if inp.undo is not None and inp.undo in inp.known:
        out.assign = {c.cluster: inp.undo for c in inp.clusters}
        if (st.phase, st.stable_revision, st.failed_revision) != (
                _P.ROLLED_BACK, inp.undo, target):
            out.events.append(("Normal", "RolloutUndone", f"revision {target} undone: every "
                               f"cluster goes back to revision {inp.undo}"))
        st.phase, st.stable_revision, st.failed_revision = _P.ROLLED_BACK, inp.undo, target
        st.step_clusters, st.step_started, st.step_ready_since = [], None, None
        st.message = f"undone to revision {inp.undo}; held there until the spec changes"
        _count(st, inp)
        return out
    if target == st.stable_revision:
        out.assign = {c.cluster: target for c in inp.clusters}
        _complete(st, inp, out)
        return out
    if st.failed_revision == target:  # rolled back: held until the spec changes
        out.assign = {c.cluster: st.stable_revision if st.stable_revision is not None
                      else _keep_or_stable(c, inp, None) for c in inp.clusters}
        _count(st, inp)
        return out
    if st.phase == _P.HALTED:  # a failed step under Pause: held until the spec changes
        _assign(out, inp, [n for n in st.step_clusters if n in by_name])
        _count(st, inp)
        return out

    in_step = [n for n in st.step_clusters if n in by_name]
    while True:
        if not in_step:
            batch = next_batch(inp.settings, inp.clusters, target)
            if not batch:
                _assign(out, inp, [])
                _complete(st, inp, out)
                return out
            wanted = f"{target}/{st.step + 1}"
            if inp.paused:
                st.phase, st.message = _P.PAUSED, "paused by annotation: no step starts"
                break
            if inp.settings.manual_approval and st.step >= 1 and inp.approved != wanted:
                st.phase = _P.WAITING_FOR_APPROVAL
                st.message = (f"step {st.step + 1} waits for approval (annotate "
                              f"rollout.modelserving.opendatahub.io/approve={wanted})")
                break
            st.step += 1
            st.step_clusters, in_step = batch[:MAX_LISTED], batch
            st.step_started, st.step_ready_since, st.gates = inp.now, None, []
            out.events.append(("Normal", "RolloutStep",
                               f"revision {target} step {st.step}: " + ", ".join(batch)))
        verdict = _gates(st, inp, [by_name[n] for n in in_step], out, inp.clusters)
        if verdict == "Failed":
            _fail(st, inp, out, in_step)
            _count(st, inp)
            return out
        if verdict == "Pending":
            st.phase = _P.PAUSED if inp.paused else _P.PROGRESSING
            st.message = f"revision {target} step {st.step}: " + "; ".join(
                f"{g.gate} {g.message}" for g in st.gates if g.state != "Passed")
            break
        out.events.append(("Normal", "RolloutStepPassed",
                           f"revision {target} step {st.step} passed"))
        st.step_clusters, in_step = [], []  # its clusters are on the target now
    _assign(out, inp, in_step)
    _count(st, inp)
    return out


def _keep_or_stable(c: ClusterState, inp: Inputs, stable: int | None) -> Assignment:
    """A cluster not reached: what its work has (if kept), else the stable revision."""
    if c.revision is not None and c.revision in inp.known:
        return c.revision
    if c.has_work and c.revision is None:
        return KEEP
    return stable


def _assign(out: Decision, inp: Inputs, in_step: Sequence[str]) -> None:
    step = set(in_step)
    stable = out.status.stable_revision
    out.assign = {c.cluster: inp.target if c.cluster in step or c.revision == inp.target
                  else _keep_or_stable(c, inp, stable) for c in inp.clusters}


def _gates(st: RolloutStatus, inp: Inputs, step: Sequence[ClusterState],
           out: Decision, everyone: Sequence[ClusterState]) -> Literal["Passed", "Pending",
                                                                      "Failed"]:
    """Judge the step's gates into ``st.gates``.

    A failure on any cluster on the target fails the step, also on one whose step passed.
    """
    target, now, settings = inp.target, inp.now, inp.settings
    elapsed = (now - (st.step_started or now)).total_seconds()
    deadline = seconds(settings.progress_deadline)
    failed = [c for c in [*step, *everyone] if c.revision == target and c.failure]
    if failed:
        st.gates = [GateResult(gate="Ready", state="Failed", cluster=failed[0].cluster,
                               message=failed[0].failure)]
        return "Failed"
    ready = [c for c in step if c.revision == target and c.ready]
    gates = [GateResult(gate="Ready", state="Passed" if len(ready) == len(step) else "Pending",
                        message=f"{len(ready)}/{len(step)} Ready")]
    verdict: Literal["Passed", "Pending", "Failed"] = "Passed"
    waits: list[float] = []
    if len(ready) < len(step):
        st.step_ready_since = None
        verdict = "Pending"
    else:
        since = st.step_ready_since or now
        st.step_ready_since = since
        held, need = (now - since).total_seconds(), seconds(settings.min_success_time)
        if held < need:
            gates.append(GateResult(
                gate="MinSuccessTime", state="Pending",
                message=f"all Ready since {since:%H:%M:%S}Z; passes after {need:.0f}s"))
            waits.append(need - held)
            verdict = "Pending"
        else:
            if need:
                gates.append(GateResult(gate="MinSuccessTime", state="Passed",
                                        message=f"Ready for {held:.0f}s"))
            if settings.metric_gate is not None:
                names = tuple(c.cluster for c in step)
                out.metric_for = names
                answer = inp.metric if inp.metric and inp.metric.clusters == names else None
                state = answer.state if answer else "Pending"
                gates.append(GateResult(
                    gate="Metric", state=state, cluster=answer.cluster if answer else "",
                    message=answer.message if answer else "not evaluated yet"))
                if state == "Failed":
                    st.gates = gates
                    return "Failed"
                if state == "Pending":
                    verdict = "Pending"
    if verdict == "Pending":
        if elapsed >= deadline:
            late = next((c.cluster for c in step if not (c.revision == target and c.ready)),
                        step[0].cluster)
            pending = "; ".join(f"{g.gate} {g.message}" for g in gates if g.state == "Pending")
            st.gates = [*gates, GateResult(
                gate="ProgressDeadline", state="Failed", cluster=late,
                message=f"step not passed {deadline:.0f}s after it started ({pending})")]
            return "Failed"
        waits.append(deadline - elapsed)
        out.recheck_after = min(waits)
    st.gates = gates
    return verdict


def _fail(st: RolloutStatus, inp: Inputs, out: Decision, in_step: Sequence[str]) -> None:
    gate = next(g for g in st.gates if g.state == "Failed")
    what = (f"revision {inp.target} failed at step {st.step} on cluster {gate.cluster}: "
            f"{gate.gate}: {gate.message}")
    stable = st.stable_revision
    if inp.settings.failure_policy == "Rollback" and stable is not None:
        out.assign = {c.cluster: stable for c in inp.clusters}
        st.phase, st.failed_revision = _P.ROLLED_BACK, inp.target
        st.message = f"{what}; every cluster goes back to revision {stable}"
        out.events.append(("Warning", "RolloutRolledBack", st.message))
        return
    _assign(out, inp, in_step)
    st.phase = _P.HALTED
    why = ("no earlier revision to return to" if inp.settings.failure_policy == "Rollback"
           else "failurePolicy Pause")
    st.message = f"{what}; halted ({why}) until the spec changes"
    out.events.append(("Warning", "RolloutHalted", st.message))


def _complete(st: RolloutStatus, inp: Inputs, out: Decision) -> None:
    if st.phase != _P.COMPLETE or st.stable_revision != inp.target:
        out.events.append(("Normal", "RolloutComplete",
                           f"revision {inp.target} is on every cluster"))
    st.phase, st.stable_revision, st.failed_revision = _P.COMPLETE, inp.target, None
    st.step_clusters, st.step_started, st.step_ready_since, st.gates = [], None, None, []
    st.message = f"revision {inp.target} on every selected cluster"
    _count(st, inp)


def _count(st: RolloutStatus, inp: Inputs) -> None:
    st.updated = sum(1 for c in inp.clusters if c.revision == inp.target)
    in_step = set(st.step_clusters)
    left = _steps_left(inp.settings, [c for c in inp.clusters if c.cluster not in in_step],
                       inp.target)
    st.steps = st.step + left if st.phase in (_P.PROGRESSING, _P.PAUSED,
                                              _P.WAITING_FOR_APPROVAL) else st.step
