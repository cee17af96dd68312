"""An in-memory hub for the reconciler's unit tests: World and Writer at once."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from addon_api import constants as c
from addon_api import tenancy
from addon_api.common import merge_patch
from addon_manager.engine.policy import Policy
from addon_manager.facts import conflicts
from addon_manager.facts.records import ClusterFact, WorkFact
from addon_manager.facts.revisions import RevisionFact
from addon_manager.facts.revisions import parse as parse_revision
from addon_manager.facts.runtimes import RuntimeFact
from addon_manager.facts.secrets import (
    PENDING,
    READABLE,
    SecretAccess,
    SecretFact,
    forbidden_detail,
    parse_secret,
)
from addon_manager.kinds.registry import parse as parse_work
from addon_manager.shell.apply import Withheld, WriteError

OPEN_POLICY = Policy(namespaces=tenancy.parse("*=*"))
"""Any hub namespace may target any spoke namespace (but the always-denied ones), without
executor identities: what the reconcile tests that are not about the namespace policy use."""


@dataclass
class FakeHub:
    """World and Writer at once: applied works become facts immediately."""

    placements: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    labels: dict[str, dict[str, str]] = field(default_factory=dict)
    works: dict[tuple[str, str], WorkFact] = field(default_factory=dict)
    bodies: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    foreign: set[tuple[str, str]] = field(default_factory=set)
    msv_claims: list[conflicts.Claim] = field(default_factory=list)
    secrets: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    addons: set[str] = field(default_factory=set)
    agent_namespaces: dict[str, str] = field(default_factory=dict)
    """Agent install namespace per cluster, as its ManagedClusterAddOn reports it."""
    writes: list[tuple[str, str]] = field(default_factory=list)
    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    health: dict[str, ClusterFact] = field(default_factory=dict)
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    """Other hub objects the manager applied, by (plural, namespace, name)."""
    served: set[str] = field(default_factory=lambda: {"inferencepoolimports"})
    """Plurals of the other kinds the hub serves (``apply_object`` of another is a 404)."""

    # World
    def placement_exists(self, namespace: str, name: str) -> bool:
        return (namespace, name) in self.placements

    def placement_clusters(self, namespace: str, name: str) -> frozenset[str]:
        return self.placements.get((namespace, name), frozenset())

    groups: dict[tuple[str, str], dict[str, tuple[str, int]]] = field(default_factory=dict)

    def placement_groups(self, namespace: str, name: str) -> dict[str, tuple[str, int]]:
        return self.groups.get((namespace, name), {})

    def cluster_labels(self, cluster: str) -> dict[str, str]:
        return self.labels.get(cluster, {})

    def cluster_health(self, cluster: str) -> ClusterFact | None:
        return self.health.get(cluster)

    def works_of(self, kind: str, namespace: str, name: str) -> dict[str, WorkFact]:
        return {w.cluster: w for w in self.works.values() if w.owner == (kind, namespace, name)}

    def works_on(self, cluster: str, kind: str) -> list[WorkFact]:
        return [w for w in self.works.values() if w.cluster == cluster and w.kind == kind]

    def foreign_work(self, cluster: str, name: str) -> bool:
        return (cluster, name) in self.foreign

    def claims(self) -> list[conflicts.Claim]:
        return self.msv_claims

    runtimes: list[RuntimeFact] = field(default_factory=list)
    """The MultiClusterServingRuntimes of every namespace."""

    def serving_runtimes(self, namespace: str) -> list[RuntimeFact]:
        return [r for r in self.runtimes if r.namespace == namespace]

    storage: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)

    def storage_clusters(self, exclude: tuple[str, str] | None = None) -> frozenset[str]:
        return frozenset(cl for k, v in self.storage.items() if k != exclude for cl in v)

    raw_secrets: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    """Secret data as stored (base64 values); wins over ``secrets`` (text values)."""
    watch_denied: set[str] = field(default_factory=set)
    """Namespaces whose Secrets the manager may not list/watch."""
    get_denied: set[str] = field(default_factory=set)
    """Namespaces where reading a Secret is refused (403)."""
    pending: set[str] = field(default_factory=set)
    """Namespaces whose Secrets are still being listed."""

    def _stored(self, namespace: str, name: str) -> dict[str, str] | None:
        if (namespace, name) in self.raw_secrets:
            return self.raw_secrets[(namespace, name)]
        data = self.secrets.get((namespace, name))
        if data is None:
            return None
        return {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}

    def secret(self, namespace: str, name: str) -> SecretFact | None:
        data = self._stored(namespace, name)
        return None if data is None else parse_secret(data)

    def secret_access(self, namespace: str) -> SecretAccess:
        if namespace in self.pending:
            return PENDING
        if namespace in self.watch_denied:
            return SecretAccess("forbidden", forbidden_detail(namespace, "HTTP 403 Forbidden"))
        return READABLE

    def addon_exists(self, cluster: str) -> bool:
        return cluster in self.addons

    def agent_namespace(self, cluster: str) -> str:
        return self.agent_namespaces.get(cluster, c.AGENT_NAMESPACE)

    revisions: dict[tuple[str, str, str], list[RevisionFact]] = field(default_factory=dict)
    revision_bodies: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def revisions_of(self, kind: str, namespace: str, name: str) -> list[RevisionFact]:
        return list(self.revisions.get((kind, namespace, name), []))

    # Writer
    async def create_revision(self, body: dict[str, Any]) -> None:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        self.writes.append(("revision", "/".join(key)))
        self.revision_bodies[key] = body
        parsed = parse_revision(body)
        assert parsed is not None
        self.revisions.setdefault(parsed[0], []).append(parsed[1])

    async def delete_revision(self, namespace: str, name: str) -> None:
        self.writes.append(("delete-revision", f"{namespace}/{name}"))
        self.revision_bodies.pop((namespace, name), None)
        for facts in self.revisions.values():
            facts[:] = [f for f in facts if f.name != name]

    async def apply_work(self, body: dict[str, Any], *, force: bool,
                         holds: Callable[[], bool] | None = None) -> None:
        if holds is not None and not holds():
            raise Withheld(f"apply {body['metadata']['name']}: not sent")
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        self.writes.append(("apply", "/".join(key)))
        self.bodies[key] = body
        fact = parse_work(body)
        assert fact is not None
        self.works[key] = fact

    async def delete_work(self, namespace: str, name: str, *,
                          holds: Callable[[], bool] | None = None) -> None:
        if holds is not None and not holds():
            raise Withheld(f"delete {name}: not sent")
        self.writes.append(("delete", f"{namespace}/{name}"))
        self.works.pop((namespace, name), None)

    async def patch_status(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str,
        name: str,
        status: dict[str, Any],
    ) -> None:
        self.writes.append(("status", name))
        # A merge patch, as the API server applies it (null removes a field).
        self.statuses[name] = merge_patch(self.statuses.get(name) or {}, status)

    async def apply_object(self, group: str, version: str, plural: str, body: dict[str, Any],
                           *, status: bool = False) -> None:
        meta = body["metadata"]
        key = (plural, meta["namespace"], meta["name"])
        self.writes.append(("apply-status" if status else "apply", "/".join(key)))
        if plural not in self.served:
            raise WriteError(f"apply {plural}: HTTP 404 Not Found", 404)
        if status:
            self.objects.setdefault(key, {})["status"] = body["status"]
        else:
            self.objects[key] = {**self.objects.get(key, {}), **body}

    async def delete_object(self, group: str, version: str, plural: str, namespace: str,
                            name: str) -> None:
        self.writes.append(("delete", f"{plural}/{namespace}/{name}"))
        self.objects.pop((plural, namespace, name), None)

    async def ensure_addon(self, cluster: str) -> None:
        self.writes.append(("addon", cluster))
        self.addons.add(cluster)

    async def read_secret(self, namespace: str, name: str) -> dict[str, str] | None:
        if namespace in self.get_denied or namespace in self.watch_denied:
            raise WriteError("get secrets: HTTP 403 Forbidden", 403)
        return self._stored(namespace, name)
