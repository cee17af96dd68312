"""An intent's plan: what to write, delete and report, from a snapshot of the hub (pure).

:func:`plan` reads an intent and a :class:`Snapshot` (the world's facts, the admin's policy,
the sealer's pins, the manager's memory of its own recent writes and the time) and returns a
:class:`Plan`: the works to apply and delete, the pins to record, the add-ons to enable and,
per cluster, what its status entry is made of. It performs no I/O and changes nothing; the
executor (:mod:`addon_manager.shell.execute`) performs a plan and :func:`finish` folds what the
executor reports into the intent's status. What each kind does differently comes from its
:class:`~addon_manager.kinds.registry.KindSpec`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, cast

from pydantic import ValidationError

from addon_api import constants as c
from addon_api.base import field_errors
from addon_api.common import Condition, IntentStatus, Resource
from addon_api.hub import FleetEndpoint
from addon_api.reasons import ClusterReason, IntentReason
from addon_api.rollout import MetricGate
from addon_manager.engine import endpoint, partition, policy, progressive
from addon_manager.engine import status as st
from addon_manager.engine.rollout import KEEP, MetricAnswer
from addon_manager.facts import conflicts
from addon_manager.facts.records import ClusterFact, WorkFact, claimed_objects
from addon_manager.facts.revisions import RevisionFact
from addon_manager.facts.sealing import AgentKey, SealingView
from addon_manager.facts.world import World
from addon_manager.kinds import (
    agent_identity,
    base,
    model_serving,
    namespace_policy,
    render,
    tenant_access,
)
from addon_manager.kinds.base import KindSpec
from addon_manager.kinds.registry import CLAIMING_KINDS, STACK_HOLDERS, STACK_OWNERS

WATCH_GRACE = 15.0
"""Seconds a write of ours is trusted before the watch shows it (no duplicate writes)."""


@dataclass(frozen=True)
class Recent:
    """The manager's memory of its own writes (monotonic times), as the planner reads it.

    A write is trusted for :data:`WATCH_GRACE` seconds before the watch shows it, so that a
    reconcile woken meanwhile does not write the same thing again.
    """

    applied: Mapping[tuple[str, str], tuple[str, float, int]]
    """(cluster, work) -> (render hash, when, resourceVersion after it; 0: unknown) of the
    last apply."""
    deleted: Mapping[tuple[str, str], float]
    """(cluster, work) -> when its delete was sent."""
    addons: Mapping[str, float]
    """cluster -> when its ManagedClusterAddOn was created."""
    grant_retries: Mapping[tuple[str, str], float]
    """(cluster, access work) -> when the work agent was last asked to retry it."""
    now: float
    """The monotonic clock's reading for this plan."""
    revisions: Mapping[tuple[str, str, str], tuple[RevisionFact, ...]] = field(
        default_factory=dict)
    """Revisions created by this manager (the index may not show them yet), by intent."""

    def recently_applied(self, cluster: str, name: str, digest: str,
                         have: WorkFact | None = None) -> bool:
        """Whether exactly this render of the work was applied and the facts cannot show it yet.

        That is, the work as last seen (``have``) is older than our write (its
        resourceVersion), or, where versions cannot tell, the write is within the watch
        grace. After a start the works are listed while the first writes go out: the list's
        view predates them for as long as the list takes, which may exceed any grace.
        """
        seen = self.applied.get((cluster, name))
        if seen is None or seen[0] != digest:
            return False
        if have is not None and seen[2] and have.resource_version:
            return have.resource_version < seen[2]
        return self.now - seen[1] < WATCH_GRACE

    def needs_write(self, rw: render.RenderedWork, have: WorkFact | None) -> bool:
        """Whether the work on the hub (as last seen) differs from ``rw`` and was not just sent."""
        if have is not None and (have.render_hash == rw.render_hash or have.deleting):
            return False
        return not self.recently_applied(rw.cluster, rw.name, rw.render_hash, have)

    def delete_due(self, work: WorkFact) -> bool:
        """Whether a delete of ``work`` is to be sent (not deleting, not just sent)."""
        seen = self.deleted.get((work.cluster, work.name))
        return not work.deleting and (seen is None or self.now - seen >= WATCH_GRACE)

    def addon_due(self, cluster: str) -> bool:
        """Whether the add-on of ``cluster`` was not just created by us."""
        seen = self.addons.get(cluster)
        return seen is None or self.now - seen >= WATCH_GRACE

    def grant_retry_due(self, cluster: str, name: str) -> bool:
        """Whether the last retry of an access work is ``GRANT_RETRY_SECONDS`` old."""
        return self.now - self.grant_retries.get((cluster, name), 0.0) >= (
            tenant_access.GRANT_RETRY_SECONDS)


@dataclass(frozen=True)
class Snapshot:
    """Everything a plan is computed from."""

    world: World
    policy: policy.Policy
    sealer: SealingView
    """Pins, approvals and keys (read only)."""
    recent: Recent
    now: datetime
    """Wall-clock time (status timestamps, staleness, partition grace)."""
    stamp: str = ""
    """A fresh label value for access works the work agent should apply again."""
    stale_after: float = st.STALE_AFTER
    unavailable_grace: float = partition.UNAVAILABLE_GRACE
    addons: bool = True
    """Whether the manager enables the add-on on the clusters a stack goes to."""
    gates: Mapping[tuple[str, str, str], MetricAnswer] = field(default_factory=dict)
    """The last metric gate answer of each intent with a progressive rollout."""
    spills: Mapping[tuple[str, str, str], Mapping[str, str]] = field(default_factory=dict)
    """Per intent with spec.endpoint.spillover, the clusters its metric last found out of
    bounds, with what it found."""


@dataclass(frozen=True)
class Apply:
    """A ManifestWork to server-side apply."""

    what: str
    """``apply`` (the intent's own work), ``identity``, ``access`` or ``policy``."""
    kind: str
    """Owner kind of the work (metrics)."""
    work: render.RenderedWork
    have: WorkFact | None
    secret: str = ""
    """Hub Secret (in the intent's namespace) to read and seal into the work ("" for none)."""
    grant_retry: bool = False
    """An access work re-applied with a new retry label (remembered as such)."""


@dataclass(frozen=True)
class Delete:
    """A ManifestWork to delete (``send`` False: already going; shown as going)."""

    work: WorkFact
    send: bool


@dataclass
class Plan:
    """What one reconcile of an intent is to do, and what its status is made of."""

    spec: KindSpec
    namespace: str
    name: str
    generation: int | None
    previous_raw: Mapping[str, Any] | None
    previous: IntentStatus | None
    invalid: tuple[str, str] | None = None
    """(reason, message): the intent is not acted on at all; its status says why."""
    placement: st.PlacementState = field(default_factory=lambda: st.PlacementState("", False))
    removed: bool = False
    deleting: bool = False
    overdue: bool = False
    existing: dict[str, WorkFact] = field(default_factory=dict)
    """The intent's works as last seen, by cluster."""
    inputs: dict[str, st.ClusterInput] = field(default_factory=dict)
    """What each cluster's status entry is made of (before the writes' outcome)."""
    applies: list[Apply] = field(default_factory=list)
    deletes: list[Delete] = field(default_factory=list)
    pins: dict[str, AgentKey] = field(default_factory=dict)
    """Agent keys to pin (written before anything is sealed)."""
    addons: list[str] = field(default_factory=list)
    """Clusters whose ManagedClusterAddOn is to be created."""
    desired: int = 0
    """Works the intent wants written or kept (for the fan-out log)."""
    skipped: int = 0
    """Works already as wanted."""
    errors: list[str] = field(default_factory=list)
    """Reasons of the problems found while planning (counted in metrics)."""
    conflicts: list[str] = field(default_factory=list)
    blocked: dict[str, list[str]] = field(default_factory=dict)
    """Clusters whose stack is not removed, with the intents holding it."""
    held: dict[str, datetime] = field(default_factory=dict)
    """Clusters that left while not Available whose works are kept, with until when."""
    health: dict[str, ClusterFact | None] = field(default_factory=dict)
    """The ManagedCluster of every cluster with an entry, as last seen."""
    rollout: progressive.RolloutPlan | None = None
    """The progressive rollout's decision (None: the change goes everywhere at once)."""
    endpoint: FleetEndpoint | None = None
    """The intent's fleet endpoint (its kind's :attr:`KindSpec.endpoint`); None: the kind has
    none, no serving set is computed."""
    serving: frozenset[str] = frozenset()
    """The clusters taking traffic in the serving set the status last published (what a
    work that exports the model follows: :func:`serving_members`)."""
    spill_gate: MetricGate | None = None
    """spec.endpoint.spillover as the manager runs it (scoped: :func:`policy.scoped_gate`)."""
    spilled: Mapping[str, str] = field(default_factory=dict)
    """The clusters the spillover metric last found out of bounds (:attr:`Snapshot.spills`)."""
    deprecated: str = ""
    """Why what the intent asks for is deprecated (its Deprecated condition), if it is."""
    judged: dict[tuple[int, str], tuple[Any, policy.Judgement | None]] = field(
        default_factory=dict)
    """The policy's judgements of this plan, by rendered manifests (identity) and agent
    namespace (see :func:`_judged`; the manifests are kept so an identity is never reused)."""


@dataclass
class Executed:
    """What the executor reports about a plan."""

    applied: int = 0
    deleted: int = 0
    errors: int = 0
    failed: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Clusters whose own work was not written: (reason, message)."""
    going: set[str] = field(default_factory=set)
    """Clusters whose work's delete was sent (now or before)."""
    fenced: bool = False
    """The hub refused a write as coming from a replica that lost the intent's shard (sharded
    managers): another replica writes this intent now, its status included."""
    withheld: bool = False
    """A write was not sent: this replica handed the intent's shard over while the write
    waited for its turn. As for ``fenced``, the new holder writes the rest."""


@dataclass(frozen=True)
class Finished:
    """The status an executed plan gives the intent, and when to look again."""

    status: IntentStatus
    recheck_after: float | None
    """Seconds until an entry turns stale, a held cluster's grace ends or a grant retry is due
    by the clock alone (None: nothing is due; 0: at once, the works that export the model
    follow the serving set just published)."""


def _previous(raw: Mapping[str, Any] | None) -> IntentStatus | None:
    try:
        return IntentStatus.from_object(dict(raw)) if raw else None
    except ValidationError:
        return None


def serving_members(status: IntentStatus | None) -> frozenset[str]:
    """The clusters that take traffic in the serving set ``status`` publishes (weight > 0).

    Works that export the model to other clusters (spec.endpoint.serviceExport) follow this
    set: it is published first, and the next plan (at once, see
    :attr:`Finished.recheck_after`) writes the works that join or leave it.
    """
    if status is None or status.endpoint is None:
        return frozenset()
    return frozenset(m.cluster for m in status.endpoint.members if m.weight > 0)


def plan(spec: KindSpec, body: Mapping[str, Any], snap: Snapshot, *,
         overdue: bool = False) -> Plan:
    """What to do for one intent (see the module docstring).

    An intent that owns the stack and is being deleted (deletionTimestamp set) wants no work
    anywhere, but its works are deleted only on clusters no add-on intent uses (the others
    are ``RemovalBlocked`` and in ``DeletionBlocked``); ``overdue`` says the deletion has
    waited long enough for the remaining works to be reported as ``WorksRemain``.

    A cluster the Placement no longer selects loses its works, unless it left while its
    ManagedCluster is not Available: then they are kept for the unavailable grace (see
    :mod:`addon_manager.engine.partition`) and its entry says until when.
    """
    meta = body.get("metadata") or {}
    ns, name = str(meta.get("namespace")), str(meta.get("name"))
    deleting = spec.owns_stack and bool(meta.get("deletionTimestamp"))
    previous_raw = body.get("status") or None
    out = Plan(spec, ns, name, meta.get("generation"), previous_raw, _previous(previous_raw),
               deleting=deleting, overdue=overdue)
    try:
        intent = spec.model.from_object(
            {k: v for k, v in body.items() if k in ("apiVersion", "kind", "metadata", "spec")}
        )
    except ValidationError as err:
        out.invalid = (IntentReason.INVALID_SPEC, field_errors(err))
        return out
    if not deleting:
        refused = policy.refusal(intent, snap.policy)
        if refused is not None:
            # No work is written (nor deleted: what an earlier configuration allowed stays
            # until the admin or the tenant changes it); the status says why.
            out.invalid = refused
            out.errors.append(refused[0])
            return out
    _plan_clusters(out, intent, body, snap)
    return out


def _plan_clusters(out: Plan, intent: Resource, body: Mapping[str, Any], snap: Snapshot
                   ) -> None:
    spec, ns, name, world = out.spec, out.namespace, out.name, snap.world
    intent_spec: Any = cast(Any, intent).spec
    placement = intent_spec.placement_ref.name
    found = world.placement_exists(ns, placement)
    clusters = world.placement_clusters(ns, placement) if found else frozenset()
    out.placement = st.PlacementState(placement, found, clusters)
    out.existing = existing = world.works_of(spec.kind, ns, name)
    out.removed = spec.removed_state(intent_spec)
    out.deprecated = spec.deprecation(intent_spec)
    out.endpoint = spec.endpoint(intent_spec)
    out.serving = serving_members(out.previous)
    if out.endpoint is not None and out.endpoint.spillover is not None:
        out.spill_gate = policy.scoped_gate(intent, out.endpoint.spillover)
        out.spilled = snap.spills.get((spec.kind, ns, name), {})
    wanted = frozenset() if out.deleting else clusters
    lost: dict[str, tuple[str, str]] = {}
    if spec.owns_stack:
        lost = conflicts.lost_clusters((ns, name), clusters, conflicts.winners(
            cl for cl in world.claims() if snap.policy.may_own_stack(cl.namespace)))
    ctx = base.Context(world, snap.sealer, ns, name, serving=out.serving)
    settings = progressive.settings_of(intent)
    if settings is not None and not out.deleting:
        key = (spec.kind, ns, name)
        kept = {f.name: f for f in [*world.revisions_of(*key), *snap.recent.revisions.get(key, ())]}
        health = {cl: world.cluster_health(cl) for cl in wanted}
        out.rollout = progressive.plan_rollout(
            spec.kind, intent, body, settings, wanted, existing, kept.values(),
            world.placement_groups(ns, placement), health, snap.now, snap.stale_after,
            snap.gates.get(key),
            held_back=_models_not_ready(world, wanted, health, snap) if spec.owns_stack else None,
            key=snap.sealer.keys.hash_key)
        out.rollout = replace(out.rollout,
                              metric_gate=policy.scoped_gate(intent, out.rollout.metric_gate))
    desired: dict[str, render.RenderedWork] = {}
    contexts: dict[int, base.Context] = {}
    for cl in sorted(wanted):
        if out.rollout is None:
            rw = _plan_cluster(out, ctx, intent, cl, lost, snap)
        else:
            rw = _plan_revision(out, out.rollout, contexts, cl, lost, snap)
        if rw is not None:
            desired[cl] = rw
    out.desired = len(desired)
    for cl, rw in desired.items():
        have = existing.get(cl)
        if not snap.recent.needs_write(rw, have):
            out.skipped += 1
            continue
        if have is None and world.foreign_work(cl, rw.name):
            out.inputs[cl] = st.ClusterInput(
                cl, error=f"ManifestWork {cl}/{rw.name} exists and is not ours",
                error_reason=ClusterReason.FOREIGN_WORK)
            out.errors.append(ClusterReason.FOREIGN_WORK)
            continue
        ref = rw.sealed_spec.secret_ref if rw.sealed_spec is not None else None
        out.applies.append(Apply("apply", spec.kind, rw, have, ref.name if ref else ""))
    _plan_departures(out, clusters, lost, snap)
    if spec.seals:
        out.applies.extend(_identity_applies(wanted - set(lost), snap))
    if namespace_policy.reads_policy(spec):
        out.applies.extend(_policy_applies(frozenset(desired), snap))
    if spec.owns_stack and snap.addons:
        out.addons = [cl for cl in desired
                      if not world.addon_exists(cl) and snap.recent.addon_due(cl)]
    out.health = {cl: world.cluster_health(cl) for cl in set(out.inputs) | set(existing)}


def _plan_cluster(
    out: Plan, ctx: base.Context, intent: Resource, cl: str,
    lost: Mapping[str, tuple[str, str]], snap: Snapshot,
) -> render.RenderedWork | None:
    """One selected cluster: its entry's inputs, and the work it should have (None: none)."""
    spec, work = out.spec, out.existing.get(cl)
    if cl in lost:
        owner = lost[cl]
        out.inputs[cl] = st.ClusterInput(cl, conflict_with=f"ModelServing {owner[0]}/{owner[1]}")
        out.conflicts.append(cl)
        return None
    refused_here = _namespace_refusal(intent, cl, snap)
    if refused_here:
        out.inputs[cl] = st.ClusterInput(cl, work=work, error=refused_here,
                                         error_reason=ClusterReason.NAMESPACE_NOT_ALLOWED)
        return None
    try:
        ready = spec.prepare(ctx, intent, cl)
    except render.RenderError as err:
        out.inputs[cl] = st.ClusterInput(cl, work=work, error=str(err),
                                         error_reason=ClusterReason.RENDER_FAILED)
        return None
    if ready.pin is not None:
        out.pins[cl] = ready.pin
    if ready.problem:
        out.inputs[cl] = st.ClusterInput(cl, work=work, error=ready.problem[1],
                                         error_reason=ready.problem[0])
        return None
    rw, waits = ready.work, list(ready.waits)
    if rw is not None:
        judged = _judged(out, rw, snap.policy, snap.world.agent_namespace(cl))
        if judged is not None:
            out.inputs[cl] = st.ClusterInput(cl, work=work, error=judged.message,
                                             error_reason=judged.reason)
            out.errors.append(judged.reason)
            return None
        taken = _taken(snap.world, cl, spec.kind, out.namespace, out.name, rw, work,
                       snap.policy.shared_credential_namespaces)
        if taken:
            out.inputs[cl] = st.ClusterInput(cl, work=work, taken=taken)
            out.conflicts.append(cl)
            out.errors.append(ClusterReason.CONFLICT)
            return None
    if rw is not None and spec.tenant:
        rw, waits = _tenant_gate(out, cl, rw, waits, snap)
    if rw is None or (waits and work is None):
        out.inputs[cl] = st.ClusterInput(cl, work=work, waits=waits)
        return None
    if (out.removed and work is not None and work.render_hash != rw.render_hash
            and not model_serving.removal_ordered(work)):
        # Removal asked for: the work is left exactly as it is while add-on intents still use
        # the stack there.
        blockers = removal_blockers(snap.world, cl)
        if blockers:
            out.blocked[cl] = blockers
            out.inputs[cl] = st.ClusterInput(cl, work=work, blocked_by=tuple(blockers))
            return None
    going = ""
    if spec.holds_stack:
        going = model_serving.platform_going(_stack_works(snap.world, cl))
    no_addon = spec.owns_stack and not snap.addons and not snap.world.addon_exists(cl)
    out.inputs[cl] = st.ClusterInput(cl, work=work, platform_going=going, no_addon=no_addon)
    return rw


def _judged(out: Plan, rw: render.RenderedWork, admin: policy.Policy, agent_ns: str
            ) -> policy.Judgement | None:
    """The policy's judgement of ``rw``, once per manifests object and agent namespace.

    Clusters that the same overrides select share one rendered body (the plan's templates),
    so a fan-out judges each distinct body once, not once per cluster.
    """
    manifests = rw.body["spec"]["workload"]["manifests"]
    key = (id(manifests), agent_ns)
    seen = out.judged.get(key)
    if seen is None or seen[0] is not manifests:
        seen = (manifests, policy.judge_work(manifests, out.namespace, admin, agent_ns,
                                             platform=out.spec.owns_stack))
        out.judged[key] = seen
    return seen[1]


def _taken(world: World, cluster: str, kind: str, namespace: str, name: str,
           rw: render.RenderedWork, work: WorkFact | None,
           shared_credentials: frozenset[str] = frozenset()) -> str:
    """What another intent already owns on ``cluster`` that ``rw`` would overwrite ("": none).

    Every work applies with the work agent's identity and ``force``, so a second intent's
    object of the same name in the same spoke namespace would silently take over the first's
    (tenant B's ``m`` replacing tenant A's ``m``), and two hub namespaces' credentials would
    end up in one ``storage-config`` Secret. The intent whose work is there first keeps it;
    when both already have one (works from before this check), the one whose (kind,
    namespace, name) sorts first does. The ``storage-config`` Secrets of the spoke
    namespaces in ``shared_credentials`` are the admin's to share (each entry stays its own
    connection's: the agent never overwrites another's entry).
    """
    if kind not in CLAIMING_KINDS:
        return ""
    mine = claimed_objects(rw.body.get("spec") or {})
    own = (kind, namespace, name)
    for other_kind in sorted(CLAIMING_KINDS):
        for other in world.works_on(cluster, other_kind):
            key = (other.kind, other.intent_namespace, other.intent_name)
            if key == own or other.deleting:
                continue
            shared = sorted(o for o in mine & other.objects
                            if not o.startswith("storage-config/")
                            or (other.intent_namespace != namespace
                                and o.partition("/")[2] not in shared_credentials))
            if shared and (work is None or key < own):
                what = shared[0]
                if what.startswith("storage-config/"):
                    what = (f"the storage-config Secret of spoke namespace "
                            f"{what.partition('/')[2]!r} (credentials of hub namespace "
                            f"{other.intent_namespace!r}; two tenants never share one)")
                else:
                    resource, spoke_ns, obj = what.split("/", 2)
                    what = f"{resource} {spoke_ns}/{obj}"
                return (f"{what} on this cluster belongs to {other.kind} "
                        f"{other.intent_namespace}/{other.intent_name}; nothing is written "
                        "(rename the intent or target another namespace)")
    return ""


def _models_not_ready(world: World, clusters: Iterable[str],
                      health: Mapping[str, ClusterFact | None], snap: Snapshot
                      ) -> dict[str, str]:
    """Per cluster, the first model (or runtime) on it that is not Ready.

    A stack's rollout step waits for every intent that holds the stack there, not only for
    the stack itself.
    """
    def first_not_ready(cl: str) -> str | None:
        return next((f"{kind} {w.intent_namespace}/{w.intent_name} is not Ready on the cluster"
                     for kind in STACK_HOLDERS for w in world.works_on(cl, kind)
                     if not w.deleting and st.cluster_status(
                         kind, st.ClusterInput(cl, work=w, health=health.get(cl)),
                         now=snap.now, stale_after=snap.stale_after)[1] != "ready"), None)

    return {cl: why for cl in clusters if (why := first_not_ready(cl))}


def _plan_revision(
    out: Plan, roll: progressive.RolloutPlan, contexts: dict[int, base.Context], cl: str,
    lost: Mapping[str, tuple[str, str]], snap: Snapshot,
) -> render.RenderedWork | None:
    """One selected cluster of a progressive rollout: the revision it is assigned."""
    assigned, work = roll.assign.get(cl), out.existing.get(cl)
    if assigned == KEEP:  # from before rollouts: left as it is until reached
        out.inputs[cl] = st.ClusterInput(cl, work=work)
        return None
    if assigned is None:
        out.inputs[cl] = st.ClusterInput(cl, work=work, waits=[base.Wait(
            ClusterReason.WAITING_FOR_ROLLOUT,
            f"rollout of revision {roll.target} reaches this cluster")])
        return None
    intent = roll.intents[assigned]
    if isinstance(intent, str):
        out.inputs[cl] = st.ClusterInput(cl, work=work, error=f"revision {assigned}: {intent}",
                                         error_reason=ClusterReason.RENDER_FAILED)
        return None
    ctx = contexts.setdefault(assigned, base.Context(snap.world, snap.sealer, out.namespace,
                                                        out.name, serving=out.serving))
    rw = _plan_cluster(out, ctx, intent, cl, lost, snap)
    return render.with_revision(rw, assigned) if rw is not None else None


def _plan_departures(out: Plan, clusters: frozenset[str], lost: Mapping[str, tuple[str, str]],
                     snap: Snapshot) -> None:
    """Works on clusters the intent no longer wants: deleted, held (partition) or blocked."""
    found = out.placement.found
    for cl, work in out.existing.items():
        # A Placement that disappears (deleted by mistake, or being re-created) is not a
        # decision to uninstall everywhere: what was sent stays until it exists again or the
        # intent itself is deleted.
        left = found and cl not in clusters and cl not in lost
        if left and not out.deleting and not work.deleting:
            # Left while unreachable (a partition, not a decision): kept for the grace.
            kept = partition.hold(snap.world.cluster_health(cl), snap.now,
                                  snap.unavailable_grace)
            if kept is not None:
                out.held[cl] = kept.until
                out.inputs[cl] = st.ClusterInput(cl, work=work, kept=kept.message)
                continue
        if out.deleting or cl in lost or left:
            if out.spec.owns_stack and not work.deleting:
                blockers = removal_blockers(snap.world, cl)
                if blockers:  # the stack stays while add-on intents use it there
                    out.blocked[cl] = blockers
                    out.inputs[cl] = st.ClusterInput(cl, work=work, blocked_by=tuple(blockers))
                    continue
            out.deletes.append(Delete(work, snap.recent.delete_due(work)))


def _stack_works(world: World, cluster: str) -> list[WorkFact]:
    return [w for kind in STACK_OWNERS for w in world.works_on(cluster, kind)]


def removal_blockers(world: World, cluster: str) -> list[str]:
    """Add-on intents whose works hold the stack on ``cluster`` (see ordering)."""
    return model_serving.removal_blockers(
        [w for kind in STACK_HOLDERS for w in world.works_on(cluster, kind)])


def _namespace_refusal(intent: Resource, cluster: str, snap: Snapshot) -> str:
    """The namespace policy again, with the cluster's own agent namespace.

    Only when it has another than the default, which the intent-wide check covered.
    """
    agent_ns = snap.world.agent_namespace(cluster)
    if agent_ns == c.AGENT_NAMESPACE:
        return ""
    refused = policy.namespace_refusals(intent, snap.policy, agent_ns)
    return policy.namespace_message(refused) if refused else ""


def _tenant_gate(
    out: Plan, cl: str, rw: render.RenderedWork, waits: list[base.Wait], snap: Snapshot,
) -> tuple[render.RenderedWork, list[base.Wait]]:
    """A tenant work as its tenant's executor applies it, waiting for that identity.

    The tenant's access work (executor and RBAC, :mod:`addon_manager.kinds.tenant_access`) is
    written when needed; a tenant allowed any namespace has no executor.
    """
    ns = out.namespace
    executor = snap.policy.namespaces.executor(ns)
    if executor is None:
        return rw, waits
    agent_ns = snap.world.agent_namespace(cl)
    want = tenant_access.render_access(ns, cl, agent_ns, snap.policy.namespaces.targets(ns),
                                       snap.policy.namespaces.denied)
    have = snap.world.works_of(tenant_access.ACCESS_KIND, ns, tenant_access.ACCESS_NAME).get(cl)
    needed = tenant_access.work_namespaces(rw)
    if snap.recent.needs_write(want, have):
        out.applies.append(Apply("access", tenant_access.ACCESS_KIND, want, have))
    elif tenant_access.grant_retry_due(have, want, needed) and snap.recent.grant_retry_due(
            cl, want.name):
        retry = tenant_access.with_retry_label(want, snap.stamp)
        out.applies.append(Apply("access", tenant_access.ACCESS_KIND, retry, have,
                                 grant_retry=True))
    gated = tenant_access.with_executor(rw, agent_ns, executor)
    return gated, [*waits, *tenant_access.access_waits(ns, want, have, needed)]


def _policy_applies(clusters: frozenset[str], snap: Snapshot) -> list[Apply]:
    """The namespace policy works (the policy, for the agent's own checks) to write.

    Written beside the intent's own works, not before them: an agent that has a
    ServingPlatform or a sealed connection but no policy yet waits for it
    (:mod:`addon_manager.kinds.namespace_policy`).
    """
    out: list[Apply] = []
    for cl in sorted(clusters):
        want = namespace_policy.render(cl, snap.world.agent_namespace(cl),
                                       snap.policy.namespaces)
        have = namespace_policy.policy_work(snap.world, cl)
        if snap.recent.needs_write(want, have):
            out.append(Apply("policy", namespace_policy.KIND, want, have))
    return out


def _identity_applies(clusters: frozenset[str], snap: Snapshot) -> list[Apply]:
    """The identity works (the agent's key, read back) the clusters need written."""
    out: list[Apply] = []
    for cl in sorted(clusters):
        agent_ns = snap.world.agent_namespace(cl)
        rw = agent_identity.render(cl, agent_ns)
        have = agent_identity.identity_work(snap.world, cl)
        tampered = have is not None and not have.deleting and (
            have.identity_source != f"{agent_ns}/{c.AGENT_IDENTITY_CONFIGMAP}"
        )
        if tampered and not snap.recent.recently_applied(rw.cluster, rw.name, rw.render_hash):
            have = replace(have, render_hash="") if have is not None else None
        if snap.recent.needs_write(rw, have):
            out.append(Apply("identity", agent_identity.KIND, rw, have))
    return out


def _earliest(*seconds: float | None) -> float | None:
    """The smallest of these delays (never below 0), None when there is none."""
    known = [max(0.0, s) for s in seconds if s is not None]
    return min(known) if known else None


def finish(out: Plan, done: Executed, now: datetime, stale_after: float) -> Finished:
    """The intent's status after the plan was executed (pure).

    A cluster whose own work failed to be written shows the failure; one whose work's delete
    was sent shows it going. A cluster that left keeps its entry until its work is gone: its
    removal may be blocked on the spoke, and the hub must say so rather than forget it.
    """
    inputs = dict(out.inputs)
    for cl, (reason, message) in done.failed.items():
        inputs[cl] = st.ClusterInput(cl, work=out.existing.get(cl), error=message,
                                     error_reason=reason)
    for cl in done.going:
        inputs[cl] = st.ClusterInput(cl, work=replace(out.existing[cl], deleting=True))
    judged = [replace(inputs.get(cl) or st.ClusterInput(cl, work=out.existing[cl]),
                      health=out.health.get(cl))
              for cl in sorted(set(inputs) | set(out.existing))]
    entries = [st.cluster_status(out.spec.kind, item, removed=out.removed, now=now,
                                 stale_after=stale_after) for item in judged]
    waiting_for_grant = any(w.reason == tenant_access.WAITING_FOR_ACCESS
                            for item in judged for w in item.waits)
    recheck = _earliest(
        st.recheck_in(judged, now, stale_after),
        tenant_access.GRANT_RETRY_SECONDS if waiting_for_grant else None,
        *((until - now).total_seconds() for until in out.held.values()),
    )
    extra: list[Condition] = []
    if out.deleting and out.blocked:
        extra.append(st.deletion_refused(out.blocked, out.generation, now))
    elif out.deleting and out.overdue and out.existing:
        extra.append(st.deletion_blocked(sorted(out.existing), out.generation, now))
    if out.deprecated:
        extra.append(st.deprecated(out.deprecated, out.previous, out.generation, now))
    status = st.aggregate(
        entries, out.placement, out.generation, out.previous, now,
        extra_conditions=extra, platform=out.spec.owns_stack, deleting=out.deleting,
    )
    if out.rollout is not None:
        status = st.with_rollout(status, out.rollout.status, out.previous, out.generation, now)
        recheck = _earliest(recheck, out.rollout.recheck_after)
    if out.endpoint is not None:
        status = status.model_copy(update={"endpoint": endpoint.serving_set(
            out.endpoint, status, out.placement.clusters if out.placement.found else None,
            out.health, out.previous.endpoint if out.previous else None, now,
            spilled=out.spilled)})
        if out.endpoint.service_export and serving_members(status) != out.serving:
            recheck = 0.0  # the exporting works follow the set just published, at once
    return Finished(status, recheck)
