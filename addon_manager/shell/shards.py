"""A replica's shard Leases on the hub: acquired, renewed, handed over (``--shards``).

Several manager replicas run side by side, each planning and writing only the intents of
the shards it holds (:mod:`addon_manager.engine.sharding` decides which). A background
thread, every retry period:

1. renews the replica's member Lease (``...-member-<replica>``): it says the replica is alive;
2. lists every sharding Lease of the namespace in one request;
3. releases the shards a live replica should hold instead (stopping their writes first),
   renews the others it holds, and acquires the free ones it should hold, each write a
   compare-and-swap on the Lease's resourceVersion so two replicas never both win it.

A shard is this replica's to write for :attr:`ShardSettings.renew_deadline` seconds after
its last successful renewal (:meth:`ShardKeeper.epoch`), less than the Lease's duration
after which another replica may take it: a replica that cannot reach the hub stops writing
before anyone else starts. The epoch is the Lease's ``leaseTransitions``, incremented at each
acquisition; every work write carries it (``sharding.FENCE_ANNOTATION``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from addon_manager.engine import sharding
from addon_manager.engine.sharding import Observed
from addon_manager.shell import metrics

log = logging.getLogger(__name__)

Changed = Callable[[dict[int, int], set[int]], None]
"""Told (from the keeper's thread) the shards gained, with their epochs, and those lost."""


@dataclass(frozen=True)
class ShardSettings:
    """Where the Leases live, who this replica is, how many shards, and the timings (s)."""

    namespace: str
    identity: str
    shards: int
    lease_duration: int = 15
    renew_deadline: int = 10
    retry_period: int = 2


def _now() -> datetime:
    return datetime.now(UTC)


class ShardKeeper:
    """The shard Leases of one replica."""

    def __init__(self, api: client.ApiClient, settings: ShardSettings, changed: Changed) -> None:
        self.settings = settings
        self._api = client.CoordinationV1Api(api)
        self._changed = changed
        self._lock = threading.Lock()
        self._held: dict[int, tuple[int, float]] = {}
        """Shard -> (epoch, when it was last renewed, monotonic)."""
        self._seen: dict[str, tuple[str, float]] = {}
        """Lease name -> (resourceVersion, when it was seen to change, monotonic)."""
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    # What the event loop asks ------------------------------------------------------------------

    def epoch(self, shard: int) -> int | None:
        """The epoch of ``shard`` while this replica may write it, else None."""
        with self._lock:
            held = self._held.get(shard)
        if held is None or time.monotonic() - held[1] >= self.settings.renew_deadline:
            return None
        return held[0]

    def held(self) -> dict[int, int]:
        """The shards this replica may write now, with their epochs."""
        return {k: e for k in list(self._held) if (e := self.epoch(k)) is not None}

    # The thread ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Start keeping the Leases in a background thread."""
        self._thread = threading.Thread(target=self._run, name="shard-leases", daemon=True)
        self._thread.start()
        log.info("%s keeps %d shards in %s", self.settings.identity, self.settings.shards,
                 self.settings.namespace)

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self.tick()
            except Exception as err:  # the hub unreachable: held shards lapse by the clock
                log.warning("shard Leases not kept this round: %s", err)
                self._lapse()
            self._stopped.wait(self.settings.retry_period)

    def stop(self) -> None:
        """Stop, release every held shard and the member Lease (others take over at once)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=self.settings.retry_period + 5)
        with self._lock:
            held, self._held = dict(self._held), {}
        self._changed({}, set(held))
        released = []
        for shard in held:
            try:
                self._release(shard)
            except ApiException as err:
                log.warning("shard %d not released (it lapses by its Lease): %s", shard, err)
            else:
                released.append(shard)
        try:
            self._api.delete_namespaced_lease(
                sharding.member_lease_name(self.settings.identity), self.settings.namespace)
        except ApiException as err:
            log.warning("member Lease not deleted: %s", err)
        log.info("stopped: released shards %s", sorted(released))
        metrics.SHARDS_HELD.set(0)

    def tick(self) -> None:
        """One round: renew the member Lease, then release, renew and acquire shards."""
        s = self.settings
        self._renew_member()
        listed = self._api.list_namespaced_lease(
            s.namespace, label_selector=sharding.LEASE_ROLE_LABEL).items
        now = time.monotonic()
        members: dict[str, Observed] = {}
        shards: dict[int, Observed] = {}
        raw: dict[int, client.V1Lease] = {}
        for lease in listed:
            observed = self._observe(lease, now)
            labels = (lease.metadata.labels if lease.metadata else None) or {}
            if labels.get(sharding.LEASE_ROLE_LABEL) == "member":
                members[observed.holder] = observed
            elif labels.get(sharding.LEASE_ROLE_LABEL) == "shard":
                with contextlib.suppress(KeyError, ValueError):
                    shard = int(labels[sharding.SHARD_LABEL])
                    shards[shard], raw[shard] = observed, lease
        listed_names = {str(lease.metadata.name) for lease in listed if lease.metadata}
        self._seen = {k: v for k, v in self._seen.items() if k in listed_names}
        with self._lock:
            mine = list(self._held)
        decision = sharding.decide(s.identity, s.shards, members, shards, mine, now)
        gained: dict[int, int] = {}
        lost: set[int] = set()
        for shard in decision.release:
            with self._lock:
                self._held.pop(shard, None)
            lost.add(shard)
        if lost:  # no write of theirs starts from here on; then they are handed over
            self._changed({}, lost)
            for shard in sorted(lost):
                with contextlib.suppress(ApiException):
                    self._release(shard, raw.get(shard))
            log.info("released shards %s to the replicas that should hold them", sorted(lost))
            lost = set()
        for shard in decision.renew:
            if not self._renew(shard, raw.get(shard)):
                with self._lock:
                    self._held.pop(shard, None)
                lost.add(shard)
        for shard in decision.acquire:
            epoch = self._acquire(shard, raw.get(shard))
            if epoch is not None:
                gained[shard] = epoch
        for name in decision.forget:
            self._forget(name, members[name].resource_version)
        lost |= self._lapse(notify=False)
        if gained or lost:
            if gained:
                log.info("acquired shards %s", {k: gained[k] for k in sorted(gained)})
            if lost:
                log.warning("lost shards %s (another replica holds them now)", sorted(lost))
            self._changed(gained, lost)
        metrics.SHARDS_HELD.set(len(self.held()))

    def _lapse(self, *, notify: bool = True) -> set[int]:
        """Forget the shards not renewed within the renew deadline; return them."""
        now = time.monotonic()
        with self._lock:
            gone = {k for k, (_, at) in self._held.items()
                    if now - at >= self.settings.renew_deadline}
            for k in gone:
                del self._held[k]
        if gone and notify:
            log.warning("shards %s not renewed in time: no more writes for them", sorted(gone))
            self._changed({}, gone)
        return gone

    def _observe(self, lease: client.V1Lease, now: float) -> Observed:
        meta = lease.metadata or client.V1ObjectMeta()
        name, rv = str(meta.name or ""), str(meta.resource_version or "")
        seen = self._seen.get(name)
        changed_at = now if seen is None or seen[0] != rv else seen[1]
        self._seen[name] = (rv, changed_at)
        spec = lease.spec or client.V1LeaseSpec()
        return Observed(str(spec.holder_identity or ""), int(spec.lease_transitions or 0), rv,
                        changed_at, float(spec.lease_duration_seconds or 0))

    def _body(self, name: str, labels: dict[str, str], spec: client.V1LeaseSpec,
              resource_version: str | None = None) -> client.V1Lease:
        return client.V1Lease(
            metadata=client.V1ObjectMeta(name=name, namespace=self.settings.namespace,
                                         labels=labels, resource_version=resource_version),
            spec=spec)

    def _renew_member(self) -> None:
        s = self.settings
        name = sharding.member_lease_name(s.identity)
        now = _now()
        spec = client.V1LeaseSpec(holder_identity=s.identity,
                                  lease_duration_seconds=s.lease_duration, renew_time=now)
        labels = {sharding.LEASE_ROLE_LABEL: "member"}
        try:
            self._api.patch_namespaced_lease(name, s.namespace, {"spec": {
                "renewTime": now.isoformat(timespec="microseconds"),
                "holderIdentity": s.identity, "leaseDurationSeconds": s.lease_duration}},
                _content_type="application/merge-patch+json")
        except ApiException as err:
            if err.status != 404:
                raise
            self._api.create_namespaced_lease(s.namespace, self._body(name, labels, spec))

    def _shard_labels(self, shard: int) -> dict[str, str]:
        return {sharding.LEASE_ROLE_LABEL: "shard", sharding.SHARD_LABEL: str(shard)}

    def _acquire(self, shard: int, lease: client.V1Lease | None) -> int | None:
        """Take a free shard (compare-and-swap); its new epoch, or None if another won."""
        s = self.settings
        name = sharding.shard_lease_name(shard)
        now = _now()
        epoch = int((lease.spec.lease_transitions or 0) if lease and lease.spec else 0) + 1
        spec = client.V1LeaseSpec(holder_identity=s.identity,
                                  lease_duration_seconds=s.lease_duration, acquire_time=now,
                                  renew_time=now, lease_transitions=epoch)
        try:
            if lease is None:
                self._api.create_namespaced_lease(
                    s.namespace, self._body(name, self._shard_labels(shard), spec))
            else:
                meta = lease.metadata or client.V1ObjectMeta()
                self._api.replace_namespaced_lease(name, s.namespace, self._body(
                    name, self._shard_labels(shard), spec, meta.resource_version))
        except ApiException as err:
            if err.status in (409, 404):  # another replica was first (or it went)
                return None
            raise
        with self._lock:
            self._held[shard] = (epoch, time.monotonic())
        return epoch

    def _renew(self, shard: int, lease: client.V1Lease | None) -> bool:
        """Renew a held shard (compare-and-swap); False when it is no longer ours."""
        s = self.settings
        with self._lock:
            held = self._held.get(shard)
        if (held is None or lease is None or lease.spec is None
                or lease.spec.holder_identity != s.identity
                or int(lease.spec.lease_transitions or 0) != held[0]):
            return False
        started = time.monotonic()
        lease.spec.renew_time = _now()
        try:
            self._api.replace_namespaced_lease(sharding.shard_lease_name(shard), s.namespace,
                                               lease)
        except ApiException as err:
            if err.status in (409, 404):
                return False
            raise
        with self._lock:
            if shard in self._held:
                self._held[shard] = (held[0], started)
        return True

    def _forget(self, replica: str, resource_version: str) -> None:
        """Delete the member Lease of a replica seen dead, unless it renewed it meanwhile."""
        try:
            self._api.delete_namespaced_lease(
                sharding.member_lease_name(replica), self.settings.namespace,
                body=client.V1DeleteOptions(
                    preconditions=client.V1Preconditions(resource_version=resource_version)))
        except ApiException as err:
            if err.status not in (404, 409):  # gone already, or renewed: alive after all
                raise
            return
        log.info("replica %s stopped renewing its member Lease: forgotten", replica)

    def _release(self, shard: int, lease: client.V1Lease | None = None) -> None:
        """Hand a shard back (only if this replica still holds it)."""
        s = self.settings
        name = sharding.shard_lease_name(shard)
        if lease is None:
            lease = self._api.read_namespaced_lease(name, s.namespace)
        if lease.spec is None or lease.spec.holder_identity != s.identity:
            return
        lease.spec.holder_identity = None
        lease.spec.renew_time = _now()
        self._api.replace_namespaced_lease(name, s.namespace, lease)
