"""Which manager replica writes which intent: shards of intents, spread over live replicas.

With ``--shards S`` the intents are split into ``S`` shards by a hash of their namespace and
name (:func:`shard_of`: the same intent always lands in the same shard, whatever the number
of replicas). Each shard is held by at most one replica at a time through a
coordination.k8s.io Lease of its own; only the holder plans and writes the shard's intents.

Which live replica should hold a shard is decided by rendezvous hashing
(:func:`preferred`): every replica computes the same answer from the same list of live
replicas, a replica that joins takes about ``1/N`` of the shards from the others and one that
dies gives its shards to the survivors, each to one of them, without moving any other shard.
:func:`decide` turns what the Leases say into what this replica does next (acquire, renew,
release), never acquiring a shard another live replica still holds: a handover is a release
by the old holder followed by an acquisition by the new one, or the old holder's Lease
expiring.

Every acquisition increments the shard Lease's ``leaseTransitions``: that number is the
shard's epoch, carried by every write of its intents' works (:data:`FENCE_ANNOTATION`) so
that a write by a replica that lost the shard can be told from one by its holder.

Pure: the Leases as observed and the monotonic clock go in, decisions come out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from addon_api import constants as c

FENCE_ANNOTATION = f"{c.GROUP}/shard-epoch"
"""Annotation on every ManifestWork a sharded manager writes: ``<shard>/<epoch>``."""
LEASE_PREFIX = "model-serving-addon-manager"
"""Prefix of the Lease names: ``<prefix>-shard-<k>`` and ``<prefix>-member-<replica>``."""
LEASE_ROLE_LABEL = f"{c.GROUP}/manager-lease"
"""Label of every sharding Lease: ``shard`` or ``member`` (one list reads them all)."""
SHARD_LABEL = f"{c.GROUP}/shard"
"""Label of a shard Lease: its shard number."""


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def shard_of(namespace: str, name: str, shards: int) -> int:
    """The shard of the intent ``namespace/name`` among ``shards`` (0 when not sharded)."""
    if shards <= 1:
        return 0
    return _digest(f"{namespace}/{name}") % shards


def preferred(shard: int, replicas: Iterable[str]) -> str:
    """The replica that should hold ``shard`` among ``replicas`` (rendezvous hashing).

    The replica with the highest hash of (shard, replica); "" when there is none. Ties (never
    seen with 64-bit hashes) go to the smaller name, so every replica agrees.
    """
    best, score = "", -1
    for replica in sorted(replicas):
        value = _digest(f"{shard}/{replica}")
        if value > score:
            best, score = replica, value
    return best


def fence(shard: int, epoch: int) -> str:
    """The value of :data:`FENCE_ANNOTATION` for a write at ``epoch`` of ``shard``."""
    return f"{shard}/{epoch}"


def shard_lease_name(shard: int) -> str:
    """The Lease that holds ``shard``."""
    return f"{LEASE_PREFIX}-shard-{shard}"


def member_lease_name(replica: str) -> str:
    """The Lease a replica renews to say it is alive."""
    return f"{LEASE_PREFIX}-member-{replica}"


@dataclass(frozen=True)
class Observed:
    """A Lease as this replica saw it: who holds it, and whether it is still renewed."""

    holder: str
    """``spec.holderIdentity`` ("" when released)."""
    transitions: int
    """``spec.leaseTransitions``: the shard's epoch."""
    resource_version: str
    changed_at: float
    """When (this replica's monotonic clock) its resourceVersion was last seen to change:
    clocks of other replicas are never compared with ours."""
    duration: float
    """``spec.leaseDurationSeconds``."""

    def expired(self, now: float) -> bool:
        """Whether its holder stopped renewing it (or released it)."""
        return not self.holder or now - self.changed_at > self.duration


@dataclass(frozen=True)
class Decision:
    """What this replica does with the shard Leases now."""

    acquire: tuple[int, ...] = ()
    """Free shards it should hold (released, expired, or never held)."""
    renew: tuple[int, ...] = ()
    """Shards it holds and keeps."""
    release: tuple[int, ...] = ()
    """Shards it holds that another live replica should hold: stop writing, then release."""
    waiting: Mapping[int, str] = field(default_factory=dict)
    """Shards it should hold that another live replica still holds, by holder."""
    forget: tuple[str, ...] = ()
    """Replicas whose member Lease this replica saw unrenewed for its whole duration: dead,
    or cut off long enough to have stopped writing. Their Leases are deleted, so that
    replicas which die (pods have new names each time) leave nothing behind and a replica
    that starts later does not wait a Lease's duration for them."""


def live_replicas(me: str, members: Mapping[str, Observed], now: float) -> frozenset[str]:
    """The replicas whose member Lease is renewed, with this one."""
    return frozenset({me, *(name for name, lease in members.items() if not lease.expired(now))})


def decide(me: str, count: int, members: Mapping[str, Observed],
           shards: Mapping[int, Observed], held: Iterable[int], now: float) -> Decision:
    """What replica ``me`` does with the ``count`` shard Leases, as observed at ``now``.

    ``members`` are the member Leases by replica, ``shards`` the shard Leases that exist and
    ``held`` the shards this replica holds. A held shard is released only to a live replica
    that should hold it; a shard is acquired only when nobody live holds it.
    """
    live = live_replicas(me, members, now)
    mine = set(held)
    acquire: list[int] = []
    renew: list[int] = []
    release: list[int] = []
    waiting: dict[int, str] = {}
    for shard in range(count):
        want = preferred(shard, live)
        lease = shards.get(shard)
        if shard in mine:
            (renew if want == me else release).append(shard)
        elif want == me:
            if lease is None or lease.expired(now) or lease.holder == me:
                acquire.append(shard)
            else:
                waiting[shard] = lease.holder
    forget = tuple(sorted(name for name in members if name != me and name not in live))
    return Decision(tuple(acquire), tuple(renew), tuple(release), waiting, forget)
