"""ModelServing: the serving stack on a cluster (a ServingPlatform work).

Its render, feedback rules and report; no gate of its own, but the stack's state is
every other kind's gate (:func:`platform_waits`) and its removal waits for what holds the
stack on the cluster (:func:`removal_blockers`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from pydantic import ValidationError

from addon_api import constants as c
from addon_api.common import ClusterStatus, Resource
from addon_api.hub import ModelServing
from addon_api.platform import MODELMESH_DEPRECATED
from addon_api.reasons import ClusterPhase, ClusterReason, ServingPlatformPhase
from addon_api.spoke import ServingPlatformSpec
from addon_manager.facts import naming
from addon_manager.facts.records import WorkFact
from addon_manager.kinds.base import (
    Category,
    Context,
    Dependency,
    KindSpec,
    Prepared,
    Wait,
    spoke_phase,
    text,
)
from addon_manager.kinds.render import (
    RenderedWork,
    SpecMemo,
    cluster_spec,
    from_template,
    invalid_after_overrides,
    manifest_work,
    memoized,
    owner_labels,
    shared_by,
    ssa_config,
)

SERVING_PLATFORM_FEEDBACK = [
    ("phase", ".status.phase"),
    ("message", ".status.message"),
    ("observedGeneration", ".status.observedGeneration"),
    ("readyComponents", ".status.readyComponents"),
    ("totalComponents", ".status.totalComponents"),
    ("stackVersion", ".status.stackVersion"),
    ("targetVersion", ".status.targetVersion"),
    ("generation", ".metadata.generation"),
    # namespaces dropped from servingNamespaces the agent kept (they hold data): one line
    ("leftovers", ".status.leftovers"),
]
"""What the agent reports of the stack (the ServingPlatform's status), fed back."""


def render(
    intent: ModelServing, cluster: str, labels: dict[str, str], memo: SpecMemo | None = None,
) -> RenderedWork:
    """The ServingPlatform work of a ModelServing for one cluster."""
    ns, name = str(intent.metadata.namespace), str(intent.metadata.name)

    def platform_spec() -> dict[str, Any]:
        spec = cluster_spec(intent.spec.to_dict(), intent.spec.overrides, cluster, labels)
        spec["source"] = {"namespace": ns, "name": name}
        try:
            return without_empty_maps(ServingPlatformSpec.from_wire(spec).to_dict())
        except ValidationError as err:
            raise invalid_after_overrides(cluster, err) from err

    key, spec = memoized(memo, intent.spec.overrides, cluster, labels, platform_spec)
    templated = from_template(shared_by(memo, key), cluster)
    if templated is not None:
        return templated
    platform = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_SERVING_PLATFORM,
        "metadata": {
            "name": naming.SERVING_PLATFORM_NAME,
            "labels": owner_labels(c.KIND_MODEL_SERVING, ns, name),
        },
        "spec": spec,
    }
    config = ssa_config(
        c.GROUP, "servingplatforms", naming.SERVING_PLATFORM_NAME, "", SERVING_PLATFORM_FEEDBACK
    )
    return manifest_work(c.KIND_MODEL_SERVING, ns, name, cluster, [platform], [config],
                 shared=shared_by(memo, key))


def without_empty_maps(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` without the keys whose value is an empty map (at any depth).

    An empty map and no map mean the same to the agent, but not to server-side apply: when
    a work that carried ``components: {a: ...}`` carries ``components: {}``, the spoke's API
    server ends up with ``components: null``, which the CRD's schema refuses (the work never
    applies again). Leaving the key out removes the field instead.
    """
    out: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, dict):
            item = without_empty_maps(item)
            if not item:
                continue
        out[key] = item
    return out


def prepare(ctx: Context, intent: Resource, cluster: str) -> Prepared:
    """A ModelServing's ServingPlatform work: no gate."""
    return Prepared(render(
        cast(ModelServing, intent), cluster, ctx.world.cluster_labels(cluster), ctx.specs))


def report(work: WorkFact, removed: bool) -> tuple[ClusterStatus, Category]:
    """A ServingPlatform's phase: Available is done (Removed when the stack is to be removed).

    What the agent left for an admin to clean up (namespaces it kept) is carried in the
    entry's ``leftovers`` whatever the phase: it never makes the cluster not ready.
    """
    reported = spoke_phase(ServingPlatformPhase, work.value("phase"))
    phase = reported or text(work.value("phase")) or ClusterPhase.APPLIED
    msg = text(work.value("message"))
    left = text(work.value("leftovers"))
    if reported in (ServingPlatformPhase.DEGRADED, ServingPlatformPhase.REMOVAL_BLOCKED):
        return ClusterStatus(cluster=work.cluster, phase=phase, reason=phase, message=msg,
                             leftovers=left), "failed"
    ok = reported is (ServingPlatformPhase.REMOVED if removed else ServingPlatformPhase.AVAILABLE)
    seen, wanted = work.value("observedGeneration"), work.value("generation")
    if ok and isinstance(seen, int) and isinstance(wanted, int) and seen < wanted:
        # The work agent applied a newer spec than the one the agent's status describes (a
        # version change, say): what it reports is about the spec before.
        return ClusterStatus(
            cluster=work.cluster, phase=ClusterPhase.APPLIED, reason=ClusterReason.APPLIED,
            message=f"the agent has not reported on generation {wanted} yet (its status is of "
                    f"generation {seen}: {phase})",
            version=text(work.value("stackVersion")), leftovers=left,
        ), "progressing"
    return ClusterStatus(
        cluster=work.cluster, phase=phase, ready=ok, reason=phase, message=msg,
        version=text(work.value("stackVersion")), target_version=text(work.value("targetVersion")),
        leftovers=left,
    ), ("ready" if ok else "progressing")


WAITING_FOR_PLATFORM = ClusterReason.WAITING_FOR_PLATFORM
"""Wait reason: the cluster's ServingPlatform is not Available yet."""


def platform_available(platform_works: list[WorkFact]) -> bool:
    """Whether one of the cluster's ServingPlatform works reports phase Available."""
    return any(w.value("phase") == ServingPlatformPhase.AVAILABLE and not w.deleting
               for w in platform_works)


def platform_waits(platform_works: list[WorkFact]) -> list[Wait]:
    """The gate of what runs on the stack: the cluster's ServingPlatform is Available."""
    if platform_available(platform_works):
        return []
    return [Wait(WAITING_FOR_PLATFORM, "ServingPlatform Available")]


REASON_INTENTS_ON_CLUSTER = ClusterReason.INTENTS_ON_CLUSTER
"""Why a stack stays: add-on intents still have works on the cluster."""
REASON_PLATFORM_REMOVING = ClusterReason.PLATFORM_REMOVING
"""Why an entry on a cluster whose stack is going is not Ready."""
REMOVAL_PHASES = (ServingPlatformPhase.REMOVING, ServingPlatformPhase.REMOVED,
                  ServingPlatformPhase.REMOVAL_BLOCKED)
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


SPEC = KindSpec(
    ModelServing, prepare, report,
    depends_on=(Dependency(c.KIND_SERVING_RUNTIME, gone_only=True),
                Dependency(c.KIND_INFERENCE_SERVICE, gone_only=True)),
    owns_stack=True,
    # spec.monitoring.prometheusServiceAccount.namespace names a namespace too, but only as
    # the subject of a read-only RoleBinding in the serving namespaces: nothing is written there.
    spoke_namespaces=("servingNamespaces", True),
    removed_state=lambda spec: spec.management_state == "Removed",
    deprecation=lambda spec: MODELMESH_DEPRECATED if spec.platform == "ModelMesh" else "",
)
"""The registry's entry (:mod:`addon_manager.kinds.registry`)."""
