"""Ordering across ManifestWorks: what must be true on a cluster before an intent goes there.

OCM orders manifests only inside one work, so the manager holds a work back until the
works it depends on report success through their feedback. A gate only holds back a work
that was never sent: once a work exists it is kept up to date, whatever happens later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from addon_api import constants as c
from addon_api.reasons import ClusterReason, SealedPhase
from addon_api.reasons import ServingPlatformPhase as PlatformPhase
from addon_manager.facts.records import WorkFact
from addon_manager.facts.sealing import AgentKey

WAITING_FOR_PLATFORM = ClusterReason.WAITING_FOR_PLATFORM
WAITING_FOR_STORAGE = ClusterReason.WAITING_FOR_STORAGE
WAITING_FOR_AGENT_KEY = ClusterReason.WAITING_FOR_AGENT_KEY


@dataclass(frozen=True)
class Wait:
    """One thing an intent waits for on one cluster."""

    reason: ClusterReason
    what: str
    """Human-readable: e.g. ``ServingPlatform Available``."""


def platform_available(platform_works: list[WorkFact]) -> bool:
    """Whether one of the cluster's ServingPlatform works reports phase Available."""
    return any(w.value("phase") == PlatformPhase.AVAILABLE and not w.deleting
               for w in platform_works)


def agent_key(identity: WorkFact | None) -> AgentKey | None:
    """The key an identity work reports, or None when the agent has not published one."""
    if identity is None:
        return None
    key, kid = identity.value(c.IDENTITY_PUBLIC_KEY), identity.value(c.IDENTITY_KEY_ID)
    if isinstance(key, str) and isinstance(kid, str) and key and kid:
        return AgentKey(key, kid)
    return None


def storage_delivered(work: WorkFact | None) -> bool:
    """Whether a StorageConnection work reports its entry Delivered on the cluster."""
    return work is not None and not work.deleting and work.value("phase") == SealedPhase.DELIVERED


def waits_for_runtime(platform_works: list[WorkFact]) -> list[Wait]:
    """Gates of a ServingRuntime on one cluster."""
    if platform_available(platform_works):
        return []
    return [Wait(WAITING_FOR_PLATFORM, "ServingPlatform Available")]


def waits_for_inference_service(
    platform_works: list[WorkFact],
    storage: list[str],
    storage_works: Mapping[str, WorkFact | None],
) -> list[Wait]:
    """Gates of an InferenceService on one cluster.

    ``storage`` lists the StorageConnections it reads through; ``storage_works`` maps each
    to its work on this cluster (None when it has none).
    """
    out = waits_for_runtime(platform_works)
    for name in storage:
        if not storage_delivered(storage_works.get(name)):
            out.append(Wait(WAITING_FOR_STORAGE, f"StorageConnection {name} delivered"))
    return out


def waits_for_storage(key: AgentKey | None) -> list[Wait]:
    """Gates of a StorageConnection on one cluster: the agent's published key."""
    if key is not None:
        return []
    return [Wait(WAITING_FOR_AGENT_KEY, "agent public key published")]


REASON_INTENTS_ON_CLUSTER = ClusterReason.INTENTS_ON_CLUSTER
REASON_PLATFORM_REMOVING = ClusterReason.PLATFORM_REMOVING
REMOVAL_PHASES = (PlatformPhase.REMOVING, PlatformPhase.REMOVED, PlatformPhase.REMOVAL_BLOCKED)
"""ServingPlatform phases saying the stack is going (or gone) on the cluster."""


def removal_blockers(intent_works: Iterable[WorkFact]) -> list[str]:
    """``Kind ns/name`` of the add-on intents whose works on a cluster hold its stack there.

    The manager never removes a stack (``managementState: Removed``, ModelServing deleted,
    cluster left the Placement) while MultiClusterInferenceServices or
    MultiClusterServingRuntimes still have works on that cluster, whether or not those works
    are being deleted: their InferenceServices carry the stack controller's finalizers,
    which only the running controller processes.
    """
    return sorted({f"{w.kind} {w.intent_namespace}/{w.intent_name}" for w in intent_works})


def removal_ordered(work: WorkFact) -> bool:
    """Whether the spoke already acts on a removal of this ServingPlatform work."""
    return work.deleting or work.value("phase") in REMOVAL_PHASES


def platform_going(platform_works: list[WorkFact]) -> str:
    """Why the stack on a cluster is going away (empty when it is not).

    An intent's entry on such a cluster is not Ready, whatever its object says.
    """
    for work in platform_works:
        if work.deleting:
            return f"the ModelServing {work.intent_namespace}/{work.intent_name} no longer " \
                "serves this cluster: its ServingPlatform is being removed"
        phase = work.value("phase")
        if phase in REMOVAL_PHASES:
            message = work.value("message")
            return f"the ServingPlatform of this cluster reports {phase}" + (
                f": {message}" if message else ""
            )
    return ""
