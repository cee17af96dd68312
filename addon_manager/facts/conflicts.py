"""Conflicts between ModelServings: one serving platform per cluster, the oldest claim wins."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    """A ModelServing and the clusters its Placement selects."""

    namespace: str
    name: str
    created: str
    """creationTimestamp (RFC 3339, so it sorts as text)."""
    clusters: frozenset[str]

    @property
    def key(self) -> tuple[str, str]:
        """(namespace, name)."""
        return self.namespace, self.name


def winners(claims: Iterable[Claim]) -> dict[str, tuple[str, str]]:
    """For each claimed cluster, the (namespace, name) of the ModelServing that owns it.

    The oldest claim wins; ties break on namespace then name, so every manager replica
    and every restart decides the same way.
    """
    out: dict[str, tuple[str, str]] = {}
    for claim in sorted(claims, key=lambda c: (c.created, c.namespace, c.name)):
        for cluster in claim.clusters:
            out.setdefault(cluster, claim.key)
    return out


def lost_clusters(
    me: tuple[str, str], clusters: Iterable[str], owners: dict[str, tuple[str, str]]
) -> dict[str, tuple[str, str]]:
    """The clusters of ``me`` owned by another ModelServing, with that owner."""
    return {
        cl: owners[cl] for cl in clusters if cl in owners and owners[cl] != me
    }
