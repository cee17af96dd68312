"""The executor: performs a :class:`~addon_manager.engine.plan.Plan` against the hub.

It records the pins first (nothing is sealed to an unpinned key), reads each hub Secret a
plan seals from once, seals, applies and deletes works concurrently, enables add-ons, and
remembers its own writes (the :class:`~addon_manager.engine.plan.Recent` the next plan reads). It
decides nothing a plan did not say, except a Secret that changed since the watch saw it,
which fails that cluster's write (half a credential is never delivered).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol

from addon_api import sealing
from addon_api.reasons import ClusterReason
from addon_manager.engine.plan import Apply, Executed, Plan, Recent
from addon_manager.engine.sharding import FENCE_ANNOTATION
from addon_manager.facts import revisions
from addon_manager.facts.records import WorkFact
from addon_manager.facts.revisions import RevisionFact
from addon_manager.facts.secrets import decode_value, forbidden_detail
from addon_manager.kinds import storage_connection
from addon_manager.shell import metrics, sealkeys
from addon_manager.shell.apply import Holds, Withheld, WriteError

log = logging.getLogger(__name__)


class Writer(Protocol):
    """What the executor writes with (see :class:`~addon_manager.shell.apply.HubWriter`)."""

    def apply_work(self, body: dict[str, Any], *, force: bool,
                   holds: Holds | None = None) -> Awaitable[int | None]:
        """Server-side apply a ManifestWork (not sent once ``holds`` says no)."""

    def delete_work(self, namespace: str, name: str, *,
                    holds: Holds | None = None) -> Awaitable[None]:
        """Delete a ManifestWork (not sent once ``holds`` says no)."""

    def patch_status(
        self, group: str, version: str, plural: str, namespace: str, name: str,
        status: dict[str, Any],
    ) -> Awaitable[None]:
        """Merge-patch an intent's status."""

    def ensure_addon(self, cluster: str) -> Awaitable[None]:
        """Create the ManagedClusterAddOn if missing."""

    def create_revision(self, body: dict[str, Any]) -> Awaitable[None]:
        """Create a ControllerRevision keeping an intent's revision."""

    def delete_revision(self, namespace: str, name: str) -> Awaitable[None]:
        """Delete a ControllerRevision."""

    def read_secret(self, namespace: str, name: str) -> Awaitable[dict[str, str] | None]:
        """Read a hub Secret's ``data`` as stored (base64 values), None when it does not exist.

        Raises :class:`~addon_manager.shell.apply.WriteError` (``status`` 403 when forbidden).
        """

    def apply_object(self, group: str, version: str, plural: str, body: dict[str, Any], *,
                     status: bool = False) -> Awaitable[None]:
        """Server-side apply a namespaced hub object (``status``: its status subresource).

        Raises :class:`~addon_manager.shell.apply.WriteError` (``status`` 404 when the hub
        does not serve the kind).
        """

    def delete_object(self, group: str, version: str, plural: str, namespace: str,
                      name: str) -> Awaitable[None]:
        """Delete a namespaced hub object; one already gone is fine."""


@dataclass(frozen=True)
class Unreadable:
    """A Secret the API server would not give: the reason and message its clusters show."""

    reason: ClusterReason
    message: str


def decoded_secret(
    ns: str, name: str, spec: Any, data: dict[str, str] | Unreadable | None
) -> dict[str, str] | tuple[ClusterReason, str]:
    """The keys of a Secret just read that ``spec`` seals, decoded; else (reason, message).

    The watch's facts were checked when planning; this catches a Secret that changed since
    (or a read that failed), so that half a credential is never delivered.
    """
    if isinstance(data, Unreadable):
        return data.reason, data.message
    if data is None:
        return ClusterReason.SECRET_NOT_FOUND, f"Secret {name} does not exist"
    read = storage_connection.secret_keys_read(spec, tuple(data))
    missing = [k for k in read if k not in data]
    if missing:
        return ClusterReason.SECRET_KEY_MISSING, f"Secret {ns}/{name} has no " + ", ".join(
            f"key {k!r}" for k in missing) + "; nothing is delivered until it has"
    out = {k: decode_value(data[k]) for k in read}
    bad = [k for k, v in out.items() if v is None]
    if bad:
        return ClusterReason.SECRET_UNDECODABLE, (
            f"Secret {ns}/{name}: the value of " + ", ".join(f"key {k!r}" for k in bad)
            + " is not base64 of UTF-8 text; nothing is delivered until it is")
    return {k: v for k, v in out.items() if v is not None}


FENCED = "no longer holds shard"
"""In the hub's refusal of a work written with a shard's old epoch (the chart's admission
policy ``<release>-shard-fence``)."""


class Executor:
    """Performs plans through a :class:`Writer`; remembers its writes."""

    def __init__(self, writer: Writer, sealer: sealkeys.Sealer) -> None:
        self.writer = writer
        self.sealer = sealer
        self.applied: dict[tuple[str, str], tuple[str, float, int]] = {}
        self.deleted: dict[tuple[str, str], float] = {}
        self.addons: dict[str, float] = {}
        self.grant_retries: dict[tuple[str, str], float] = {}
        self.revisions: dict[tuple[str, str, str], tuple[RevisionFact, ...]] = {}

    def recent(self) -> Recent:
        """The memory of recent writes, for the next plan."""
        return Recent(self.applied, self.deleted, self.addons, self.grant_retries,
                      time.monotonic(), self.revisions)

    async def run(self, plan: Plan, fence: str | None = None,
                  holds: Holds | None = None) -> Executed:
        """Perform ``plan``: pins, then every write at once; report what happened.

        ``fence`` (sharded managers): ``<shard>/<epoch>`` of the shard Lease this replica
        writes by, set on every work it applies (``sharding.FENCE_ANNOTATION``). ``holds``
        says whether the replica still holds that shard: a work write whose turn comes
        after it was handed over is not sent (``Executed.withheld``).
        """
        done = Executed()
        roll = plan.rollout
        if roll is not None and roll.create is not None:  # before any work renders it
            await self.writer.create_revision(roll.create)
            parsed = revisions.parse(roll.create)
            if parsed is not None:
                self.revisions[parsed[0]] = (*self.revisions.get(parsed[0], ()), parsed[1])
        for cluster, key in plan.pins.items():
            self.sealer.pin(cluster, key)
        await self.sealer.flush()  # pins are on the hub before anything is sealed
        started = time.monotonic()
        secrets: dict[str, dict[str, str] | Unreadable | None] = {}
        jobs: list[tuple[str, str, Awaitable[Any]]] = []
        for item in plan.applies:
            data: dict[str, str] | None = None
            if item.secret:  # read once per plan, whichever clusters use it
                if item.secret not in secrets:
                    secrets[item.secret] = await self._read_secret(plan.namespace, item.secret)
                decoded = decoded_secret(plan.namespace, item.secret, item.work.sealed_spec,
                                         secrets[item.secret])
                if isinstance(decoded, tuple):
                    done.failed[item.work.cluster] = decoded
                    metrics.WORK_ERRORS.labels(item.kind, decoded[0]).inc()
                    continue
                data = decoded
            if item.grant_retry:
                self.grant_retries[(item.work.cluster, item.work.name)] = time.monotonic()
            jobs.append((item.what, item.work.cluster, self.apply(item, data, fence, holds)))
        for gone in plan.deletes:
            jobs.append(("delete", gone.work.cluster,
                         self.delete(gone.work, send=gone.send, holds=holds)))
        jobs.extend(("addon", cl, self.ensure_addon(cl)) for cl in plan.addons)
        results = await asyncio.gather(*(j[2] for j in jobs), return_exceptions=True)
        kind = plan.spec.kind
        for (what, cl, _), result in zip(jobs, results, strict=True):
            if isinstance(result, BaseException):
                if isinstance(result, Withheld):
                    done.withheld = True
                    continue
                if not isinstance(result, (WriteError, sealing.SealError)):
                    raise result
                if FENCED in str(result):
                    done.fenced = True
                    continue
                done.errors += 1
                metrics.WORK_ERRORS.labels(kind, what).inc()
                log.warning("%s %s/%s on %s failed: %s", what, plan.namespace, plan.name, cl,
                            result)
                if what == "apply":
                    reason = (ClusterReason.FOREIGN_WORK if getattr(result, "status", 0) == 409
                              else ClusterReason.APPLY_FAILED)
                    done.failed[cl] = (reason, str(result))
            elif what == "apply":
                done.applied += 1
            elif what == "delete":
                done.going.add(cl)  # sent (or sent before): shown as going
                done.deleted += 1 if result else 0
        if roll is not None and roll.prune:
            await self._prune(plan, roll.prune)
        if done.applied or done.deleted:
            metrics.FANOUT_SECONDS.labels(kind).observe(time.monotonic() - started)
            log.info(
                "fan-out of %s %s/%s: %d applied, %d deleted, %d unchanged in %.2fs",
                kind, plan.namespace, plan.name, done.applied, done.deleted, plan.skipped,
                time.monotonic() - started,
            )
        return done

    async def apply(self, item: Apply, secret: dict[str, str] | None = None,
                    fence: str | None = None, holds: Holds | None = None) -> None:
        """Apply one work (sealing its payload first when it carries credentials)."""
        rw, body = item.work, item.work.body
        if fence is not None:  # not part of the render: an unchanged work is not rewritten
            meta = body.get("metadata") or {}
            body = {**body, "metadata": {**meta, "annotations": {
                **(meta.get("annotations") or {}), FENCE_ANNOTATION: fence}}}
        if rw.seal_inputs is not None:
            assert rw.sealed_spec is not None
            payload = storage_connection.storage_payload(rw.sealed_spec, secret or {})
            sequence = await self.sealer.next_sequence()
            body = storage_connection.with_sealed(rw, sealing.seal(
                rw.seal_inputs.public_key, storage_connection.binding_of(rw), sequence, payload,
                self.sealer.keys.signing_key,
            ))
        version = await self.writer.apply_work(body, force=item.have is not None, holds=holds)
        self.applied[(rw.cluster, rw.name)] = (rw.render_hash, time.monotonic(), version or 0)
        # Written again: a delete of it is due again whenever asked for, however recently
        # the one of that name before it was deleted.
        self.deleted.pop((rw.cluster, rw.name), None)
        metrics.WORK_APPLIES.labels(item.kind).inc()

    async def delete(self, work: WorkFact, *, send: bool = True,
                     holds: Holds | None = None) -> bool:
        """Delete one work unless ``send`` is False; True when a delete was sent."""
        if not send:
            return False
        await self.writer.delete_work(work.cluster, work.name, holds=holds)
        key = (work.cluster, work.name)
        self.deleted[key] = time.monotonic()
        self.applied.pop(key, None)
        metrics.WORK_DELETES.labels(work.kind).inc()
        return True

    async def _prune(self, plan: Plan, names: list[str]) -> None:
        """Delete revisions beyond the history limit (a failure is retried next time)."""
        key = (plan.spec.kind, plan.namespace, plan.name)
        for name in names:
            try:
                await self.writer.delete_revision(plan.namespace, name)
            except WriteError as err:
                log.warning("deleting revision %s/%s failed: %s", plan.namespace, name, err)
                continue
            self.revisions[key] = tuple(f for f in self.revisions.get(key, ()) if f.name != name)

    async def ensure_addon(self, cluster: str) -> None:
        """Create the ManagedClusterAddOn of ``cluster``."""
        await self.writer.ensure_addon(cluster)
        self.addons[cluster] = time.monotonic()

    async def _read_secret(self, ns: str, name: str) -> dict[str, str] | Unreadable | None:
        """A Secret's data; a read the API server refuses becomes a reason."""
        try:
            return await self.writer.read_secret(ns, name)
        except WriteError as err:
            if err.status in (401, 403):
                return Unreadable(ClusterReason.SECRET_FORBIDDEN, f"Secret {ns}/{name}: "
                                  + forbidden_detail(ns, f"HTTP {err.status}")
                                  + "; nothing is delivered until it may")
            return Unreadable(ClusterReason.SECRET_READ_FAILED, f"Secret {ns}/{name}: {err}")
