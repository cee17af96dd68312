"""One intent's reconcile: snapshot, plan, execute, status.

The engine in one line: a :class:`~addon_manager.engine.plan.Snapshot` of the hub and of the
manager's recent writes goes into the pure :func:`~addon_manager.engine.plan.plan` with the
intent and its :class:`~addon_manager.kinds.registry.KindSpec`; the
:class:`~addon_manager.shell.execute.Executor` performs the plan;
:func:`~addon_manager.engine.plan.finish` turns the plan and the executor's report into the
intent's status, which is written only when it changed. This module holds that sequence and
the metrics it records; it decides nothing itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from addon_api import constants as c
from addon_api.common import EndpointStatus, IntentStatus, ShardStatus
from addon_api.conditions import condition
from addon_api.reasons import ClusterPhase, IntentConditionType, IntentPhase
from addon_api.rollout import MetricGate
from addon_manager.engine import endpoint, partition, policy, sharding
from addon_manager.engine import status as st
from addon_manager.engine.plan import Plan, Snapshot, finish, plan, removal_blockers
from addon_manager.engine.rollout import MetricAnswer
from addon_manager.facts.canonical import canonical_hash
from addon_manager.facts.world import World
from addon_manager.kinds import tenant_access
from addon_manager.kinds.base import HelperSpec
from addon_manager.kinds.registry import HELPERS, KINDS, TENANT_KINDS, spec_of
from addon_manager.kinds.render import owner_labels
from addon_manager.shell import metrics, sealkeys
from addon_manager.shell.apply import Holds, WriteError
from addon_manager.shell.execute import Executor, Writer


@dataclass
class Outcome:
    """What one reconcile did."""

    applied: int = 0
    skipped: int = 0
    deleted: int = 0
    errors: int = 0
    status_written: bool = False
    status_sent_at: float | None = None
    """Monotonic time the status write was sent (None: nothing written)."""
    phase_before: str = ""
    phase_after: str = ""
    conflicts: list[str] = field(default_factory=list)
    recheck_after: float | None = None
    """Seconds after which a cluster's entry turns stale, or the works kept for a cluster that
    left while unavailable are due to go, by the clock alone (look again then)."""
    remaining: list[str] = field(default_factory=list)
    """Clusters where works of the intent still exist (as seen before this reconcile)."""
    blocked: dict[str, list[str]] = field(default_factory=dict)
    """Clusters whose stack the manager refused to remove, with the intents holding it."""
    held: dict[str, datetime] = field(default_factory=dict)
    """Clusters that left the Placement whose works are kept (partition safety), with when
    they go if nothing changes."""
    events: list[tuple[str, str, str]] = field(default_factory=list)
    """(type, reason, message) of Events to post on the intent (rollout steps)."""

    def wait(self, resync: float) -> float:
        """Seconds to wait, after :meth:`pause`, for a change before reconciling again.

        The resync period, or less when something is due by the clock (:data:`DUE_MARGIN`
        after it, so that it is past); none when the plan asked to look again at once
        (``recheck_after`` 0: a metric answer to judge with, exporting works to follow the set
        just published).
        """
        if self.recheck_after is None:
            return resync
        if self.recheck_after <= 0:
            return 0.0
        return min(resync, self.recheck_after + DUE_MARGIN)

    def pause(self, started: float, min_interval: float, now: float) -> float:
        """Seconds to wait before the intent's next reconcile (monotonic times).

        ``min_interval`` from when this reconcile sent its status write, or from its start
        when it wrote none: at most one status write (and one reconcile) per interval, while
        feedback that came during the write or the plan is not kept waiting a whole interval
        more.
        """
        since = self.status_sent_at if self.status_sent_at is not None else started
        return max(0.0, since + min_interval - now)


DUE_MARGIN = 0.1
"""Seconds past a clock-due moment (a rollout step's minSuccessTime, a grace period) at which
the intent is reconciled again. The plan counts in whole seconds from a ``now`` rounded down
(:func:`_now`), so a wait of ``recheck_after`` already ends at or after the due second; the
margin covers a timer that fires a little early. (It was a whole second, which every
time-bound rollout step waited on top of its minSuccessTime.)"""

STEP_ENDS = {"RolloutStepPassed": "Passed", "RolloutRolledBack": "RolledBack",
             "RolloutHalted": "Halted"}
"""Rollout Event reasons that end a step, and the outcome they count as."""

POOL_IMPORT_RETRY = 300
"""Seconds before writing InferencePoolImports again after the hub did not serve them."""
GATE_REFRESH = 15.0
"""Seconds a metric gate or spillover answer is used before the query runs again (the
default of the manager's ``--gate-refresh``)."""


class MetricGateClient(Protocol):
    """What evaluates metric gates (see :class:`~addon_manager.shell.metricgate.PrometheusGate`)."""

    def evaluate(self, gate: MetricGate, clusters: tuple[str, ...]) -> Awaitable[MetricAnswer]:
        """The gate's answer for these clusters."""

    def evaluate_each(self, gate: MetricGate, clusters: tuple[str, ...]
                      ) -> Awaitable[dict[str, str] | str]:
        """The clusters out of bounds with what was found, or why there is no answer."""


log = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


class Reconciler:
    """Reconciles intents against a :class:`World` through a :class:`Writer`."""

    def __init__(
        self, world: World, writer: Writer, sealer: sealkeys.Sealer, *, addons: bool = True,
        stale_after: float = st.STALE_AFTER, admin: policy.Policy | None = None,
        unavailable_grace: float = partition.UNAVAILABLE_GRACE,
        gate: MetricGateClient | None = None, gate_refresh: float = GATE_REFRESH,
    ) -> None:
        self.world = world
        self.gate = gate
        """Where metric gates of progressive rollouts are queried (None: no endpoint)."""
        self.gate_refresh = gate_refresh
        """Seconds a metric gate or spillover answer is used before its query runs again."""
        self.answers: dict[tuple[str, str, str], tuple[MetricAnswer, float]] = {}
        """The last metric gate answer of each intent, with when it was received."""
        self.imports: dict[tuple[str, str, str], str] = {}
        """What this manager last wrote into each model's InferencePoolImport (a digest)."""
        self.pool_imports_unserved_until = 0.0
        """Until when (monotonic) the hub is taken not to serve InferencePoolImports."""
        self.spills: dict[tuple[str, str, str], tuple[tuple[str, ...], dict[str, str], float]
                          ] = {}
        """Per intent with an endpoint spillover: the clusters last judged and the query
        (one tuple), those out of bounds (with what was found), and when."""
        self.sealer = sealer
        """The manager's signing and hash keys, sequences and pinned agent keys."""
        self.policy = admin if admin is not None else policy.Policy()
        """What the platform admin allows (devFlags, stack owners, target namespaces); default:
        the command line's (no devFlags, each hub namespace targets its own name only)."""
        self.writer = writer
        self.addons = addons
        self.stale_after = stale_after
        self.unavailable_grace = unavailable_grace
        self.executor = Executor(writer, self.sealer)
        self.stale = metrics.StaleClusters()
        """The clusters each intent shows as Stale (``model_serving_cluster_stale``)."""
        self.removal_waits: dict[tuple[str, str, str], frozenset[str]] = {}
        """The clusters where each intent's removal of its works waits for what holds them,
        as of its last plan: only the disappearance of a holding work there wakes it (a
        fan-out's deletes of thousands of model works do not replan the stack's owner)."""

    def snapshot(self) -> Snapshot:
        """The facts a plan is computed from, now."""
        fresh = time.monotonic() - self.gate_refresh
        return Snapshot(
            self.world, self.policy, self.sealer, self.executor.recent(), _now(),
            stamp=str(int(time.time())), stale_after=self.stale_after,
            unavailable_grace=self.unavailable_grace, addons=self.addons,
            gates={k: a for k, (a, when) in self.answers.items() if when >= fresh},
            spills={k: out for k, (_, out, _) in self.spills.items()},
        )

    def plan(self, kind: str, body: Mapping[str, Any], *, overdue: bool = False) -> Plan:
        """The plan for one intent as things stand (nothing is written)."""
        return plan(spec_of(kind), body, self.snapshot(), overdue=overdue)

    async def reconcile(
        self, kind: str, body: Mapping[str, Any], *, overdue: bool = False,
        shard: ShardStatus | None = None, holds: Holds | None = None,
    ) -> Outcome:
        """Bring one intent's works to the desired set and write its status if it changed.

        See :func:`addon_manager.engine.plan.plan` for what is desired (removal rule, partition
        safety, gates); ``overdue`` says a deletion has waited long enough for the remaining
        works to be reported as ``WorksRemain``. ``shard`` (sharded managers): the shard this
        replica holds the intent by; its epoch goes on every work written, and the status
        names it. ``holds`` says whether the replica still holds it: no work write is sent
        once it says no (the shard handed over mid fan-out).
        """
        started = time.monotonic()
        todo = self.plan(kind, body, overdue=overdue)
        # Recorded before any await: a holding work that goes after this plan wakes it.
        key = (kind, todo.namespace, todo.name)
        if todo.blocked:
            self.removal_waits[key] = frozenset(todo.blocked)
        else:
            self.removal_waits.pop(key, None)
        out = Outcome(phase_before=todo.previous.phase if todo.previous else "")
        for reason in todo.errors:
            metrics.WORK_ERRORS.labels(kind, reason).inc()
        if todo.invalid is not None:
            reason, message = todo.invalid
            new = IntentStatus(
                observed_generation=todo.generation, phase=IntentPhase.INVALID.value,
                conditions=[condition(IntentConditionType.READY, False, reason, message,
                                      now=_now())],
                shard=shard,
            )
            await self._write_status(todo, new, out)
            return out
        out.remaining = sorted(todo.existing)
        out.conflicts, out.blocked, out.held = todo.conflicts, todo.blocked, todo.held
        out.skipped = todo.skipped
        metrics.WORK_SKIPS.labels(kind).inc(todo.skipped)
        written_at = sharding.fence(shard.index, shard.epoch) if shard is not None else None
        done = await self.executor.run(todo, fence=written_at, holds=holds)
        if done.fenced:  # another replica holds the shard now: it writes the status too
            log.warning("%s %s/%s: the hub refused a write at shard epoch %s: another replica "
                        "holds the shard", kind, todo.namespace, todo.name, written_at)
            out.recheck_after = None
            return out
        if done.withheld:  # handed over mid fan-out: the new holder writes the rest
            log.info("%s %s/%s: shard %s handed over during the fan-out: its other writes "
                     "were not sent", kind, todo.namespace, todo.name, written_at)
            out.recheck_after = None
            return out
        out.applied, out.deleted, out.errors = done.applied, done.deleted, done.errors
        if todo.deletes:  # works went: what only they needed goes too
            await self.collect_for(kind, todo.namespace, todo.name, going=todo.deleting)
        result = finish(todo, done, _now(), self.stale_after)
        out.recheck_after = result.recheck_after
        if todo.rollout is not None:
            out.events = list(todo.rollout.events)
            for _, reason, _ in out.events:
                ended = STEP_ENDS.get(reason)
                if ended:
                    metrics.ROLLOUT_STEPS.labels(kind, ended).inc()
            gate = todo.rollout.metric_gate
            if gate is not None and todo.rollout.metric_for and await self._ask_gate(
                    kind, todo.namespace, todo.name, gate, todo.rollout.metric_for):
                out.recheck_after = 0.0  # judge the step again with the answer
        if result.status.endpoint is not None:
            out.events.extend(endpoint.changes(
                todo.previous.endpoint if todo.previous else None, result.status.endpoint))
            if todo.spill_gate is not None:
                if await self._ask_spillover(key, todo.spill_gate, result.status.endpoint,
                                             todo.spilled):
                    out.recheck_after = 0.0  # the set again, with the new answer
                else:  # judged again after the refresh, or sooner if something else is due
                    out.recheck_after = self.gate_refresh if out.recheck_after is None else (
                        min(out.recheck_after, self.gate_refresh))
            else:
                self.spills.pop(key, None)
            kept = await self._keep_pool_import(key, todo, body, result.status.endpoint)
            status = result.status.model_copy(update={
                "endpoint": result.status.endpoint.model_copy(update={"pool_import": kept})})
        else:
            status = result.status
        if shard is not None:
            status = status.model_copy(update={"shard": shard})
        await self._write_status(todo, status, out, keep_blocked=not todo.deleting)
        self._observe(kind, todo.namespace, todo.name, status)
        metrics.RECONCILE_SECONDS.labels(kind).observe(time.monotonic() - started)
        return out

    async def _ask_gate(self, kind: str, ns: str, name: str, gate: MetricGate,
                        clusters: tuple[str, ...]) -> bool:
        """Query the metric gate for a step's clusters unless a fresh answer exists.

        True when a new answer came.
        """
        key = (kind, ns, name)
        known = self.answers.get(key)
        if known is not None and known[0].clusters == clusters and (
                time.monotonic() - known[1] < self.gate_refresh):
            return False
        if self.gate is None:
            answer = MetricAnswer(clusters, "Pending", "the manager has no --prometheus-url "
                                  "to evaluate metric gates with")
        else:
            answer = await self.gate.evaluate(gate, clusters)
        metrics.ROLLOUT_METRIC_GATE.labels(kind, answer.state).inc()
        self.answers[key] = (answer, time.monotonic())
        return True

    async def _keep_pool_import(self, key: tuple[str, str, str], todo: Plan,
                                body: Mapping[str, Any], found: EndpointStatus) -> str:
        """Write (or delete) the model's InferencePoolImport; its name, "" for none.

        Written when what it would say changed since this manager last wrote it (so a steady
        set writes nothing); deleted when spec.endpoint.inferencePoolImport is turned off
        (the status remembers the name across restarts). Where the hub does not serve the
        kind, nothing is written for five minutes, then tried again.
        """
        had = todo.previous.endpoint.pool_import if (
            todo.previous is not None and todo.previous.endpoint is not None) else ""
        wanted = todo.endpoint is not None and todo.endpoint.inference_pool_import and not (
            todo.deleting)
        if not wanted:
            self.imports.pop(key, None)
            if had:
                try:
                    await self.writer.delete_object(
                        endpoint.POOL_IMPORT_GROUP, endpoint.POOL_IMPORT_VERSION,
                        endpoint.POOL_IMPORT_PLURAL, todo.namespace, had)
                except WriteError as err:
                    log.warning("InferencePoolImport %s/%s not deleted: %s",
                                todo.namespace, had, err)
                    return had
            return ""
        meta = body.get("metadata") or {}
        obj, status = endpoint.pool_import(
            todo.namespace, todo.name, str(meta.get("uid", "")), found,
            owner_labels(key[0], todo.namespace, todo.name))
        digest = canonical_hash([obj, status])
        if self.imports.get(key) == digest and had == todo.name:
            return had
        if time.monotonic() < self.pool_imports_unserved_until:
            return ""
        try:
            for body_, sub in ((obj, False), (status, True)):
                await self.writer.apply_object(
                    endpoint.POOL_IMPORT_GROUP, endpoint.POOL_IMPORT_VERSION,
                    endpoint.POOL_IMPORT_PLURAL, body_, status=sub)
        except WriteError as err:
            if err.status == 404:
                log.warning("the hub does not serve %s.%s/%s: no InferencePoolImport is "
                            "written (tried again in %ds)", endpoint.POOL_IMPORT_PLURAL,
                            endpoint.POOL_IMPORT_GROUP, endpoint.POOL_IMPORT_VERSION,
                            POOL_IMPORT_RETRY)
                self.pool_imports_unserved_until = time.monotonic() + POOL_IMPORT_RETRY
                return ""
            log.warning("InferencePoolImport %s/%s not written: %s", todo.namespace,
                        todo.name, err)
            return had
        self.imports[key] = digest
        return todo.name

    async def _ask_spillover(self, key: tuple[str, str, str], gate: MetricGate,
                             published: EndpointStatus, used: Mapping[str, str]) -> bool:
        """Judge the spillover metric on the set's candidates unless a fresh answer exists.

        The candidates are the members and the clusters spilled before (the others take no
        traffic whatever the metric says). True when the answer differs from the one the plan
        used. Without an answer (no --prometheus-url, or the query failed) nobody is spilled:
        a metric that cannot be read moves no traffic.
        """
        clusters = tuple(sorted({m.cluster for m in published.members} | {
            x.cluster for x in published.excluded
            if x.reason == endpoint.Excluded.METRIC_OUT_OF_BOUNDS}))
        asked = (*clusters, gate.model_dump_json())  # a changed gate is asked at once
        known = self.spills.get(key)
        if known is not None and known[0] == asked and (
                time.monotonic() - known[2] < self.gate_refresh):
            return dict(known[1]) != dict(used)
        found: dict[str, str] | str = "the manager has no --prometheus-url"
        if self.gate is not None and clusters:
            found = await self.gate.evaluate_each(gate, clusters)
        elif not clusters:
            found = {}
        metrics.ENDPOINT_SPILLOVER_QUERIES.labels(
            key[0], "NoAnswer" if isinstance(found, str) else "Answered").inc()
        if isinstance(found, str):
            log.warning("spillover of %s %s/%s: no answer, nobody spilled: %s", *key, found)
            found = {}
        self.spills[key] = (asked, found, time.monotonic())
        return found != dict(used)

    # cleanup --------------------------------------------------------------------------------

    async def gc_tenant_access(
        self, namespace: str, exclude: tuple[str, str, str] | None = None
    ) -> int:
        """Delete a tenant's access works on clusters where it has no other tenant work."""
        access = list(self.world.works_of(tenant_access.ACCESS_KIND, namespace,
                                          tenant_access.ACCESS_NAME).values())
        tenant = [w for a in access for k in TENANT_KINDS
                  for w in self.world.works_on(a.cluster, k) if w.intent_namespace == namespace]
        return await self._delete_all(tenant_access.unused_access(access, tenant, exclude))

    async def collect(self, helper: HelperSpec, exclude: tuple[str, str] | None = None) -> int:
        """Delete the works of a helper kind that nothing needs any more (its ``unused``)."""
        if helper.unused is None:
            return 0
        return await self._delete_all(helper.unused(self.world, exclude))

    async def collect_for(self, kind: str, namespace: str, name: str, *, going: bool) -> int:
        """Delete the helper works an intent of ``kind`` reads that nothing needs any more.

        ``going``: the intent is being deleted, so what it selects no longer counts.
        """
        spec, count = spec_of(kind), 0
        for helper in HELPERS.values():  # the identity and namespace policy works
            if helper.unused is not None and helper.read_by(spec):
                count += await self.collect(helper, (namespace, name) if going else None)
        return count

    async def _delete_all(self, works: list[Any]) -> int:
        recent = self.executor.recent()
        results = await asyncio.gather(
            *(self.executor.delete(w, send=recent.delete_due(w)) for w in works),
            return_exceptions=True)
        return sum(1 for r in results if r is True)

    async def cleanup(self, kind: str, namespace: str, name: str) -> list[str]:
        """Delete an intent's works; return the clusters whose works still exist.

        A stack's work stays on a cluster where add-on intents still have works (the removal
        rule; see :meth:`reconcile`, which the deletion of a readable one goes through).
        """
        spec = spec_of(kind)
        works = self.world.works_of(kind, namespace, name)
        await self._delete_all([w for w in works.values() if not spec.owns_stack or w.deleting
                                or not removal_blockers(self.world, w.cluster)])
        await self.collect_for(kind, namespace, name, going=True)
        if spec.tenant:
            await self.gc_tenant_access(namespace, exclude=(kind, namespace, name))
        return sorted(works)

    # status ---------------------------------------------------------------------------------

    async def _write_status(
        self, todo: Plan, new: IntentStatus, out: Outcome, *, keep_blocked: bool = True,
    ) -> None:
        new_dict = new.to_dict()
        old = dict(todo.previous_raw) if todo.previous_raw else None
        extra = [x for x in (old or {}).get("conditions", [])
                 if x.get("type") == IntentConditionType.DELETION_BLOCKED]
        if extra and keep_blocked:
            new_dict["conditions"] = [*new_dict["conditions"], *extra]
        out.phase_after = new.phase
        if st.comparable(new_dict) == st.comparable(old):
            return
        patch = st.merge_patch_of(new, new_dict, old)
        out.status_sent_at = time.monotonic()
        await self.writer.patch_status(c.GROUP, c.VERSION, todo.spec.plural, todo.namespace,
                                       todo.name, patch)
        out.status_written = True

    async def write_deletion_blocked(
        self, kind: str, ns: str, name: str, body: Mapping[str, Any], clusters: list[str]
    ) -> None:
        """Add (or refresh) the DeletionBlocked condition naming the clusters left."""
        meta = body.get("metadata") or {}
        status = dict(body.get("status") or {})
        cond = st.deletion_blocked(clusters, meta.get("generation"), _now()).to_dict()
        blocked = IntentConditionType.DELETION_BLOCKED
        conds = [x for x in status.get("conditions") or [] if x.get("type") != blocked]
        old = [x for x in status.get("conditions") or [] if x.get("type") == blocked]
        if old and old[0].get("message") == cond["message"]:
            return
        await self.writer.patch_status(
            c.GROUP, c.VERSION, KINDS[kind].plural, ns, name, {"conditions": [*conds, cond]}
        )

    def _observe(self, kind: str, ns: str, name: str, new: IntentStatus) -> None:
        metrics.CLUSTERS_DESIRED.labels(kind, ns, name).set(new.summary.desired)
        metrics.CLUSTERS_READY.labels(kind, ns, name).set(new.summary.ready)
        if new.rollout is not None:
            metrics.rollout(kind, ns, name, new.rollout)
        self.stale.observe((kind, ns, name), (
            entry.cluster for entry in new.clusters if entry.phase == ClusterPhase.STALE))
        for cond in new.conditions:
            for value in ("True", "False"):
                metrics.INTENT_CONDITIONS.labels(kind, ns, name, cond.type, value).set(
                    1 if cond.status == value else 0
                )
