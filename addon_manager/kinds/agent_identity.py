"""The agent's identity work: one ReadOnly work per cluster that reads the agent's key back.

No hub kind: the manager writes it on every cluster a StorageConnection selects. Its
render, feedback rules, the shape a work must have for its key to be trusted
(:func:`identity_source`), its gate on sealed works (the key published and pinned, see
:mod:`addon_manager.kinds.pinning`) and its spec in the registry.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from addon_api import constants as c
from addon_api.reasons import ClusterReason
from addon_manager.facts import naming
from addon_manager.facts.records import WorkDetails, WorkFact
from addon_manager.facts.sealing import AgentKey
from addon_manager.facts.world import World
from addon_manager.kinds import pinning
from addon_manager.kinds.base import Context, HelperSpec, Wait
from addon_manager.kinds.render import FEEDBACK_SCRAPE, RenderedWork, jsonpaths, manifest_work

KIND = naming.KIND_IDENTITY
"""Owner kind label of the identity works (no hub kind)."""
WORK_NAME = naming.IDENTITY_WORK_NAME
"""Name of the identity work in every cluster namespace that needs one."""


IDENTITY_FEEDBACK = [
    (c.IDENTITY_PUBLIC_KEY, f".data.{c.IDENTITY_PUBLIC_KEY}"),
    (c.IDENTITY_KEY_ID, f".data.{c.IDENTITY_KEY_ID}"),
    (c.IDENTITY_NEXT_PUBLIC_KEY, f".data.{c.IDENTITY_NEXT_PUBLIC_KEY}"),
    (c.IDENTITY_NEXT_KEY_ID, f".data.{c.IDENTITY_NEXT_KEY_ID}"),
]
"""The agent's published keys, read back from its identity ConfigMap."""


def render(cluster: str, namespace: str = c.AGENT_NAMESPACE) -> RenderedWork:
    """The ReadOnly work reading the agent identity ConfigMap of ``cluster`` back.

    ``namespace`` is the agent's install namespace on that cluster; the ConfigMap is there.
    """
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": c.AGENT_IDENTITY_CONFIGMAP, "namespace": namespace},
    }
    config = {
        "resourceIdentifier": {
            "group": "",
            "resource": "configmaps",
            "name": c.AGENT_IDENTITY_CONFIGMAP,
            "namespace": namespace,
        },
        "feedbackRules": jsonpaths(IDENTITY_FEEDBACK),
        "feedbackScrapeType": FEEDBACK_SCRAPE,
        "updateStrategy": {"type": "ReadOnly"},
    }
    return manifest_work(
        naming.KIND_IDENTITY, "", "agent", cluster, [cm], [config],
        work_name=naming.IDENTITY_WORK_NAME,
    )


def identity_source(spec: Mapping[str, Any]) -> str:
    """``namespace/name`` of the ConfigMap an identity work reads; "" unless its shape is ours.

    Ours: exactly one manifest, a v1 ConfigMap, with exactly one manifestConfig naming that
    ConfigMap, update strategy ReadOnly (the work agent writes nothing on the spoke), and the
    identity feedback rules exactly. A work of another shape (an Update or ServerSideApply
    strategy that would write a key into the agent's ConfigMap, a second manifest whose
    feedback would come first) is not trusted for the agent's key.
    """
    manifests = (spec.get("workload") or {}).get("manifests") or []
    configs = spec.get("manifestConfigs") or []
    if len(manifests) != 1 or len(configs) != 1:
        return ""
    manifest, config = manifests[0], configs[0]
    meta = manifest.get("metadata") or {}
    ident = config.get("resourceIdentifier") or {}
    rules = config.get("feedbackRules") or []
    paths = sorted((str(p.get("name")), str(p.get("path")))
                   for r in rules for p in r.get("jsonPaths") or [])
    if (
        (manifest.get("apiVersion"), manifest.get("kind")) != ("v1", "ConfigMap")
        or (config.get("updateStrategy") or {}).get("type") != "ReadOnly"
        or ident.get("group", "") != "" or ident.get("resource") != "configmaps"
        or (ident.get("name"), ident.get("namespace")) != (meta.get("name"), meta.get("namespace"))
        or any(r.get("type") != "JSONPaths" for r in rules)
        or paths != sorted(IDENTITY_FEEDBACK)
    ):
        return ""
    return f"{meta.get('namespace')}/{meta.get('name')}"


def details(work: Mapping[str, Any]) -> WorkDetails:
    """What an identity work's fact keeps: the ConfigMap it reads, when its shape is ours."""
    return WorkDetails(identity_source=identity_source(work.get("spec") or {}))


WAITING_FOR_AGENT_KEY = ClusterReason.WAITING_FOR_AGENT_KEY
"""Wait reason: the cluster's agent has not published its key yet."""


def published_key(identity: WorkFact | None) -> AgentKey | None:
    """The key an identity work reports, or None when the agent has not published one."""
    if identity is None:
        return None
    key, kid = identity.value(c.IDENTITY_PUBLIC_KEY), identity.value(c.IDENTITY_KEY_ID)
    if isinstance(key, str) and isinstance(kid, str) and key and kid:
        return AgentKey(key, kid)
    return None


def key_waits(key: AgentKey | None) -> list[Wait]:
    """The gate of a sealed work on one cluster: the agent's published key."""
    if key is not None:
        return []
    return [Wait(WAITING_FOR_AGENT_KEY, "agent public key published")]


def identity_work(world: World, cluster: str) -> WorkFact | None:
    """The identity work of ``cluster``: the one of its exact name (never another labelled one)."""
    return next((w for w in world.works_on(cluster, naming.KIND_IDENTITY)
                 if w.name == naming.IDENTITY_WORK_NAME), None)


@dataclass(frozen=True)
class KeyDecision:
    """The agent key to seal to on a cluster (None: not yet, see ``waits``, or ``problem``)."""

    key: AgentKey | None = None
    pin: AgentKey | None = None
    """A key to pin first (a new cluster's, or one a hub admin approved)."""
    waits: tuple[Wait, ...] = ()
    problem: tuple[str, str] | None = None


def agent_key(ctx: Context, cluster: str, agent_ns: str) -> KeyDecision:
    """The key to seal to on ``cluster``, after the identity and pin checks.

    The identity work must be the one of its exact name with the shape the manager renders
    (ReadOnly, reading the agent's ConfigMap in ``agent_ns``): any other is not trusted
    (``IdentityWorkInvalid``; the manager writes it again). The published key must be the
    pinned one (see :mod:`addon_manager.kinds.pinning`), else ``AgentKeyChanged``.
    """
    identity = identity_work(ctx.world, cluster)
    expected = render(cluster, agent_ns).render_hash
    if identity is not None and identity.render_hash == expected and identity.identity_source != (
        f"{agent_ns}/{c.AGENT_IDENTITY_CONFIGMAP}"
    ):
        return KeyDecision(problem=(pinning.REASON_IDENTITY_INVALID, (
            f"ManifestWork {cluster}/{naming.IDENTITY_WORK_NAME} was changed: it is not the "
            "ReadOnly work reading the agent's identity ConfigMap; its key is not trusted "
            "and nothing is sealed until the manager has written it again")))
    if identity is not None and identity.render_hash != expected:
        identity = None  # it reads another namespace (the agent moved), or is being rewritten
    published = pinning.published(identity)
    if published is None:
        return KeyDecision(waits=tuple(key_waits(None)))
    sealer = ctx.sealer
    decision = pinning.decide(
        cluster, sealer.pinned(cluster), sealer.approved(cluster), published,
        sealer.approve_hint(cluster, published.current.key_id),
    )
    if decision.key is None:
        return KeyDecision(problem=(decision.reason, decision.message))
    return KeyDecision(decision.key, pin=decision.pin)


def needed_on(world: World, clusters: Collection[str]) -> frozenset[str]:
    """Those of ``clusters`` a StorageConnection selects (their agent's key is needed)."""
    return frozenset(clusters) & world.storage_clusters()


def unused(world: World, exclude: tuple[str, str] | None = None) -> list[WorkFact]:
    """The identity works on clusters no StorageConnection selects (but ``exclude``, going)."""
    keep = world.storage_clusters(exclude)
    return [w for w in world.works_of(KIND, "", "agent").values() if w.cluster not in keep]


SPEC = HelperSpec(KIND, details, read_by=lambda spec: spec.seals, needed_on=needed_on,
                  unused=unused)
"""The registry's entry: what seals reads the identity works."""
