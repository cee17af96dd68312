"""Placement resolution: PlacementDecision objects to the set of clusters of a Placement."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

PLACEMENT_LABEL = "cluster.open-cluster-management.io/placement"
"""Label on every PlacementDecision naming the Placement it belongs to."""
GROUP_NAME_LABEL = "cluster.open-cluster-management.io/decision-group-name"
GROUP_INDEX_LABEL = "cluster.open-cluster-management.io/decision-group-index"
"""Labels of a PlacementDecision: the decision group (``spec.decisionStrategy.groups``) its
clusters belong to."""


def decision_key(decision: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, placement name) of a PlacementDecision, or None when it is unlabelled."""
    meta = decision.get("metadata") or {}
    placement = (meta.get("labels") or {}).get(PLACEMENT_LABEL)
    if not placement:
        return None
    return str(meta.get("namespace", "")), str(placement)


def decided_clusters(decision: Mapping[str, Any]) -> tuple[str, ...]:
    """Cluster names listed by one PlacementDecision, sorted."""
    items = (decision.get("status") or {}).get("decisions") or []
    return tuple(sorted({str(d["clusterName"]) for d in items if d.get("clusterName")}))


def decision_group(decision: Mapping[str, Any]) -> tuple[str, int]:
    """(name, index) of the decision group of one PlacementDecision ("", 0 when unlabelled)."""
    labels = (decision.get("metadata") or {}).get("labels") or {}
    index = str(labels.get(GROUP_INDEX_LABEL, "0"))
    return str(labels.get(GROUP_NAME_LABEL, "")), int(index) if index.isdigit() else 0


def clusters_of(decisions: Iterable[Iterable[str]]) -> frozenset[str]:
    """Union of the clusters of every decision object of one Placement."""
    out: set[str] = set()
    for names in decisions:
        out.update(names)
    return frozenset(out)
