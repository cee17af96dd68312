"""One intent's reconcile: desired works from the world's facts, the writes, the status.

The facts come from a :class:`World` (kopf indexes in production, a plain object in unit
tests); writes go through :class:`~addon_manager.apply.HubWriter`. Nothing here lists
objects: every lookup is an index read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from pydantic import ValidationError

from addon_api import constants as c
from addon_api import sealing
from addon_api.base import field_errors
from addon_api.common import Condition, IntentStatus, Resource
from addon_api.conditions import condition
from addon_api.hub import (
    ModelServing,
    MultiClusterInferenceService,
    MultiClusterServingRuntime,
    StorageConnection,
)
from addon_manager import (
    conflicts,
    metrics,
    naming,
    ordering,
    partition,
    pinning,
    policy,
    render,
    sealkeys,
    tenancy,
)
from addon_manager import status as st
from addon_manager.apply import WriteError
from addon_manager.facts import ClusterFact, WorkFact
from addon_manager.secrets import SecretAccess, SecretFact, decode_value, forbidden_detail

log = logging.getLogger(__name__)

MODELS: dict[str, type[Resource]] = {
    c.KIND_MODEL_SERVING: ModelServing,
    c.KIND_STORAGE_CONNECTION: StorageConnection,
    c.KIND_SERVING_RUNTIME: MultiClusterServingRuntime,
    c.KIND_INFERENCE_SERVICE: MultiClusterInferenceService,
}
PLURALS: dict[str, str] = {
    c.KIND_MODEL_SERVING: "modelservings",
    c.KIND_STORAGE_CONNECTION: "storageconnections",
    c.KIND_SERVING_RUNTIME: "multiclusterservingruntimes",
    c.KIND_INFERENCE_SERVICE: "multiclusterinferenceservices",
}
WATCH_GRACE = 15.0
"""Seconds a write of ours is trusted before the watch shows it (no duplicate writes)."""


class World(Protocol):
    """Read-only facts about the hub, kept current by watches."""

    def placement_exists(self, namespace: str, name: str) -> bool:
        """Whether the Placement exists."""

    def placement_clusters(self, namespace: str, name: str) -> frozenset[str]:
        """Clusters the Placement's decisions select."""

    def cluster_labels(self, cluster: str) -> dict[str, str]:
        """Labels of a ManagedCluster."""

    def cluster_health(self, cluster: str) -> ClusterFact | None:
        """The ManagedCluster as last seen (None when unknown)."""

    def works_of(self, kind: str, namespace: str, name: str) -> dict[str, WorkFact]:
        """Works owned by an intent, by cluster."""

    def works_on(self, cluster: str, kind: str) -> list[WorkFact]:
        """Works of one owner kind on one cluster."""

    def foreign_work(self, cluster: str, name: str) -> bool:
        """Whether a ManifestWork of that name exists there and the add-on does not own it."""

    def claims(self) -> list[conflicts.Claim]:
        """Every ModelServing with the clusters its Placement selects."""

    def storage_clusters(self, exclude: tuple[str, str] | None = None) -> frozenset[str]:
        """Clusters selected by any StorageConnection (but ``exclude``, being deleted)."""

    def secret(self, namespace: str, name: str) -> SecretFact | None:
        """A hub Secret's digest and key names, None when it does not exist."""

    def secret_access(self, namespace: str) -> SecretAccess:
        """Whether the manager may read the Secrets of a namespace (see addon_manager.secrets)."""

    def addon_exists(self, cluster: str) -> bool:
        """Whether the ManagedClusterAddOn model-serving exists in the cluster namespace."""

    def agent_namespace(self, cluster: str) -> str:
        """The agent's install namespace on a cluster (from its ManagedClusterAddOn)."""


class Writer(Protocol):
    """What the reconciler writes with (see HubWriter)."""

    def apply_work(self, body: dict[str, Any], *, force: bool) -> Awaitable[None]:
        """Server-side apply a ManifestWork."""

    def delete_work(self, namespace: str, name: str) -> Awaitable[None]:
        """Delete a ManifestWork."""

    def patch_status(
        self, group: str, version: str, plural: str, namespace: str, name: str,
        status: dict[str, Any],
    ) -> Awaitable[None]:
        """Merge-patch an intent's status."""

    def ensure_addon(self, cluster: str) -> Awaitable[None]:
        """Create the ManagedClusterAddOn if missing."""

    def read_secret(self, namespace: str, name: str) -> Awaitable[dict[str, str] | None]:
        """Read a hub Secret's ``data`` as stored (base64 values), None when it does not exist.

        Raises :class:`~addon_manager.apply.WriteError` (``status`` 403 when forbidden).
        """


@dataclass
class Outcome:
    """What one reconcile did."""

    applied: int = 0
    skipped: int = 0
    deleted: int = 0
    errors: int = 0
    status_written: bool = False
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


@dataclass(frozen=True)
class _Unreadable:
    reason: str
    message: str


def decoded_secret(
    ns: str, name: str, spec: Any, data: dict[str, str] | _Unreadable | None
) -> dict[str, str] | tuple[str, str]:
    """The keys of a Secret just read that ``spec`` seals, decoded; else (reason, message).

    The watch's facts were checked in render; this catches a Secret that changed since (or a
    read that failed), so that half a credential is never delivered.
    """
    if isinstance(data, _Unreadable):
        return data.reason, data.message
    if data is None:
        return "SecretNotFound", f"Secret {name} does not exist"
    read = render.secret_keys_read(spec, tuple(data))
    missing = [k for k in read if k not in data]
    if missing:
        return "SecretKeyMissing", f"Secret {ns}/{name} has no " + ", ".join(
            f"key {k!r}" for k in missing) + "; nothing is delivered until it has"
    out = {k: decode_value(data[k]) for k in read}
    bad = [k for k, v in out.items() if v is None]
    if bad:
        return "SecretUndecodable", (f"Secret {ns}/{name}: the value of "
                                     + ", ".join(f"key {k!r}" for k in bad)
                                     + " is not base64 of UTF-8 text; nothing is delivered "
                                     "until it is")
    return {k: v for k, v in out.items() if v is not None}


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _earliest(*seconds: float | None) -> float | None:
    """The smallest of these delays (never below 0), None when there is none."""
    known = [max(0.0, s) for s in seconds if s is not None]
    return min(known) if known else None


class Reconciler:
    """Reconciles intents against a :class:`World` through a :class:`Writer`."""

    def __init__(
        self, world: World, writer: Writer, *, addons: bool = True,
        stale_after: float = st.STALE_AFTER, admin: policy.Policy | None = None,
        unavailable_grace: float = partition.UNAVAILABLE_GRACE,
        sealer: sealkeys.Sealer | None = None,
    ) -> None:
        self.world = world
        self.sealer = sealer if sealer is not None else sealkeys.Sealer.in_memory()
        """The manager's signing and hash keys, sequences and pinned agent keys."""
        self.policy = admin if admin is not None else policy.Policy()
        """What the platform admin allows (devFlags, stack owners, target namespaces); default:
        the command line's (no devFlags, each hub namespace targets its own name only)."""
        self.writer = writer
        self.addons = addons
        self.stale_after = stale_after
        self.unavailable_grace = unavailable_grace
        self._applied: dict[tuple[str, str], tuple[str, float]] = {}
        self._deleted: dict[tuple[str, str], float] = {}
        self._addons: dict[str, float] = {}
        self._grant_retries: dict[tuple[str, str], float] = {}
        """(cluster, access work) -> when the manager last asked the work agent to retry it."""

    # writes ---------------------------------------------------------------------------------

    def _recently_applied(self, cluster: str, name: str, digest: str) -> bool:
        seen = self._applied.get((cluster, name))
        return seen is not None and seen[0] == digest and time.monotonic() - seen[1] < WATCH_GRACE

    def _needs_write(self, rw: render.RenderedWork, have: WorkFact | None) -> bool:
        if have is not None and (have.render_hash == rw.render_hash or have.deleting):
            return False
        return not self._recently_applied(rw.cluster, rw.name, rw.render_hash)

    async def _apply(self, kind: str, rw: render.RenderedWork, have: WorkFact | None,
                     secret: dict[str, str] | None) -> None:
        body = rw.body
        if rw.seal_inputs is not None:
            assert rw.sealed_spec is not None
            payload = render.storage_payload(rw.sealed_spec, secret or {})
            sequence = await self.sealer.next_sequence()
            body = render.with_sealed(rw, sealing.seal(
                rw.seal_inputs.public_key, render.binding_of(rw), sequence, payload,
                self.sealer.keys.signing_key,
            ))
        await self.writer.apply_work(body, force=have is not None)
        self._applied[(rw.cluster, rw.name)] = (rw.render_hash, time.monotonic())
        metrics.WORK_APPLIES.labels(kind).inc()

    async def _delete(self, work: WorkFact) -> bool:
        key = (work.cluster, work.name)
        seen = self._deleted.get(key)
        if work.deleting or (seen is not None and time.monotonic() - seen < WATCH_GRACE):
            return False
        await self.writer.delete_work(work.cluster, work.name)
        self._deleted[key] = time.monotonic()
        self._applied.pop(key, None)
        metrics.WORK_DELETES.labels(work.kind).inc()
        return True

    # reconcile ------------------------------------------------------------------------------

    def _removal_blockers(self, cluster: str) -> list[str]:
        """Add-on intents whose works hold the stack on ``cluster`` (see ordering)."""
        return ordering.removal_blockers([
            *self.world.works_on(cluster, c.KIND_INFERENCE_SERVICE),
            *self.world.works_on(cluster, c.KIND_SERVING_RUNTIME),
        ])

    async def reconcile(
        self, kind: str, body: Mapping[str, Any], *, overdue: bool = False
    ) -> Outcome:
        """Bring one intent's works to the desired set and write its status if it changed.

        A ModelServing being deleted (deletionTimestamp set) wants no work anywhere, but its
        works are deleted only on clusters no add-on intent uses (the others are reported
        ``RemovalBlocked`` and in ``DeletionBlocked``); ``overdue`` says the deletion has
        waited long enough for the remaining works to be reported as ``WorksRemain``.

        A cluster the Placement no longer selects loses its works, unless it left while its
        ManagedCluster is not Available (OCM's taints drop it from non-tolerating Placements):
        then they are kept for ``unavailable_grace`` (see :mod:`addon_manager.partition`), its
        entry is stale (``ClusterUnavailable``) and says until when, and the reconcile asks to
        be run again then (``recheck_after``).
        """
        started = time.monotonic()
        out = Outcome()
        meta = body.get("metadata") or {}
        ns, name = str(meta.get("namespace")), str(meta.get("name"))
        deleting = kind == c.KIND_MODEL_SERVING and bool(meta.get("deletionTimestamp"))
        generation = meta.get("generation")
        previous_raw = body.get("status") or None
        previous: IntentStatus | None
        try:
            previous = IntentStatus.from_object(previous_raw) if previous_raw else None
        except ValidationError:
            previous = None
        out.phase_before = previous.phase if previous else ""
        try:
            intent = MODELS[kind].from_object(
                {k: v for k, v in body.items() if k in ("apiVersion", "kind", "metadata", "spec")}
            )
        except ValidationError as err:
            await self._write_invalid(kind, ns, name, generation, previous_raw,
                                      field_errors(err), out)
            return out
        if not deleting:
            refused = policy.refusal(intent, self.policy)
            if refused is not None:
                # No work is written (nor deleted: what an earlier configuration allowed stays
                # until the admin or the tenant changes it); the status says why.
                metrics.WORK_ERRORS.labels(kind, refused[0]).inc()
                await self._write_invalid(kind, ns, name, generation, previous_raw,
                                          refused[1], out, reason=refused[0])
                return out
        spec: Any = cast(Any, intent).spec
        placement = spec.placement_ref.name
        found = self.world.placement_exists(ns, placement)
        clusters = self.world.placement_clusters(ns, placement) if found else frozenset()
        existing = self.world.works_of(kind, ns, name)
        out.remaining = sorted(existing)
        removed = kind == c.KIND_MODEL_SERVING and spec.management_state == "Removed"
        wanted = frozenset() if deleting else clusters
        lost: dict[str, tuple[str, str]] = {}
        if kind == c.KIND_MODEL_SERVING:
            lost = conflicts.lost_clusters(
                (ns, name), clusters, conflicts.winners(
                    cl for cl in self.world.claims() if self.policy.may_own_stack(cl.namespace)
                ),
            )
        inputs: dict[str, st.ClusterInput] = {}
        desired: dict[str, render.RenderedWork] = {}
        access_jobs: list[tuple[str, str, Awaitable[Any]]] = []
        for cl in sorted(wanted):
            work = existing.get(cl)
            if cl in lost:
                owner = lost[cl]
                inputs[cl] = st.ClusterInput(
                    cl, conflict_with=f"ModelServing {owner[0]}/{owner[1]}"
                )
                out.conflicts.append(cl)
                continue
            refused_here = self._namespace_refusal(intent, cl)
            if refused_here:
                inputs[cl] = st.ClusterInput(cl, work=work, error=refused_here,
                                             error_reason=policy.REASON_NAMESPACE)
                continue
            try:
                rw, waits, problem = self._render_one(kind, intent, ns, name, cl)
            except render.RenderError as err:
                inputs[cl] = st.ClusterInput(cl, work=work, error=str(err),
                                             error_reason="RenderFailed")
                continue
            if problem:
                inputs[cl] = st.ClusterInput(cl, work=work, error=problem[1],
                                             error_reason=problem[0])
                continue
            if rw is not None and kind in policy.TENANT_KINDS:
                rw, waits = self._tenant_gate(ns, cl, rw, waits, access_jobs)
            if rw is None or (waits and work is None):
                inputs[cl] = st.ClusterInput(cl, work=work, waits=waits)
                continue
            if (removed and work is not None and work.render_hash != rw.render_hash
                    and not ordering.removal_ordered(work)):
                # managementState Removed: the work is left exactly as it is while add-on
                # intents still use the stack there.
                blockers = self._removal_blockers(cl)
                if blockers:
                    out.blocked[cl] = blockers
                    inputs[cl] = st.ClusterInput(cl, work=work, blocked_by=tuple(blockers))
                    continue
            desired[cl] = rw
            going = ""
            if kind in (c.KIND_INFERENCE_SERVICE, c.KIND_SERVING_RUNTIME):
                going = ordering.platform_going(self.world.works_on(cl, c.KIND_MODEL_SERVING))
            inputs[cl] = st.ClusterInput(cl, work=work, platform_going=going)

        await self.sealer.flush()  # pins decided above are on the hub before anything is sealed
        fanout_started = time.monotonic()
        secrets: dict[str, dict[str, str] | _Unreadable | None] = {}
        jobs: list[tuple[str, str, Awaitable[Any]]] = []
        for cl, rw in desired.items():
            have = existing.get(cl)
            if not self._needs_write(rw, have):
                out.skipped += 1
                metrics.WORK_SKIPS.labels(kind).inc()
                continue
            if have is None and self.world.foreign_work(cl, rw.name):
                inputs[cl] = st.ClusterInput(
                    cl, error=f"ManifestWork {cl}/{rw.name} exists and is not ours",
                    error_reason="ForeignWork")
                metrics.WORK_ERRORS.labels(kind, "ForeignWork").inc()
                continue
            secret_data: dict[str, str] | None = None
            ref = rw.sealed_spec.secret_ref if rw.sealed_spec is not None else None
            if ref is not None:  # read once per reconcile, whichever clusters use it
                if ref.name not in secrets:
                    secrets[ref.name] = await self._read_secret(ns, ref.name)
                assert rw.sealed_spec is not None
                decoded = decoded_secret(ns, ref.name, rw.sealed_spec, secrets[ref.name])
                if isinstance(decoded, tuple):
                    inputs[cl] = st.ClusterInput(cl, work=have, error=decoded[1],
                                                 error_reason=decoded[0])
                    metrics.WORK_ERRORS.labels(kind, decoded[0]).inc()
                    continue
                secret_data = decoded
            jobs.append(("apply", cl, self._apply(kind, rw, have, secret_data)))
        check_time = _now()
        for cl, work in existing.items():
            # A Placement that disappears (deleted by mistake, or being re-created) is not a
            # decision to uninstall everywhere: what was sent stays until it exists again or
            # the intent itself is deleted.
            left = found and cl not in clusters and cl not in lost
            if left and not deleting and not work.deleting:
                # Left while unreachable (a partition, not a decision): kept for the grace.
                kept = partition.hold(self.world.cluster_health(cl), check_time,
                                      self.unavailable_grace)
                if kept is not None:
                    out.held[cl] = kept.until
                    inputs[cl] = st.ClusterInput(cl, work=work, kept=kept.message)
                    continue
            if deleting or cl in lost or left:
                if kind == c.KIND_MODEL_SERVING and not work.deleting:
                    blockers = self._removal_blockers(cl)
                    if blockers:  # the stack stays while add-on intents use it there
                        out.blocked[cl] = blockers
                        inputs[cl] = st.ClusterInput(cl, work=work, blocked_by=tuple(blockers))
                        continue
                jobs.append(("delete", cl, self._delete(work)))
        if kind == c.KIND_STORAGE_CONNECTION:
            jobs.extend(self._identity_jobs(wanted - set(lost)))
        jobs.extend(access_jobs)
        if kind == c.KIND_MODEL_SERVING and self.addons:
            jobs.extend(("addon", cl, self._ensure_addon(cl)) for cl in desired)
        results = await asyncio.gather(*(j[2] for j in jobs), return_exceptions=True)
        for (what, cl, _), result in zip(jobs, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, (WriteError, sealing.SealError)):
                    raise result
                out.errors += 1
                metrics.WORK_ERRORS.labels(kind, what).inc()
                log.warning("%s %s/%s on %s failed: %s", what, ns, name, cl, result)
                if what == "apply" and cl in inputs:
                    reason = "ForeignWork" if getattr(result, "status", 0) == 409 else "ApplyFailed"
                    inputs[cl] = st.ClusterInput(cl, work=existing.get(cl), error=str(result),
                                                 error_reason=reason)
            elif what == "apply":
                out.applied += 1
            elif what == "delete":
                # Sent (or sent before): shown as going, not as its last report.
                inputs[cl] = st.ClusterInput(cl, work=replace(existing[cl], deleting=True))
                out.deleted += 1 if result else 0
        if out.applied or out.deleted:
            metrics.FANOUT_SECONDS.labels(kind).observe(time.monotonic() - fanout_started)
            log.info(
                "fan-out of %s %s/%s: %d applied, %d deleted, %d unchanged in %.2fs",
                kind, ns, name, out.applied, out.deleted, out.skipped,
                time.monotonic() - fanout_started,
            )
        now = _now()
        # A cluster that left keeps its entry until its work is gone: its removal may be
        # blocked on the spoke, and the hub must say so rather than forget the cluster.
        for cl in set(existing) - set(inputs):
            inputs[cl] = st.ClusterInput(cl, work=existing[cl])
        judged = [replace(inputs[cl], health=self.world.cluster_health(cl))
                  for cl in sorted(inputs)]
        entries = [
            st.cluster_status(kind, item, removed=removed, now=now, stale_after=self.stale_after)
            for item in judged
        ]
        waiting_for_grant = any(w.reason == tenancy.WAITING_FOR_ACCESS
                                for item in judged for w in item.waits)
        out.recheck_after = _earliest(
            st.recheck_in(judged, now, self.stale_after),
            tenancy.GRANT_RETRY_SECONDS if waiting_for_grant else None,
            *((until - now).total_seconds() for until in out.held.values()),
        )
        extra: list[Condition] = []
        if deleting and out.blocked:
            extra.append(st.deletion_refused(out.blocked, generation, now))
        elif deleting and overdue and existing:
            extra.append(st.deletion_blocked(sorted(existing), generation, now))
        new = st.aggregate(
            entries,
            st.PlacementState(placement, found, clusters), generation, previous, now,
            extra_conditions=extra,
            platform=kind == c.KIND_MODEL_SERVING, deleting=deleting,
        )
        await self._write_status(kind, ns, name, previous_raw, new, out, keep_blocked=not deleting)
        self._observe(kind, ns, name, new)
        metrics.RECONCILE_SECONDS.labels(kind).observe(time.monotonic() - started)
        return out

    async def _read_secret(self, ns: str, name: str) -> dict[str, str] | _Unreadable | None:
        """A Secret's decoded data; a read the API server refuses becomes a reason."""
        try:
            return await self.writer.read_secret(ns, name)
        except WriteError as err:
            if err.status in (401, 403):
                return _Unreadable("SecretForbidden", f"Secret {ns}/{name}: " + forbidden_detail(
                    ns, f"HTTP {err.status}") + "; nothing is delivered until it may")
            return _Unreadable("SecretReadFailed", f"Secret {ns}/{name}: {err}")

    def _render_one(
        self, kind: str, intent: Resource, ns: str, name: str, cl: str
    ) -> tuple[render.RenderedWork | None, list[ordering.Wait], tuple[str, str] | None]:
        labels = self.world.cluster_labels(cl)
        if isinstance(intent, ModelServing):
            return render.render_model_serving(intent, cl, labels), [], None
        if isinstance(intent, MultiClusterServingRuntime):
            waits = ordering.waits_for_runtime(self.world.works_on(cl, c.KIND_MODEL_SERVING))
            return render.render_serving_runtime(intent, cl, labels), waits, None
        if isinstance(intent, MultiClusterInferenceService):
            storage = list(intent.spec.storage_connections)
            waits = ordering.waits_for_inference_service(
                self.world.works_on(cl, c.KIND_MODEL_SERVING),
                storage,
                {s: self.world.works_of(c.KIND_STORAGE_CONNECTION, ns, s).get(cl)
                 for s in storage},
            )
            return render.render_inference_service(intent, cl, labels), waits, None
        assert isinstance(intent, StorageConnection)
        cluster_spec = render.storage_cluster_spec(intent, cl, labels)
        secret_name = cluster_spec.secret_ref.name if cluster_spec.secret_ref else ""
        agent_ns = self.world.agent_namespace(cl)
        key, waits, problem = self._agent_key(cl, agent_ns)
        if problem is not None:
            return None, [], problem
        if key is None:
            return None, waits, None
        digest = ""
        if secret_name:
            access = self.world.secret_access(ns)
            if access.state == "pending":
                return None, [], None  # its namespace's Secrets are being listed
            if access.state == "forbidden":
                return None, [], ("SecretForbidden", f"Secret {ns}/{secret_name}: "
                                  f"{access.detail}; nothing is delivered until it may")
            found = self.world.secret(ns, secret_name)
            if found is None:
                return None, [], ("SecretNotFound", f"Secret {secret_name} does not exist")
            missing = render.missing_secret_keys(cluster_spec, found.keys)
            if missing:
                return None, [], ("SecretKeyMissing", f"Secret {ns}/{secret_name} has no " + (
                    ", ".join(f"key {key!r} (named by spec.secretRef.keys.{field})"
                              for field, key in missing)
                ) + "; nothing is delivered until it has")
            bad = [k for k in render.secret_keys_read(cluster_spec, found.keys)
                   if k in found.undecodable]
            if bad:
                return None, [], ("SecretUndecodable", f"Secret {ns}/{secret_name}: the value "
                                  "of " + ", ".join(f"key {k!r}" for k in bad) + " is not "
                                  "base64 of UTF-8 text; nothing is delivered until it is")
            digest = found.digest
        inputs = render.SealInputs(
            public_key=key.public_key,
            key_id=key.key_id,
            binding=sealing.binding_for(agent_ns, naming.sealed_name(ns, name)),
            secret_digest=digest,
            hash_key=self.sealer.keys.hash_key,
        )
        return render.render_storage_connection(
            intent, cl, labels, inputs, spec=cluster_spec, namespace=agent_ns
        ), [], None

    def _identity_work(self, cl: str) -> WorkFact | None:
        """The identity work of ``cl``: the one of its exact name (never another labelled one)."""
        return next((w for w in self.world.works_on(cl, naming.KIND_IDENTITY)
                     if w.name == naming.IDENTITY_WORK_NAME), None)

    def _agent_key(
        self, cl: str, agent_ns: str
    ) -> tuple[ordering.AgentKey | None, list[ordering.Wait], tuple[str, str] | None]:
        """The key to seal to on ``cl``: (key, waits, problem) after the identity and pin checks.

        The identity work must be the one of its exact name with the shape the manager renders
        (ReadOnly, reading the agent's ConfigMap in ``agent_ns``): any other is not trusted
        (``IdentityWorkInvalid``; the manager writes it again). The published key must be
        the pinned one (see :mod:`addon_manager.pinning`), else ``AgentKeyChanged``.
        """
        identity = self._identity_work(cl)
        if identity is not None and identity.render_hash == render.render_identity(
            cl, agent_ns
        ).render_hash and identity.identity_source != (
            f"{agent_ns}/{c.AGENT_IDENTITY_CONFIGMAP}"
        ):
            return None, [], (pinning.REASON_IDENTITY_INVALID, (
                f"ManifestWork {cl}/{naming.IDENTITY_WORK_NAME} was changed: it is not the "
                "ReadOnly work reading the agent's identity ConfigMap; its key is not trusted "
                "and nothing is sealed until the manager has written it again"))
        if identity is not None and identity.render_hash != render.render_identity(
            cl, agent_ns
        ).render_hash:
            identity = None  # it reads another namespace (the agent moved), or is being rewritten
        published = pinning.published(identity)
        if published is None:
            return None, ordering.waits_for_storage(None), None
        decision = pinning.decide(
            cl, self.sealer.pinned(cl), self.sealer.approved(cl), published,
            self.sealer.approve_hint(cl, published.current.key_id),
        )
        if decision.key is None:
            return None, [], (decision.reason, decision.message)
        if decision.pin is not None:
            self.sealer.pin(cl, decision.pin)
        return decision.key, [], None

    def _namespace_refusal(self, intent: Resource, cluster: str) -> str:
        """The namespace policy again, with the cluster's own agent namespace.

        Only when it has another than the default, which the intent-wide check covered.
        """
        agent_ns = self.world.agent_namespace(cluster)
        if agent_ns == c.AGENT_NAMESPACE:
            return ""
        refused = policy.namespace_refusals(intent, self.policy, agent_ns)
        return policy.namespace_message(refused) if refused else ""

    def _tenant_gate(
        self, ns: str, cl: str, rw: render.RenderedWork, waits: list[ordering.Wait],
        jobs: list[tuple[str, str, Awaitable[Any]]],
    ) -> tuple[render.RenderedWork, list[ordering.Wait]]:
        """A tenant work as its tenant's executor applies it, waiting for that identity.

        The tenant's access work (executor and RBAC, :mod:`addon_manager.tenancy`) is written
        when needed (a job added to ``jobs``); a tenant allowed any namespace has no executor.
        """
        executor = self.policy.namespaces.executor(ns)
        if executor is None:
            return rw, waits
        agent_ns = self.world.agent_namespace(cl)
        want = tenancy.render_access(ns, cl, agent_ns, self.policy.namespaces.targets(ns))
        have = self.world.works_of(tenancy.ACCESS_KIND, ns, tenancy.ACCESS_NAME).get(cl)
        needed = tenancy.work_namespaces(rw)
        if self._needs_write(want, have):
            jobs.append(("access", cl, self._apply(tenancy.ACCESS_KIND, want, have, None)))
        elif tenancy.grant_retry_due(have, want, needed):
            last = self._grant_retries.get((cl, want.name), 0.0)
            if time.monotonic() - last >= tenancy.GRANT_RETRY_SECONDS:
                self._grant_retries[(cl, want.name)] = time.monotonic()
                retry = tenancy.with_retry_label(want, str(int(time.time())))
                jobs.append(("access", cl, self._apply(tenancy.ACCESS_KIND, retry, have, None)))
        gated = tenancy.with_executor(rw, agent_ns, executor)
        return gated, [*waits, *tenancy.access_waits(ns, want, have, needed)]

    async def gc_tenant_access(
        self, namespace: str, exclude: tuple[str, str, str] | None = None
    ) -> int:
        """Delete a tenant's access works on clusters where it has no other tenant work."""
        access = list(self.world.works_of(tenancy.ACCESS_KIND, namespace,
                                          tenancy.ACCESS_NAME).values())
        tenant = [w for a in access for k in policy.TENANT_KINDS
                  for w in self.world.works_on(a.cluster, k) if w.intent_namespace == namespace]
        gone = tenancy.unused_access(access, tenant, exclude)
        results = await asyncio.gather(*(self._delete(w) for w in gone), return_exceptions=True)
        return sum(1 for r in results if r is True)

    def _identity_jobs(self, clusters: frozenset[str]) -> list[tuple[str, str, Awaitable[Any]]]:
        jobs: list[tuple[str, str, Awaitable[Any]]] = []
        for cl in sorted(clusters):
            agent_ns = self.world.agent_namespace(cl)
            rw = render.render_identity(cl, agent_ns)
            have = self._identity_work(cl)
            tampered = have is not None and not have.deleting and (
                have.identity_source != f"{agent_ns}/{c.AGENT_IDENTITY_CONFIGMAP}"
            )
            if tampered and not self._recently_applied(rw.cluster, rw.name, rw.render_hash):
                have = replace(have, render_hash="") if have is not None else None
            if self._needs_write(rw, have):
                jobs.append(("identity", cl, self._apply(naming.KIND_IDENTITY, rw, have, None)))
        return jobs

    async def gc_identity(self, exclude: tuple[str, str] | None = None) -> int:
        """Delete identity works on clusters no StorageConnection selects any more."""
        keep = self.world.storage_clusters(exclude)
        gone = [w for w in self.world.works_of(naming.KIND_IDENTITY, "", "agent").values()
                if w.cluster not in keep]
        results = await asyncio.gather(*(self._delete(w) for w in gone), return_exceptions=True)
        return sum(1 for r in results if r is True)

    async def _ensure_addon(self, cluster: str) -> None:
        seen = self._addons.get(cluster)
        if self.world.addon_exists(cluster) or (
            seen is not None and time.monotonic() - seen < WATCH_GRACE
        ):
            return
        await self.writer.ensure_addon(cluster)
        self._addons[cluster] = time.monotonic()

    async def cleanup(self, kind: str, namespace: str, name: str) -> list[str]:
        """Delete an intent's works; return the clusters whose works still exist.

        A ModelServing's work stays on a cluster where add-on intents still have works (the
        removal rule; see :meth:`reconcile`, which the deletion of a readable one goes through).
        """
        works = self.world.works_of(kind, namespace, name)
        going = [w for w in works.values() if kind != c.KIND_MODEL_SERVING or w.deleting
                 or not self._removal_blockers(w.cluster)]
        await asyncio.gather(*(self._delete(w) for w in going), return_exceptions=True)
        if kind == c.KIND_STORAGE_CONNECTION:
            await self.gc_identity(exclude=(namespace, name))
        if kind in policy.TENANT_KINDS:
            await self.gc_tenant_access(namespace, exclude=(kind, namespace, name))
        return sorted(works)

    # status ---------------------------------------------------------------------------------

    async def _write_status(
        self, kind: str, ns: str, name: str, previous_raw: Mapping[str, Any] | None,
        new: IntentStatus, out: Outcome, *, keep_blocked: bool = True,
    ) -> None:
        new_dict = new.to_dict()
        old = dict(previous_raw) if previous_raw else None
        extra = [x for x in (old or {}).get("conditions", []) if x.get("type") == "DeletionBlocked"]
        if extra and keep_blocked:
            new_dict["conditions"] = [*new_dict["conditions"], *extra]
        out.phase_after = new.phase
        if st.comparable(new_dict) == st.comparable(old):
            return
        await self.writer.patch_status(c.GROUP, c.VERSION, PLURALS[kind], ns, name, new_dict)
        out.status_written = True

    async def _write_invalid(
        self, kind: str, ns: str, name: str, generation: Any,
        previous_raw: Mapping[str, Any] | None, message: str, out: Outcome,
        *, reason: str = "InvalidSpec",
    ) -> None:
        now = _now()
        new = IntentStatus(
            observed_generation=generation, phase="Invalid",
            conditions=[condition(c.CONDITION_READY, False, reason, message, now=now)],
        )
        await self._write_status(kind, ns, name, previous_raw, new, out)

    async def write_deletion_blocked(
        self, kind: str, ns: str, name: str, body: Mapping[str, Any], clusters: list[str]
    ) -> None:
        """Add (or refresh) the DeletionBlocked condition naming the clusters left."""
        meta = body.get("metadata") or {}
        status = dict(body.get("status") or {})
        cond = st.deletion_blocked(clusters, meta.get("generation"), _now()).to_dict()
        conds = [x for x in status.get("conditions") or [] if x.get("type") != "DeletionBlocked"]
        old = [x for x in status.get("conditions") or [] if x.get("type") == "DeletionBlocked"]
        if old and old[0].get("message") == cond["message"]:
            return
        await self.writer.patch_status(
            c.GROUP, c.VERSION, PLURALS[kind], ns, name, {"conditions": [*conds, cond]}
        )

    def _observe(self, kind: str, ns: str, name: str, new: IntentStatus) -> None:
        metrics.CLUSTERS_DESIRED.labels(kind, ns, name).set(new.summary.desired)
        metrics.CLUSTERS_READY.labels(kind, ns, name).set(new.summary.ready)
        for cond in new.conditions:
            for value in ("True", "False"):
                metrics.INTENT_CONDITIONS.labels(kind, ns, name, cond.type, value).set(
                    1 if cond.status == value else 0
                )
