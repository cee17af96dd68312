"""Deterministic names of what the manager creates on the hub and on the spokes."""

from __future__ import annotations

from addon_api.hashing import short_hash
from addon_api.hub import HUB_RESOURCES

MAX_NAME = 253
"""Longest name of a Kubernetes object (RFC 1123 subdomain)."""

KIND_PREFIX: dict[str, str] = {
    str(cls.model_fields["kind"].default): cls.crd.short_names[0] for cls in HUB_RESOURCES
}
"""Prefix of the ManifestWork names of each hub kind: its first short name (CrdInfo); a kind
the API does not serve (a test's example kind) has its name in lower case."""

KIND_IDENTITY = "AgentIdentity"
"""Owner kind label of the per-cluster ReadOnly work that reads the agent identity back."""

IDENTITY_WORK_NAME = "model-serving-agent-identity"
"""Name of the identity ManifestWork in every cluster namespace that needs one."""

KIND_POLICY = "NamespacePolicy"
"""Owner kind label of the per-cluster work that delivers the namespace policy to the agent."""

POLICY_WORK_NAME = "model-serving-namespace-policy"
"""Name of the namespace policy ManifestWork in every cluster namespace that needs one."""

SERVING_PLATFORM_NAME = "model-serving"
"""Name of the cluster-scoped ServingPlatform on every spoke (one per cluster)."""

NAME_HASH = 8
"""Hex digits of the hash that keeps a shortened name unique."""


def bounded(base: str, suffix: str, limit: int = MAX_NAME) -> str:
    """``base-suffix`` cut so the result is at most ``limit`` characters and ends clean."""
    room = limit - len(suffix) - 1
    head = base[:room].rstrip("-.")
    return f"{head}-{suffix}"


def work_name(kind: str, namespace: str, name: str) -> str:
    """Name of the ManifestWork carrying intent ``kind`` ``namespace/name`` to a cluster.

    Unique per (kind, namespace, name): the hash suffix covers all three, so
    ``a-b``/``c`` and ``a``/``b-c`` do not collide; at most 253 characters.
    """
    digest = short_hash(kind, namespace, name, length=NAME_HASH)
    prefix = KIND_PREFIX.get(kind, kind.lower())
    return bounded(f"{prefix}-{namespace}-{name}", digest)


def sealed_name(namespace: str, name: str) -> str:
    """Name of the spoke SealedStorageConnection for hub StorageConnection ``namespace/name``."""
    full = f"{namespace}.{name}"  # a namespace has no dots, so this is unique
    if len(full) <= MAX_NAME:
        return full
    return bounded(full, short_hash(namespace, name, length=NAME_HASH))
