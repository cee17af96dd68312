"""What the manager knows about the hub: read-only facts, kept current by watches.

Production reads them from watch caches (:class:`addon_manager.shell.handlers.IndexWorld`); unit
tests from a plain object (``testbed/support/fake_hub.py``). Nothing here lists objects: every
lookup is a cache read.
"""

from __future__ import annotations

from typing import Protocol

from addon_manager.facts import conflicts
from addon_manager.facts.records import ClusterFact, WorkFact
from addon_manager.facts.revisions import RevisionFact
from addon_manager.facts.runtimes import RuntimeFact
from addon_manager.facts.secrets import SecretAccess, SecretFact


class World(Protocol):
    """Read-only facts about the hub, kept current by watches."""

    def placement_exists(self, namespace: str, name: str) -> bool:
        """Whether the Placement exists."""

    def placement_clusters(self, namespace: str, name: str) -> frozenset[str]:
        """Clusters the Placement's decisions select."""

    def placement_groups(self, namespace: str, name: str) -> dict[str, tuple[str, int]]:
        """The decision group (name, index) of every cluster of the Placement."""

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
        """Whether the manager may read the Secrets of a namespace (see facts.secrets)."""

    def addon_exists(self, cluster: str) -> bool:
        """Whether the ManagedClusterAddOn model-serving exists in the cluster namespace."""

    def revisions_of(self, kind: str, namespace: str, name: str) -> list[RevisionFact]:
        """The revisions kept for an intent (ControllerRevisions the manager wrote)."""

    def agent_namespace(self, cluster: str) -> str:
        """The agent's install namespace on a cluster (from its ManagedClusterAddOn)."""

    def serving_runtimes(self, namespace: str) -> list[RuntimeFact]:
        """The MultiClusterServingRuntimes of a hub namespace."""
