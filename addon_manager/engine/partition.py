"""Partition safety: a cluster that leaves a Placement while unreachable keeps its works.

OCM taints a ManagedCluster whose Available condition is False or Unknown
(``cluster.open-cluster-management.io/unavailable`` / ``unreachable``, effect NoSelect); a
Placement that does not tolerate the taint drops the cluster from its decisions. Deleting
the cluster's ManifestWorks then would uninstall every model there the moment the cluster
comes back. Instead the works are kept for a grace period counted from when the cluster
stopped being Available, and removed once the grace has passed or once the cluster is
Available again and its Placement still does not select it.

Pure: the cluster's availability and the clock go in, a :class:`Hold` (or None) comes out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from addon_manager.facts.records import ClusterFact

UNAVAILABLE_GRACE = 86400.0
"""Default seconds the works of a cluster that left its Placement while not Available are
kept (from the moment it stopped being Available): a day covers a maintenance window or a
network outage over a weekend night, and stays short enough that a cluster that is really
gone is cleaned up without an admin."""
RETURN_SETTLE = 60.0
"""Seconds after a cluster is Available again during which its works are still kept although
no Placement decision selects it: OCM's placement controller re-selects a returning cluster
within seconds, and a reconcile that runs between the two must not remove what is about to
be selected again."""


@dataclass(frozen=True)
class Hold:
    """Why the works of a cluster that left the Placement are kept, and until when."""

    until: datetime
    """When they are removed if nothing changes (look again then)."""
    unavailable: bool
    """True while the ManagedCluster is not Available (the entry is stale: ClusterUnavailable);
    False while it settles after coming back."""
    message: str


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def hold(
    health: ClusterFact | None, now: datetime, grace: float, settle: float = RETURN_SETTLE
) -> Hold | None:
    """Whether the works of a cluster that is no longer selected are kept for now.

    ``health`` is the ManagedCluster as the hub sees it. Not Available (False or Unknown):
    kept until ``grace`` seconds after the condition last changed (its lastTransitionTime;
    without one, counted from ``now``, i.e. kept). Available again for less than ``settle``
    seconds: kept until then. Otherwise (or ``grace <= 0``, which turns this off, or the
    ManagedCluster unknown or without an Available condition): None, the works go now.
    """
    if grace <= 0 or health is None:
        return None
    since = health.since or now
    if health.available in ("False", "Unknown"):
        until = since + timedelta(seconds=grace)
        if now >= until:
            return None
        return Hold(
            until, True,
            f"it left the Placement while not Available: its ManifestWorks are kept until "
            f"{_iso(until)} (--unavailable-grace={grace:g}s after {_iso(since)}), or removed "
            "once it is Available again and still not selected",
        )
    if health.available == "True" and health.since is not None:
        until = since + timedelta(seconds=settle)
        if now >= until:
            return None
        return Hold(
            until, False,
            f"it is Available again since {_iso(since)} and not selected: its ManifestWorks "
            f"are removed at {_iso(until)} unless the Placement selects it again",
        )
    return None
