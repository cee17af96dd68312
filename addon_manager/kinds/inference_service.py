"""MultiClusterInferenceService: a KServe InferenceService (and its Route) on each cluster.

Its render, feedback rules, gates (the stack Available, its StorageConnections delivered,
the fleet's ServingRuntimes it would run on Available) and report, judged by the agent's
data-plane verdict first, then by KServe's status.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from addon_api import constants as c
from addon_api.base import sanitized
from addon_api.common import ClusterStatus, Resource
from addon_api.hub import FleetEndpoint, MultiClusterInferenceService
from addon_api.reasons import ClusterPhase, ClusterReason
from addon_manager.facts.canonical import canonical_hash
from addon_manager.facts.records import WorkFact
from addon_manager.facts.runtimes import RuntimeFact
from addon_manager.kinds import storage_connection
from addon_manager.kinds.base import Category, Context, Dependency, KindSpec, Prepared, Wait, text
from addon_manager.kinds.model_serving import platform_waits
from addon_manager.kinds.render import (
    RenderedWork,
    SpecMemo,
    condition_path,
    from_template,
    manifest_work,
    owner_labels,
    shared_by,
    ssa_config,
    validated_cluster_spec,
)
from addon_manager.kinds.tenant_access import ACCESS_KIND

INFERENCE_SERVICE_FEEDBACK = [
    ("ready", condition_path("Ready", "status")),
    ("readyReason", condition_path("Ready", "reason")),
    ("readyMessage", condition_path("Ready", "message")),
    ("predictorReady", condition_path("PredictorReady", "status")),
    ("url", ".status.url"),
    ("addressUrl", ".status.address.url"),
    ("transitionStatus", ".status.modelStatus.transitionStatus"),
    ("activeModelState", ".status.modelStatus.states.activeModelState"),
    ("targetModelState", ".status.modelStatus.states.targetModelState"),
    ("failureReason", ".status.modelStatus.lastFailureInfo.reason"),
    ("failureMessage", ".status.modelStatus.lastFailureInfo.message"),
]


INFERENCE_SERVICE_FEEDBACK += [
    ("generation", ".metadata.generation"),
    ("deploymentMode", ".metadata.annotations." + c.DEPLOYMENT_MODE_ANNOTATION.replace(".", "\\.")),
    ("dataplane", ".metadata.annotations." + c.ANNOTATION_DATAPLANE.replace(".", "\\.")),
]
"""What KServe says of the model, and the agent's data-plane verdict (an annotation it writes
on the InferenceService, see :mod:`addon_agent.pure.dataplane`)."""


ROUTE_FEEDBACK = [
    ("routeHost", ".status.ingress[0].host"),
    ("routeAdmitted", '.status.ingress[0].conditions[?(@.type=="Admitted")].status'),
    ("routeTermination", ".spec.tls.termination"),
]
"""What the router reports about a model's Route (RouteHost is where callers reach it)."""


SERVICE_EXPORT_FEEDBACK = [
    ("exportValid", condition_path("Valid", "status")),
    ("exportReady", condition_path("Ready", "status")),
    ("exportConflict", condition_path("Conflict", "status")),
]
"""What the Multi-Cluster Services controller says of a model's ServiceExport."""


def render(
    intent: MultiClusterInferenceService, cluster: str, labels: dict[str, str],
    memo: SpecMemo | None = None, *, export: bool = False,
) -> RenderedWork:
    """The KServe InferenceService work of a MultiClusterInferenceService for one cluster.

    ``export``: the cluster takes the model's fleet-endpoint traffic and the intent asks for
    spec.endpoint.serviceExport, so the work carries the predictor Service's ServiceExport
    too (such a work is rendered on its own, not from the clusters' shared template).
    """
    ns, name = str(intent.metadata.namespace), str(intent.metadata.name)
    key, spec = validated_cluster_spec(intent, cluster, labels, memo)
    shared = None if export else shared_by(memo, key)
    templated = from_template(shared, cluster, "spec.template")
    if templated is not None:
        return templated
    target = str(spec["targetNamespace"])
    mode = str(spec["deploymentMode"])
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {
            "name": name,
            "namespace": target,
            "labels": owner_labels(c.KIND_INFERENCE_SERVICE, ns, name),
            "annotations": {c.DEPLOYMENT_MODE_ANNOTATION: mode,
                            c.ANNOTATION_SPEC_HASH: canonical_hash(spec["template"])[:16]},
        },
        "spec": spec["template"],
    }
    config = ssa_config(
        "serving.kserve.io", "inferenceservices", name, target, INFERENCE_SERVICE_FEEDBACK,
        force=False,
    )
    manifests, configs = [isvc], [config]
    exposure = spec.get("exposure")
    if exposure is not None and exposure.get("type", "Route") == "Route":
        manifests.append(route_for(name, target, owner_labels(c.KIND_INFERENCE_SERVICE, ns, name),
                                   exposure))
        configs.append(ssa_config("route.openshift.io", "routes", name, target, ROUTE_FEEDBACK,
                                   force=False))
    if export:
        manifests.append(service_export(name, target, owner_labels(
            c.KIND_INFERENCE_SERVICE, ns, name)))
        configs.append(ssa_config(MCS_GROUP, "serviceexports", f"{name}-predictor", target,
                                  SERVICE_EXPORT_FEEDBACK, force=False))
    return manifest_work(
        c.KIND_INFERENCE_SERVICE, ns, name, cluster, manifests, configs, field="spec.template",
        shared=shared,
    )


MCS_GROUP = "multicluster.x-k8s.io"
"""The Kubernetes Multi-Cluster Services API group (KEP-1645)."""


def service_export(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """The MCS ServiceExport of an InferenceService's predictor Service.

    KServe's Standard mode names that Service NAME-predictor; an MCS implementation
    (Submariner's Lighthouse, Cilium ClusterMesh) imports it into every cluster of the
    ClusterSet as ``NAME-predictor.NAMESPACE.svc.clusterset.local``.
    """
    return {"apiVersion": f"{MCS_GROUP}/v1alpha1", "kind": "ServiceExport",
            "metadata": {"name": f"{name}-predictor", "namespace": namespace, "labels": labels}}


def route_for(name: str, namespace: str, labels: dict[str, str],
              exposure: dict[str, Any]) -> dict[str, Any]:
    """The OpenShift Route to an InferenceService's predictor Service.

    KServe's Standard mode names that Service NAME-predictor; the router picks its port.
    """
    spec: dict[str, Any] = {"to": {"kind": "Service", "name": f"{name}-predictor",
                                   "weight": 100},
                            "wildcardPolicy": "None"}
    if exposure.get("host"):
        spec["host"] = exposure["host"]
    if exposure.get("tls", "Edge") == "Edge":
        spec["tls"] = {"termination": "edge", "insecureEdgeTerminationPolicy": "Redirect"}
    return {"apiVersion": "route.openshift.io/v1", "kind": "Route",
            "metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": spec}


def prepare(ctx: Context, intent: Resource, cluster: str) -> Prepared:
    """An InferenceService's work, gated on the platform and its StorageConnections there."""
    isvc = cast(MultiClusterInferenceService, intent)
    storage = list(isvc.spec.storage_connections)
    labels = ctx.world.cluster_labels(cluster)
    closed = waits(
        ctx.world.works_on(cluster, c.KIND_MODEL_SERVING),
        storage,
        {s: ctx.world.works_of(c.KIND_STORAGE_CONNECTION, ctx.namespace, s).get(cluster)
         for s in storage},
    )
    _, spec = validated_cluster_spec(isvc, cluster, labels, ctx.specs)
    runtimes = [r for r in ctx.world.serving_runtimes(ctx.namespace)
                if cluster in ctx.world.placement_clusters(r.namespace, r.placement)]
    closed += runtime_waits(spec, runtimes, {
        r.name: ctx.world.works_of(c.KIND_SERVING_RUNTIME, r.namespace, r.name).get(cluster)
        for r in runtimes})
    export = bool(isvc.spec.endpoint and isvc.spec.endpoint.service_export
                  and cluster in ctx.serving)
    return Prepared(render(isvc, cluster, labels, ctx.specs, export=export), tuple(closed))


def waits(
    platform_works: list[WorkFact],
    storage: list[str],
    storage_works: Mapping[str, WorkFact | None],
) -> list[Wait]:
    """Gates of an InferenceService on one cluster.

    ``storage`` lists the StorageConnections it reads through; ``storage_works`` maps each
    to its work on this cluster (None when it has none).
    """
    out = platform_waits(platform_works)
    for name in storage:
        if not storage_connection.delivered(storage_works.get(name)):
            out.append(Wait(storage_connection.WAITING_FOR_STORAGE,
                            f"StorageConnection {name} delivered"))
    return out


WAITING_FOR_RUNTIME = ClusterReason.WAITING_FOR_RUNTIME
"""Wait reason: a fleet ServingRuntime the model would run on there is not Available yet."""


def runtime_waits(
    spec: Mapping[str, Any],
    runtimes: list[RuntimeFact],
    runtime_works: Mapping[str, WorkFact | None],
) -> list[Wait]:
    """Gates of an InferenceService on the fleet's ServingRuntimes of one cluster.

    ``spec``: the model's spec for the cluster (overrides applied); ``runtimes``: the
    MultiClusterServingRuntimes of its hub namespace that select the cluster;
    ``runtime_works``: each one's work there, by name (None when it has none yet). KServe
    picks a model's runtime once, when it first reconciles the model, and does not look again
    when a ServingRuntime appears (see :mod:`addon_manager.facts.runtimes`): a model sent
    before the runtime would run on KServe's cluster-wide one of the same name until some
    later event rolled it over, so the model's first work waits for the runtimes it would
    resolve to be Available.
    """
    model = ((spec.get("template") or {}).get("predictor") or {}).get("model") or {}
    target = str(spec.get("targetNamespace", ""))
    runtime = str(model.get("runtime") or "")
    model_format = str((model.get("modelFormat") or {}).get("name") or "")
    out = []
    for fact in sorted(runtimes, key=lambda r: r.name):
        work = runtime_works.get(fact.name)
        if fact.serves(target, runtime, model_format) and (
                work is None or work.available != "True"):
            out.append(Wait(WAITING_FOR_RUNTIME,
                            f"MultiClusterServingRuntime {fact.name} Available"))
    return out


FAILED_ISVC_TRANSITIONS = (ClusterReason.BLOCKED_BY_FAILED_LOAD, ClusterReason.INVALID_SPEC)
"""Transition states of an InferenceService that mean it failed."""
MOVING_ISVC_TRANSITIONS = ("UpToDate", "InProgress")
"""KServe's transitionStatus values that say the current spec is loaded or loading: a
lastFailureInfo beside them is about an earlier spec."""


@dataclass(frozen=True)
class DataPlane:
    """The agent's verdict on a model's predictor, as fed back (:mod:`addon_agent.pure.dataplane`).

    ``built``: KServe built the predictor from the InferenceService's current spec, and the
    verdict is about its current generation; ``reason``/``message``: why not, or what is
    wrong with its pods ("" when nothing is); ``ready``/``replicas``: the predictor's pods
    ready, and asked for.
    """

    built: bool
    reason: str
    message: str
    ready: int
    replicas: int


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def data_plane(work: WorkFact) -> DataPlane | None:
    """The agent's verdict from the work's feedback; None when there is none to judge by.

    None without a verdict (an agent that writes none: ModelMesh, a stack it does not
    configure) or with one the agent did not judge (no ``built``). A verdict about an older
    generation of the InferenceService than the one fed back is not built yet: the agent
    has not looked at the current spec.
    """
    raw = work.value("dataplane")
    if text(work.value("deploymentMode")) == "ModelMesh" or not isinstance(raw, str):
        return None
    try:
        found = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(found, dict) or not isinstance(found.get("built"), bool):
        return None
    generation = _int(work.value("generation"))
    judged = _int(found.get("generation"))
    reason = sanitized(str(found.get("reason") or ""), 64)
    message = sanitized(str(found.get("message") or ""), 1024)
    built = bool(found["built"])
    if generation and judged != generation:
        built, reason = False, ClusterReason.SPEC_NOT_BUILT
        message = (f"the agent has not judged generation {generation} yet (its verdict is "
                   f"of {judged})")
    return DataPlane(built=built, reason=reason, message=message,
                     ready=_int(found.get("ready")), replicas=_int(found.get("replicas")))


POD_FAILURES = (ClusterReason.STORAGE_DOWNLOAD_FAILED, ClusterReason.MODEL_NOT_LOADED,
                ClusterReason.CRASH_LOOPING)
"""The agent's verdicts on a predictor's pods that are failures of the model."""


def report(work: WorkFact, removed: bool) -> tuple[ClusterStatus, Category]:
    """An InferenceService's readiness, URL and model state; its failure reason when failed.

    Judged by the agent's data-plane verdict first (:func:`data_plane`): a Ready that KServe
    has not re-earned for the current spec never counts, and a failed download or a
    crash-looping server is named as such; then by KServe's status.
    """
    del removed
    url = text(work.value("url")) or text(work.value("addressUrl"))
    external = external_url(work)
    state = text(work.value("activeModelState"))

    def entry(phase: str, reason: str, message: str = "", ready: bool = False) -> ClusterStatus:
        return ClusterStatus(cluster=work.cluster, phase=phase, ready=ready, reason=reason,
                             message=message, url=url, external_url=external,
                             model_state=state)

    failure = text(work.value("failureReason"))
    transition = text(work.value("transitionStatus"))
    plane = data_plane(work)
    serving = work.value("ready") == "True"
    previous = " (the previous spec still serves)" if serving else ""
    if plane is not None and not plane.built:
        if plane.reason == ClusterReason.SPEC_REJECTED:
            return entry(ClusterPhase.FAILED, ClusterReason.SPEC_REJECTED,
                         f"KServe refused the current spec: {plane.message}{previous}"), "failed"
        if not (failure and transition not in MOVING_ISVC_TRANSITIONS):
            return entry(ClusterPhase.PROGRESSING, ClusterReason.SPEC_NOT_BUILT,
                         (plane.message or "KServe has not built the predictor from the "
                          "current spec yet") + previous), "progressing"
    if plane is not None and plane.reason in POD_FAILURES:
        message = f"{plane.message} ({plane.ready} of {plane.replicas} replicas ready)"
        if serving and plane.ready > 0:
            return entry(ClusterPhase.READY, plane.reason, message, ready=True), "ready"
        return entry(ClusterPhase.FAILED, plane.reason, message), "failed"
    # KServe keeps an InferenceService Ready on its previous model while it rejects a new spec
    # (InvalidSpec) or fails to load the new model (BlockedByFailedLoad): the intent as it
    # stands is not in effect there, so the cluster is Failed, and the message says the
    # previous model still serves.
    rejected = transition in FAILED_ISVC_TRANSITIONS
    if transition in MOVING_ISVC_TRANSITIONS:
        failure = ""  # KServe keeps lastFailureInfo after the model it was about is gone
    if serving and not rejected:
        if plane is not None and plane.reason == ClusterReason.REPLICAS_NOT_READY:
            short = plane.message or f"{plane.ready} of {plane.replicas} replicas ready"
            if plane.ready > 0:
                return entry(ClusterPhase.READY, ClusterReason.REPLICAS_NOT_READY, short,
                             ready=True), "ready"
            # KServe's Ready holds while the previous spec's pods answer (or before it saw the
            # last one go): no replica serves this spec, so the cluster does not.
            return entry(ClusterPhase.PROGRESSING, ClusterReason.REPLICAS_NOT_READY,
                         short), "progressing"
        return entry(ClusterPhase.READY, ClusterReason.READY, ready=True), "ready"
    if failure or rejected:
        message = text(work.value("failureMessage")) or text(work.value("readyMessage"))
        if serving:
            message = f"{message} (the previous model still serves)".strip()
        return entry(ClusterPhase.FAILED, failure or transition, message), "failed"
    return entry(ClusterPhase.PROGRESSING, text(work.value("readyReason")) or ClusterReason.APPLIED,
                 text(work.value("readyMessage"))), "progressing"


def external_url(work: WorkFact) -> str:
    """Where callers outside the cluster reach the model.

    Its Route's host once the router admitted it; "" without a Route, or before.
    """
    host = text(work.value("routeHost"))
    if not host or work.value("routeAdmitted") != "True":
        return ""
    return f"{'https' if work.value('routeTermination') else 'http'}://{host}"


SPEC = KindSpec(
    MultiClusterInferenceService, prepare, report,
    depends_on=(Dependency(c.KIND_MODEL_SERVING), Dependency(c.KIND_STORAGE_CONNECTION),
                Dependency(c.KIND_SERVING_RUNTIME, same_namespace=True),
                Dependency(ACCESS_KIND, same_namespace=True)),
    holds_stack=True, tenant=True, claims=True, spoke_namespaces=("targetNamespace", False),
    endpoint=lambda spec: spec.endpoint or FleetEndpoint(),
)
"""The registry's entry (:mod:`addon_manager.kinds.registry`)."""
