"""A progressive rollout inside one plan: the revisions, which one each cluster renders.

Pure. For an intent whose ``spec.rollout.strategy`` is not ``All``, :func:`plan_rollout`
resolves the spec's revision (:mod:`addon_manager.facts.revisions`), reads each selected cluster's
state from its work (the revision it carries, Ready or failed as its status entry would
say), lets :func:`addon_manager.engine.rollout.decide` assign revisions, and returns the intent to
render for each revision in use, the revision to create, the ones to prune and the new
``status.rollout``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from pydantic import ValidationError

from addon_api import constants as c
from addon_api.common import Resource
from addon_api.rollout import MetricGate, Rollout, RolloutStatus
from addon_manager.engine import rollout
from addon_manager.engine import status as st
from addon_manager.engine.rollout import Assignment, ClusterState, MetricAnswer
from addon_manager.facts import revisions
from addon_manager.facts.records import ClusterFact, WorkFact
from addon_manager.facts.revisions import RevisionFact
from addon_manager.kinds.render import REVISION_FEEDBACK


def settings_of(intent: Resource) -> Rollout | None:
    """The intent's rollout settings when they are progressive (None: all at once)."""
    found = getattr(cast(Any, intent).spec, "rollout", None)
    return found if isinstance(found, Rollout) and found.strategy != "All" else None


@dataclass
class RolloutPlan:
    """What the rollout decided for one plan."""

    target: int
    assign: dict[str, Assignment]
    intents: dict[int, Resource | str]
    """The intent to render for each assigned revision (a message when that revision cannot
    be read with today's schema)."""
    create: dict[str, Any] | None
    prune: list[str]
    status: RolloutStatus
    events: list[tuple[str, str, str]] = field(default_factory=list)
    metric_for: tuple[str, ...] = ()
    metric_gate: MetricGate | None = None
    """The gate to query for ``metric_for`` (the settings the plan read)."""
    recheck_after: float | None = None


def _previous(body: Mapping[str, Any]) -> RolloutStatus | None:
    raw = (body.get("status") or {}).get("rollout")
    try:
        return RolloutStatus.from_wire(raw) if isinstance(raw, Mapping) else None
    except ValidationError:
        return None


def _undo(annotations: Mapping[str, str], target: int) -> int | None:
    """The revision the undo annotation asks for while the spec's revision is ``target``."""
    value = str(annotations.get(c.ANNOTATION_ROLLOUT_UNDO, ""))
    when, _, to = value.partition(":")
    if when.strip() == str(target) and to.strip().isdigit():
        return int(to)
    return None


def cluster_state(kind: str, cluster: str, work: WorkFact | None, health: ClusterFact | None,
                  group: tuple[str, int], now: datetime, stale_after: float,
                  held_back: str = "") -> ClusterState:
    """One cluster as the rollout sees it: its work's revision, Ready, or its failure.

    ``held_back`` says why the cluster is not Ready although its own work is (a stack's
    step also waits for every model on the cluster to be Ready).
    """
    if work is None or work.deleting:
        return ClusterState(cluster, group=group[0], group_index=group[1])
    entry, category = st.cluster_status(kind, st.ClusterInput(cluster, work=work, health=health),
                                        now=now, stale_after=stale_after)
    # Only a report about the object as of the work's revision counts: until the work agent
    # reports it, what it fed back describes the revision before.
    fresh = work.revision is None or str(work.value(REVISION_FEEDBACK)) == str(work.revision)
    failure = f"{entry.reason}: {entry.message}" if fresh and category == "failed" else ""
    return ClusterState(cluster, work.revision, has_work=True,
                        ready=fresh and category == "ready" and not held_back, failure=failure,
                        group=group[0], group_index=group[1])


def _intent_at(intent: Resource, body: Mapping[str, Any], spec: Mapping[str, Any]
               ) -> Resource | str:
    """The intent as it was at a revision (today's placement and rollout settings)."""
    current = body.get("spec") or {}
    obj = {k: v for k, v in body.items() if k in ("apiVersion", "kind", "metadata")}
    obj["spec"] = {**spec, **{k: current[k] for k in revisions.NOT_CONTENT if k in current}}
    try:
        return type(intent).from_object(obj)
    except ValidationError as err:
        return f"the revision's spec is no longer valid: {err.errors()[0].get('msg', err)}"


def plan_rollout(
    kind: str, intent: Resource, body: Mapping[str, Any], settings: Rollout,
    clusters: Iterable[str], existing: Mapping[str, WorkFact], kept: Iterable[RevisionFact],
    groups: Mapping[str, tuple[str, int]], health: Mapping[str, ClusterFact | None],
    now: datetime, stale_after: float, metric: MetricAnswer | None = None,
    held_back: Mapping[str, str] | None = None, key: bytes = b"",
) -> RolloutPlan:
    """Decide the rollout of one intent over ``clusters`` (see the module docstring).

    ``held_back``: per cluster, why it is not Ready although the intent's own work is.
    ``key``: the manager's hash key; only the revisions sealed with it are the intent's
    (:func:`addon_manager.facts.revisions.trusted`).
    """
    seen = list(kept)
    meta = body.get("metadata") or {}
    kept = revisions.trusted(seen, key, kind, str(meta.get("namespace", "")),
                             str(meta.get("name", "")))
    revs = revisions.resolve(kind, body, kept, key, [f.number for f in seen])
    held = held_back or {}
    states = [cluster_state(kind, cl, existing.get(cl), health.get(cl), groups.get(cl, ("", 0)),
                            now, stale_after, held.get(cl, "")) for cl in sorted(clusters)]
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    decision = rollout.decide(rollout.Inputs(
        settings, revs.target, states, now, _previous(body), frozenset(revs.known),
        paused=str(annotations.get(c.ANNOTATION_ROLLOUT_PAUSE, "")).lower() == "true",
        approved=str(annotations.get(c.ANNOTATION_ROLLOUT_APPROVE, "")),
        undo=_undo(annotations, revs.target), metric=metric,
    ))
    used = {a for a in decision.assign.values() if isinstance(a, int)}
    intents: dict[int, Resource | str] = {
        n: intent if n == revs.target else _intent_at(intent, body, revs.known[n])
        for n in used}
    in_use = used | {w.revision for w in existing.values() if w.revision is not None}
    in_use |= {n for n in (decision.status.stable_revision, revs.target) if n is not None}
    prune = revisions.to_prune(kept, in_use, settings.revision_history_limit)
    return RolloutPlan(revs.target, decision.assign, intents, revs.create, prune,
                       decision.status, decision.events, decision.metric_for,
                       settings.metric_gate, decision.recheck_after)
