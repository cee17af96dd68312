"""Status aggregation: what the clusters report, folded into an intent's status.

Pure: per-cluster inputs (the work as last seen, what it waits for, conflicts, errors)
go in; :class:`~addon_api.common.IntentStatus` comes out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from addon_api import constants as c
from addon_api.common import ClusterStatus, Condition, IntentStatus, StatusSummary
from addon_api.conditions import condition
from addon_api.reasons import ClusterPhase as Phase
from addon_api.reasons import ClusterReason as Reason
from addon_api.reasons import IntentConditionType as ConditionType
from addon_api.reasons import IntentPhase, IntentReason, RolloutPhase, ServingPlatformPhase
from addon_api.rollout import RolloutStatus
from addon_manager.facts.records import WAITING_FOR_SPOKE, ClusterFact, WorkFact
from addon_manager.kinds.base import Category, Wait, spoke_phase
from addon_manager.kinds.model_serving import REASON_INTENTS_ON_CLUSTER, REASON_PLATFORM_REMOVING
from addon_manager.kinds.registry import spec_of

STALE_AFTER = 60.0
"""Default seconds a work may wait for the work agent before its cluster's entry is stale."""
STALE_CLUSTER = Reason.CLUSTER_UNAVAILABLE
"""Stale reason: the hub says the ManagedCluster is not Available."""
STALE_WORK = Reason.WORK_NOT_OBSERVED
"""Stale reason: the work agent has not picked up the work's current spec in time."""
CONDITION_DELETION_BLOCKED = ConditionType.DELETION_BLOCKED
NAMED_CLUSTERS = 10
SERVES_ANYWAY = frozenset({Reason.NO_ROUTE_API, Reason.NO_SERVICE_EXPORT_API,
                           Reason.SERVICE_EXPORT_NOT_CREATED})
"""Manifests not applied that leave the model as it is (its Route where the cluster has no
Route API, its ServiceExport): the entry is the model's own, with what is missing said."""
"""Clusters named in a condition message before "and N more"."""


@dataclass(frozen=True)
class ClusterInput:
    """Everything known about an intent on one cluster."""

    cluster: str
    work: WorkFact | None = None
    waits: Sequence[Wait] = ()
    conflict_with: str = ""
    """The intent that owns this cluster instead (ModelServing conflicts)."""
    taken: str = ""
    """What another intent already owns on this cluster that this one would overwrite (a
    spoke object of the same name, a namespace's storage-config Secret): the message."""
    error: str = ""
    """A render or apply error for this cluster."""
    error_reason: str = Reason.APPLY_FAILED
    health: ClusterFact | None = None
    """The ManagedCluster as the hub sees it (availability)."""
    blocked_by: Sequence[str] = ()
    """Add-on intents (``Kind ns/name``) whose works hold the stack on this cluster: the
    manager refuses to remove it (ModelServing only)."""
    platform_going: str = ""
    """Why the cluster's serving stack is going away (runtimes and models: not Ready)."""
    kept: str = ""
    """Why the works of a cluster its Placement no longer selects are kept (it left while not
    Available: partition safety); said in the entry's stale message."""
    no_addon: bool = False
    """The cluster has no ManagedClusterAddOn and the manager does not enable the add-on
    (ModelServing only): once its work is applied and no agent reports on it, the entry says
    the add-on is not enabled there (an agent deployed some other way still reports)."""


@dataclass(frozen=True)
class Staleness:
    """Why a cluster's entry is out of date, and since when."""

    reason: Reason
    since: datetime
    message: str


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def staleness(
    work: WorkFact | None, health: ClusterFact | None, now: datetime, stale_after: float
) -> tuple[Staleness | None, float | None]:
    """Whether what a cluster reported about one work is out of date.

    Returns the staleness (or None) and, when the work is waiting for the work agent but not
    yet for ``stale_after`` seconds, the seconds until it would become stale (so the caller
    can look again then). A ManagedCluster whose Available condition is False or Unknown makes
    the entry stale at once (the hub's registration controller already waited its grace
    period); a cluster without that condition yet is judged by its works only. Only a report
    can be stale: a work the work agent never reported on shows ``Applying`` /
    ``WorkNotApplied``. ``stale_after <= 0`` turns the work check off.
    """
    if work is None or work.deleting:
        return None, None
    if health is not None and health.available in ("False", "Unknown"):
        since = health.since or now
        detail = f": {health.message}" if health.message else ""
        return Staleness(
            STALE_CLUSTER, since,
            f"ManagedCluster {work.cluster} is not Available ({health.available}) since "
            f"{_iso(since)}{detail}",
        ), None
    if stale_after <= 0 or not work.reported or not work.unobserved or work.spec_time is None:
        # A work never reported on shows Applying/WorkNotApplied: nothing stale is shown.
        return None, None
    due = work.spec_time + timedelta(seconds=stale_after)
    if now < due:
        return None, (due - now).total_seconds()
    what = (
        f"the work agent has not picked up generation {work.generation} of ManifestWork "
        f"{work.cluster}/{work.name} (it reports generation {work.observed_generation})"
    )
    return Staleness(
        STALE_WORK, work.spec_time,
        f"{what} since {_iso(work.spec_time)}, more than {stale_after:g}s",
    ), None


def recheck_in(
    items: Iterable[ClusterInput], now: datetime, stale_after: float
) -> float | None:
    """Seconds until the first of these entries becomes stale by the clock alone, if any."""
    waits = [
        wait
        for item in items
        for _, wait in [staleness(item.work, item.health, now, stale_after)]
        if wait is not None
    ]
    return min(waits) if waits else None


@dataclass(frozen=True)
class PlacementState:
    """How the intent's Placement resolved."""

    name: str
    found: bool
    clusters: frozenset[str] = field(default_factory=frozenset)


def _s(value: object) -> str:
    return "" if value is None else str(value)


def cluster_status(
    kind: str, item: ClusterInput, *, removed: bool = False, now: datetime | None = None,
    stale_after: float = STALE_AFTER,
) -> tuple[ClusterStatus, Category]:
    """The per-cluster entry of an intent and its category (ready/progressing/failed/stale).

    ``removed`` is true for a ModelServing with managementState Removed (done = Removed).
    With ``now``, an entry whose report is out of date (see :func:`staleness`) becomes phase
    ``Stale``: not ready, the reason and message say what is stale and since when, and the
    last reported phase; url and modelState keep their last reported values. The revision
    is the one the cluster's work renders (progressive rollouts). A cluster that
    left the Placement while not Available and whose works are kept says so (``kept``).
    """
    entry, category = _reported_status(kind, item, removed)
    if (item.no_addon and entry.phase == Phase.APPLIED and not removed
            and item.work is not None and not item.work.value("phase")):
        # Applied, and no agent has said anything of it: there is none to.
        entry = entry.model_copy(update={
            "phase": Phase.WAITING, "reason": Reason.ADDON_NOT_ENABLED,
            "message": f"the add-on is not enabled on {item.cluster} (no ManagedClusterAddOn "
                       f"{c.ADDON_NAME}), so no agent installs the stack there; the manager "
                       "does not enable add-ons (manager.addonEnablement is false): the "
                       "platform admin's install strategy or clusteradm addon enable does"})
    if item.work is not None and item.work.revision is not None:
        entry = entry.model_copy(update={"revision": item.work.revision})
    if now is None or item.conflict_with or item.taken or item.error or item.blocked_by:
        # hub-side facts: current by nature
        return entry, category
    stale, _ = staleness(item.work, item.health, now, stale_after)
    if stale is None:
        return entry, category
    entry, _ = _reported_status(kind, item, removed, generation_check=False)
    last = entry.phase + (f" ({entry.reason})" if entry.reason and entry.reason != entry.phase
                          else "")
    kept = f"; {item.kept}" if item.kept else ""
    return entry.model_copy(update={
        "phase": Phase.STALE, "ready": False, "reason": stale.reason,
        "message": f"{stale.message}{kept}; last reported: {last}"[:1024],
        "stale": True, "stale_since": stale.since, "waiting_for": [],
    }), "stale"


def _reported_status(
    kind: str, item: ClusterInput, removed: bool, *, generation_check: bool = True
) -> tuple[ClusterStatus, Category]:
    cl = item.cluster
    if item.conflict_with:
        return ClusterStatus(
            cluster=cl, phase=Phase.CONFLICT, reason=Reason.CONFLICT,
            message=f"{item.conflict_with} (older) already serves this cluster",
        ), "failed"
    if item.taken:
        return ClusterStatus(cluster=cl, phase=Phase.CONFLICT, reason=Reason.CONFLICT,
                             message=item.taken), "failed"
    if item.error:
        return ClusterStatus(
            cluster=cl, phase=Phase.FAILED, reason=item.error_reason, message=item.error[:1024]
        ), "failed"
    if item.blocked_by:
        return ClusterStatus(
            cluster=cl, phase=Phase.REMOVAL_BLOCKED, reason=REASON_INTENTS_ON_CLUSTER,
            message=removal_refused_message(item.blocked_by)[:1024],
        ), "failed"
    work = item.work
    if work is None:
        if item.waits:
            return ClusterStatus(
                cluster=cl, phase=Phase.WAITING, reason=item.waits[0].reason,
                message="waiting for " + ", ".join(w.what for w in item.waits),
                waiting_for=[w.what for w in item.waits],
            ), "progressing"
        return ClusterStatus(cluster=cl, phase=Phase.PENDING, reason=Reason.SENDING), "progressing"
    if work.deleting:
        # What the spoke says while OCM removes the work's objects (the agent's uninstall may
        # be blocked: RemovalBlocked names what blocks it).
        spoke = spoke_phase(ServingPlatformPhase, work.value("phase"))
        owns_stack = spec_of(kind).owns_stack
        if owns_stack and spoke is ServingPlatformPhase.REMOVAL_BLOCKED:
            return ClusterStatus(
                cluster=cl, phase=Phase.REMOVING, reason=spoke,
                message=_s(work.value("message")),
            ), "failed"
        # The agent's own account while it uninstalls (e.g. waiting for InferenceServices).
        said = _s(work.value("message")) if owns_stack and spoke in (
            ServingPlatformPhase.REMOVING, ServingPlatformPhase.REMOVED) else ""
        return ClusterStatus(
            cluster=cl, phase=Phase.REMOVING, reason=Reason.WORK_DELETING,
            message=said or f"ManifestWork {cl}/{work.name} is being deleted: the work agent "
            "deletes what it applied on the cluster",
        ), "progressing"
    if generation_check and work.unobserved and work.reported:
        return ClusterStatus(
            cluster=cl, phase=Phase.APPLYING, reason=Reason.WORK_UPDATING,
            message=f"waiting for the work agent to pick up generation {work.generation}",
        ), "progressing"
    if work.applied == "False" and work.reason in SERVES_ANYWAY:
        # Exposure falls back to none where the cluster has no Route API, and an export that
        # did not happen leaves the model serving inside its cluster: the model counts by its
        # own state, and the entry says what is missing. (Were a failed export to fail the
        # model, the model would leave the serving set, the export would go, the model would
        # be Ready, join, and export again: a loop.)
        entry, category = spec_of(kind).report(work, removed)
        note = f"{entry.message}; {work.message}" if entry.message else work.message
        return entry.model_copy(update={"message": note[:1024]}), category
    if work.applied == "False" and work.reason == WAITING_FOR_SPOKE:
        return ClusterStatus(
            cluster=cl, phase=Phase.APPLYING, reason=WAITING_FOR_SPOKE, message=work.message
        ), "progressing"
    if work.applied == "False" and work.reason == Reason.SPOKE_OBJECT_OWNED:
        return ClusterStatus(
            cluster=cl, phase=Phase.CONFLICT, reason=Reason.SPOKE_OBJECT_OWNED,
            message=work.message,
        ), "failed"
    if work.applied == "False":
        return ClusterStatus(
            cluster=cl, phase=Phase.FAILED, reason=work.reason or Reason.NOT_APPLIED,
            message=work.message,
        ), "failed"
    if work.applied != "True":
        return ClusterStatus(
            cluster=cl, phase=Phase.APPLYING, reason=Reason.WORK_NOT_APPLIED
        ), "progressing"
    entry, category = spec_of(kind).report(work, removed)
    if item.platform_going and spec_of(kind).holds_stack:
        return entry.model_copy(update={
            "phase": Phase.DEGRADED, "ready": False, "reason": REASON_PLATFORM_REMOVING,
            "message": item.platform_going[:1024],
        }), "failed"
    return entry, category


def removal_refused_message(intents: Sequence[str]) -> str:
    """Why the manager leaves a cluster's stack in place: the intents that still use it."""
    head = ", ".join(intents[:NAMED_CLUSTERS])
    more = len(intents) - NAMED_CLUSTERS
    return (
        "the stack is not removed while add-on intents have ManifestWorks on this cluster: "
        + head + (f" and {more} more" if more > 0 else "")
        + "; delete them (or take this cluster out of their Placements) and removal proceeds"
    )


def _named(clusters: Sequence[str]) -> str:
    head = ", ".join(clusters[:NAMED_CLUSTERS])
    more = len(clusters) - NAMED_CLUSTERS
    return head + (f" and {more} more" if more > 0 else "")


_ORDER: dict[Category, int] = {"failed": 0, "stale": 1, "progressing": 2, "ready": 3}


def _since(entry: ClusterStatus, before: ClusterStatus | None, now: datetime) -> ClusterStatus:
    """The entry with lastUpdateTime: kept from ``before`` when nothing else changed."""
    if before is not None and before.model_dump(exclude={"last_update_time"}) == (
        entry.model_dump(exclude={"last_update_time"})
    ):
        return entry.model_copy(update={"last_update_time": before.last_update_time})
    return entry.model_copy(update={"last_update_time": now})


def aggregate(
    entries: Iterable[tuple[ClusterStatus, Category]],
    placement: PlacementState,
    generation: int | None,
    previous: IntentStatus | None,
    now: datetime,
    *,
    extra_conditions: Sequence[Condition] = (),
    max_clusters: int = c.MAX_CLUSTER_STATUSES,
    platform: bool = False,
    deleting: bool = False,
) -> IntentStatus:
    """The intent status: summary, conditions, phase and the bounded per-cluster list.

    ``platform`` marks a ModelServing: a stack being removed on any cluster (an entry
    ``Removing`` or ``RemovalBlocked``) or the intent being deleted (``deleting``) is never
    Ready, and the Ready condition's reason says so (``RemovalBlocked``, ``Removing``,
    ``Deleting``).
    """
    items = sorted(entries, key=lambda e: (_ORDER[e[1]], e[0].cluster))
    # A cluster the Placement no longer selects keeps its entry while its work goes (its
    # removal may be blocked there), but it is neither desired nor ready: the hub once said
    # "Ready 2/2" for a minute with the Placement selecting one cluster. Its removal's
    # progress, failure or silence still counts (a stuck removal is never hidden). A
    # Placement that is gone keeps every work, and every work counts.
    counted = [(s, cat) for s, cat in items
               if not placement.found or s.cluster in placement.clusters]
    failed = [s.cluster for s, cat in items if cat == "failed"]
    progressing = [s.cluster for s, cat in items if cat == "progressing"]
    ready = [s.cluster for s, cat in counted if cat == "ready"]
    stale = [s.cluster for s, cat in items if cat == "stale"]
    desired = len(counted)
    prev = previous.conditions if previous else []
    conds: list[Condition] = []

    def add(ctype: str, ok: bool, reason: str, message: str) -> None:
        conds.append(
            condition(ctype, ok, reason, message, previous=prev, generation=generation, now=now)
        )

    if not placement.found:
        add(ConditionType.PLACEMENT_RESOLVED, False, IntentReason.PLACEMENT_NOT_FOUND,
            f"Placement {placement.name} does not exist in this namespace; ManifestWorks "
            "already sent are kept until it exists again or this intent is deleted")
    elif not placement.clusters:
        add(ConditionType.PLACEMENT_RESOLVED, False, IntentReason.NO_CLUSTERS_SELECTED,
            f"Placement {placement.name} selects no cluster")
    else:
        add(ConditionType.PLACEMENT_RESOLVED, True, IntentReason.RESOLVED,
            f"Placement {placement.name} selects {len(placement.clusters)} cluster(s)")
    # RemovalBlocked: the manager's refusal (the entry's phase) or the agent's (its phase, or
    # the reason of a Removing entry); Removing: the manager's or the agent's. The values of
    # the ClusterPhase and ServingPlatformPhase members are the same strings.
    blocked = [s.cluster for s, _ in items
               if platform and ServingPlatformPhase.REMOVAL_BLOCKED in (s.phase, s.reason)]
    removing = [s.cluster for s, _ in items if platform and s.phase == Phase.REMOVING]
    all_ready = desired > 0 and len(ready) == desired and not deleting and not removing
    if blocked:
        add(ConditionType.READY, False, IntentReason.REMOVAL_BLOCKED,
            f"removal of the stack is blocked on {_named(blocked)}")
    elif deleting:
        add(ConditionType.READY, False, IntentReason.DELETING,
            "the ModelServing is being deleted: its stacks are being removed")
    elif removing:
        add(ConditionType.READY, False, IntentReason.REMOVING,
            f"the stack is being removed on {_named(removing)}")
    elif all_ready:
        add(ConditionType.READY, True, IntentReason.ALL_CLUSTERS_READY,
            f"ready on {desired} cluster(s)")
    elif desired == 0:
        add(ConditionType.READY, False, IntentReason.NO_CLUSTERS, "no cluster is selected")
    else:
        add(ConditionType.READY, False, IntentReason.NOT_ALL_CLUSTERS_READY,
            f"ready on {len(ready)}/{desired}")
    add(ConditionType.PROGRESSING, bool(progressing),
        IntentReason.CLUSTERS_PROGRESSING if progressing else IntentReason.STABLE,
        f"progressing on {_named(progressing)}" if progressing else "")
    problems = [f"failed on {_named(failed)}"] if failed else []
    if stale:
        problems.append(f"no current report from {_named(stale)} (stale)")
    add(ConditionType.DEGRADED, bool(problems),
        IntentReason.CLUSTERS_FAILED if failed
        else IntentReason.CLUSTERS_STALE if stale else IntentReason.NO_FAILURES,
        "; ".join(problems))
    conds.extend(extra_conditions)
    if failed or stale:
        phase = IntentPhase.DEGRADED
    elif all_ready:
        phase = IntentPhase.READY
    elif progressing or (desired and ready):
        phase = IntentPhase.PROGRESSING
    else:
        phase = IntentPhase.PENDING
    before = {x.cluster: x for x in (previous.clusters if previous else [])}
    kept = [_since(s, before.get(s.cluster), now) for s, _ in items[:max_clusters]]
    return IntentStatus(
        observed_generation=generation,
        phase=phase.value,  # the model's type is the literal of the enum's values
        conditions=conds,
        summary=StatusSummary.of(
            desired, len(ready), len(progressing), len(failed), stale=len(stale)
        ),
        clusters=kept,
        clusters_omitted=max(0, len(items) - len(kept)),
    )


def with_rollout(status: IntentStatus, rollout: RolloutStatus, previous: IntentStatus | None,
                 generation: int | None, now: datetime) -> IntentStatus:
    """The status with ``rollout`` and its RolledOut condition.

    A rollout that halted or rolled back means the spec is not in effect: the intent is
    Degraded and not Ready, whatever its clusters report (they serve an earlier revision).
    """
    prev = previous.conditions if previous else []
    reason = RolloutPhase(rollout.phase)  # the condition's reason is the rollout's phase
    done = reason == RolloutPhase.COMPLETE
    conds = [*status.conditions, condition(
        ConditionType.ROLLED_OUT, done, reason, rollout.message, previous=prev,
        generation=generation, now=now)]
    phase = status.phase
    if reason in (RolloutPhase.HALTED, RolloutPhase.ROLLED_BACK):
        conds = [condition(ConditionType.READY, False, reason, rollout.message, previous=prev,
                           generation=generation, now=now) if x.type == ConditionType.READY
                 else x for x in conds]
        phase = IntentPhase.DEGRADED.value
    return status.model_copy(update={"conditions": conds, "phase": phase, "rollout": rollout})


def deprecated(message: str, previous: IntentStatus | None, generation: int | None,
               now: datetime) -> Condition:
    """Deprecated (reason PlatformDeprecated): what the intent asks for has no future."""
    return condition(ConditionType.DEPRECATED, True, IntentReason.PLATFORM_DEPRECATED,
                     message, previous=previous.conditions if previous else (),
                     generation=generation, now=now)


def deletion_blocked(clusters: Sequence[str], generation: int | None, now: datetime) -> Condition:
    """The DeletionBlocked condition naming the clusters whose works do not go away."""
    return condition(
        CONDITION_DELETION_BLOCKED, True, IntentReason.WORKS_REMAIN,
        f"ManifestWorks not removed yet on {_named(list(clusters))} (is the cluster reachable?)",
        generation=generation, now=now,
    )


def deletion_refused(
    blocked: Mapping[str, Sequence[str]], generation: int | None, now: datetime
) -> Condition:
    """DeletionBlocked (reason IntentsOnCluster) naming the clusters and the intents on them."""
    clusters = sorted(blocked)
    parts = [f"{cl}: {', '.join(blocked[cl][:NAMED_CLUSTERS])}" for cl in clusters]
    more = len(parts) - NAMED_CLUSTERS
    return condition(
        CONDITION_DELETION_BLOCKED, True, IntentReason.INTENTS_ON_CLUSTER,
        ("the stack is not removed while add-on intents have ManifestWorks on the cluster; "
         + "; ".join(parts[:NAMED_CLUSTERS]) + (f"; and {more} more clusters" if more > 0 else "")
         )[:1024],
        generation=generation, now=now,
    )


def merge_patch_of(new: IntentStatus, new_dict: dict[str, Any],
                   old: Mapping[str, Any] | None) -> dict[str, Any]:
    """The status to merge-patch: ``new_dict``, with the rollout's unset fields as null.

    A merge patch leaves a field it omits as it was (a new step would keep the last one's
    timestamps); a rollout that no longer applies is removed.
    """
    out = dict(new_dict)
    if new.rollout is not None:
        out["rollout"] = new.rollout.model_dump(mode="json", by_alias=True)
    elif old and "rollout" in old:
        out["rollout"] = None
    return out


def comparable(status: dict[str, Any] | None) -> dict[str, Any]:
    """A status dict without timestamps, for deciding whether a write is needed."""
    if not status:
        return {}
    out = dict(status)
    out["conditions"] = [
        {k: v for k, v in cond.items() if k != "lastTransitionTime"}
        for cond in status.get("conditions") or []
    ]
    out["clusters"] = [
        {k: v for k, v in cl.items() if k != "lastUpdateTime"}
        for cl in status.get("clusters") or []
    ]
    return out
