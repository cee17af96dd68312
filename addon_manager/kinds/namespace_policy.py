"""The namespace policy work: the admin's policy, delivered to each agent as a ConfigMap.

No hub kind. The agent checks again, before it acts, what the hub sent against the namespace
policy (a ServingPlatform's ``servingNamespaces`` for its ModelServing's hub namespace, a
SealedStorageConnection's targets for its tenant: :mod:`addon_agent.pure.tenancy`). It used to
get the policy as a flag from an AddOnDeploymentConfig variable, which capped it at 1,024
characters and which a cluster with an AddOnDeploymentConfig of its own did not have. Now the
manager writes ConfigMap ``model-serving-namespace-policy`` into the agent's namespace of every
cluster a ModelServing or a StorageConnection selects, one work per cluster, beside the
intents' own works; an agent that has a ServingPlatform or a sealed connection and no policy
yet waits for it (and judges again when it arrives) instead of refusing by a default.

Pure, like every kind module: its render, where it is needed and its spec in the registry.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from addon_api import constants as c
from addon_api import tenancy
from addon_manager.facts import naming
from addon_manager.facts.records import WorkDetails, WorkFact
from addon_manager.facts.world import World
from addon_manager.kinds.base import HelperSpec, KindSpec
from addon_manager.kinds.render import RenderedWork, manifest_work

KIND = naming.KIND_POLICY
"""Owner kind label of the namespace policy works (no hub kind)."""
OWNER_NAME = "policy"
"""Owner name label of those works (their owner namespace label is empty)."""
WORK_NAME = naming.POLICY_WORK_NAME
"""Name of the policy work in every cluster namespace that needs one."""


def policy_data(policy: tenancy.NamespacePolicy) -> dict[str, str]:
    """The ConfigMap's data: the targets in the flag's form and the admin's denied namespaces.

    The agent reads them with :func:`addon_api.tenancy.from_configmap`.
    """
    return {c.POLICY_KEY_TARGETS: policy.render(),
            c.POLICY_KEY_DENIED: ",".join(sorted(policy.denied))}


def render(cluster: str, agent_namespace: str, policy: tenancy.NamespacePolicy) -> RenderedWork:
    """The work writing the policy ConfigMap into ``agent_namespace`` on ``cluster``.

    Applied with the work agent's own identity (no executor); the ConfigMap carries the add-on's
    owner labels, so the agent can tell it from one someone else wrote.
    """
    cm: dict[str, Any] = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": c.NAMESPACE_POLICY_CONFIGMAP, "namespace": agent_namespace},
        "data": policy_data(policy),
    }
    return manifest_work(KIND, "", OWNER_NAME, cluster, [cm], [], work_name=WORK_NAME)


def policy_work(world: World, cluster: str) -> WorkFact | None:
    """The policy work of ``cluster``: the one of its exact name."""
    return next((w for w in world.works_on(cluster, KIND) if w.name == WORK_NAME), None)


READERS = (c.KIND_MODEL_SERVING, c.KIND_STORAGE_CONNECTION)
"""The hub kinds whose works the agent judges by the policy (see :func:`reads_policy`)."""


def reads_policy(spec: KindSpec) -> bool:
    """Whether the agent judges the works of a hub kind by the policy (stack and sealed)."""
    return spec.kind in READERS


def _selected(world: World, exclude: tuple[str, str] | None = None) -> frozenset[str]:
    """Clusters a ModelServing or a StorageConnection selects (but ``exclude``, going)."""
    stack = {cl for claim in world.claims() if claim.key != exclude for cl in claim.clusters}
    return frozenset(stack | world.storage_clusters(exclude))


def _has_works(world: World, cluster: str) -> bool:
    """Whether a ModelServing's or a StorageConnection's work on ``cluster`` is not going.

    The stack's work of a ModelServing being deleted stays where add-on intents still use the
    stack, and its agent keeps judging that ServingPlatform: its policy stays with it.
    """
    return any(not w.deleting for kind in READERS for w in world.works_on(cluster, kind))


def needed_on(world: World, clusters: Collection[str]) -> frozenset[str]:
    """Those of ``clusters`` where the policy work is needed."""
    selected = _selected(world)
    return frozenset(cl for cl in clusters if cl in selected or _has_works(world, cl))


def unused(world: World, exclude: tuple[str, str] | None = None) -> list[WorkFact]:
    """The policy works on clusters no ModelServing or StorageConnection needs any more.

    ``exclude`` is the (namespace, name) of an intent being deleted: its selection no longer
    counts, its works that are still there (not going) do.
    """
    keep = _selected(world, exclude)
    return [w for w in world.works_of(KIND, "", OWNER_NAME).values()
            if w.cluster not in keep and not w.deleting and not _has_works(world, w.cluster)]


def details(work: Any) -> WorkDetails:
    """What a policy work's fact keeps beyond the common facts: nothing."""
    return WorkDetails()


SPEC = HelperSpec(KIND, details, read_by=reads_policy, needed_on=needed_on, unused=unused)
"""The registry's entry: ModelServings and StorageConnections read the policy works."""
