"""Rendering: (intent, cluster, cluster labels) to the ManifestWork sent to that cluster.

Everything here is pure. A rendered work carries a hash of what it was rendered from
(annotation ``render-hash``), so the manager writes only when the hash changes.
Sealed credentials are randomised ciphertext: their work is hashed over the sealing
*inputs* (a digest standing in for the ciphertext) and the ciphertext is filled in by
:func:`with_sealed` only when the work is actually written. That digest and the render-hash of
such a work are HMAC-SHA256 under the manager's hash key (``SealInputs.hash_key``), so a reader
of ManifestWorks cannot test guesses of the Secret against them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from addon_api import constants as c
from addon_api import sealing
from addon_api.base import field_errors
from addon_api.common import Override, merge_patch
from addon_api.hashing import short_hash
from addon_api.hub import (
    ModelServing,
    MultiClusterInferenceService,
    MultiClusterServingRuntime,
    StorageConnection,
    StorageConnectionSpec,
)
from addon_api.reasons import SealedConditionType
from addon_api.spoke import ServingPlatformSpec
from addon_manager.facts import naming
from addon_manager.facts.canonical import canonical_hash, keyed_canonical_hash

WORK_API_VERSION = "work.open-cluster-management.io/v1"
SPOKE_FIELD_MANAGER = "work-agent-model-serving"
"""Field manager the work agent uses on the spokes (OCM requires the work-agent prefix)."""
SEALED_PLACEHOLDER_PREFIX = "sealing-inputs:"
MAX_MANIFESTS_BYTES = 500 * 1024
"""Most bytes of manifests one ManifestWork may carry (OCM's work webhook rejects more)."""

Intent = (
    ModelServing | StorageConnection | MultiClusterServingRuntime | MultiClusterInferenceService
)


class RenderError(ValueError):
    """The intent cannot be rendered for a cluster (e.g. an override makes it invalid)."""


@dataclass(frozen=True)
class RenderedWork:
    """A ManifestWork ready to apply (except a sealed payload still to fill in)."""

    name: str
    cluster: str
    body: dict[str, Any]
    render_hash: str
    seal_inputs: SealInputs | None = None
    sealed_spec: StorageConnectionSpec | None = None
    """The StorageConnection spec as it applies to this cluster (overrides applied); the
    sealed payload is built from it when the work is written."""


@dataclass(frozen=True)
class SealInputs:
    """What a StorageConnection work is sealed from (never the plaintext itself)."""

    public_key: str
    key_id: str
    binding: str
    secret_digest: str
    """Digest of the source Secret's data ("" for types without credentials)."""
    hash_key: bytes
    """The manager's render-hash key (HMAC): the work's placeholder and render-hash are keyed
    with it, so a reader of ManifestWorks cannot test guesses of the Secret offline."""


def owner_labels(kind: str, namespace: str, name: str) -> dict[str, str]:
    """Labels naming the hub intent that owns a ManifestWork (and what it carries)."""
    return {
        c.LABEL_MANAGED_BY: c.FIELD_MANAGER,
        c.LABEL_PART_OF: c.ADDON_NAME,
        c.LABEL_INTENT_KIND: kind,
        c.LABEL_INTENT_NAMESPACE: namespace,
        c.LABEL_INTENT_NAME: name,
    }


def _invalid_after_overrides(cluster: str, err: ValidationError) -> RenderError:
    return RenderError(
        f"spec for {cluster} is invalid after overrides: {field_errors(err, 'spec')}"
    )


def cluster_spec(
    spec: dict[str, Any], overrides: list[Override], cluster: str, labels: dict[str, str]
) -> dict[str, Any]:
    """The intent spec as sent to ``cluster``: overrides applied in order, routing removed.

    Routing is which clusters (placementRef, overrides) and how a change reaches them
    (rollout).
    """
    out: dict[str, Any] = copy.deepcopy(spec)
    for override in overrides:
        if override.selects(cluster, labels):
            patched = merge_patch(out, override.patch)
            out = patched if isinstance(patched, dict) else {}
    for routing in ("placementRef", "overrides", "rollout"):
        out.pop(routing, None)
    return out


Selection = tuple[int, ...]
"""Which of an intent's overrides select a cluster (their indexes, in order)."""


@dataclass(frozen=True)
class WorkTemplate:
    """The work of every cluster that one selection of overrides gives, but its namespace.

    ``prefix`` and ``suffix`` are the canonical JSON of the work (as hashed) around the
    cluster's name, so a cluster's render hash costs one SHA-256, not a JSON encoding.
    """

    body: dict[str, Any]
    manifests_bytes: int
    prefix: bytes
    suffix: bytes


@dataclass
class SpecMemo:
    """One plan's memo for one intent: what clusters the same overrides select share.

    ``specs``: the validated cluster spec, computed once; ``works``: the work template (see
    :class:`WorkTemplate`). Both are shared by the works rendered from them and never
    modified.
    """

    specs: dict[Selection, dict[str, Any]] = field(default_factory=dict)
    works: dict[Selection, WorkTemplate | None] = field(default_factory=dict)
    """None: the work cannot be templated (its content holds the placeholder itself)."""


def _memoized(
    memo: SpecMemo | None, overrides: list[Override], cluster: str, labels: dict[str, str],
    compute: Callable[[], dict[str, Any]],
) -> tuple[Selection | None, dict[str, Any]]:
    """(the cluster's selection, its spec); no selection without a memo."""
    if memo is None:
        return None, compute()
    key = tuple(i for i, o in enumerate(overrides) if o.selects(cluster, labels))
    if key not in memo.specs:
        memo.specs[key] = compute()  # a RenderError (it names the cluster) is not kept
    return key, memo.specs[key]


def validated_cluster_spec(
    intent: MultiClusterServingRuntime | MultiClusterInferenceService,
    cluster: str,
    labels: dict[str, str],
    memo: SpecMemo | None = None,
) -> tuple[Selection | None, dict[str, Any]]:
    """The cluster's selection of overrides, and :func:`cluster_spec` validated again.

    An override patch is free-form JSON: what it makes of the spec on one cluster is
    checked by the intent's spec model here, as admission checked the spec itself, and a
    :class:`RenderError` naming the fields is raised when that cluster's spec is invalid.
    With ``memo``, the spec of clusters the same overrides select is computed once (no
    selection without it).
    """
    return _memoized(memo, intent.spec.overrides, cluster, labels,
                     lambda: _validated_cluster_spec(intent, cluster, labels))


def _validated_cluster_spec(
    intent: MultiClusterServingRuntime | MultiClusterInferenceService,
    cluster: str,
    labels: dict[str, str],
) -> dict[str, Any]:
    spec = cluster_spec(intent.spec.to_dict(), intent.spec.overrides, cluster, labels)
    try:
        model = type(intent.spec).from_wire(
            {**spec, "placementRef": intent.spec.placement_ref.to_dict()}
        )
    except ValidationError as err:
        raise _invalid_after_overrides(cluster, err) from err
    out = model.to_dict()
    out.pop("placementRef", None)
    out.pop("overrides", None)
    return out


def _jsonpaths(pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"type": "JSONPaths", "jsonPaths": [{"name": n, "path": p} for n, p in pairs]}]


def _ssa_config(
    group: str, resource: str, name: str, namespace: str, feedback: list[tuple[str, str]],
    *, force: bool = True,
) -> dict[str, Any]:
    """A manifest's feedback rules and server-side-apply strategy.

    ``force`` False for the objects tenants' intents write into serving namespaces (their
    InferenceServices, ServingRuntimes and Routes): a field someone else owns there (a user's
    ``kubectl apply``, another controller) is never taken over; the work agent reports the
    conflict and the hub shows ``Conflict`` naming that field manager. The add-on's own kinds
    (ServingPlatform, SealedStorageConnection) are only ever written by its works.
    """
    ident = {"group": group, "resource": resource, "name": name}
    if namespace:
        ident["namespace"] = namespace
    return {
        "resourceIdentifier": ident,
        "feedbackRules": _jsonpaths(feedback),
        "updateStrategy": {
            "type": "ServerSideApply",
            "serverSideApply": {"fieldManager": SPOKE_FIELD_MANAGER, "force": force},
        },
    }


def _cond(ctype: str, field: str) -> str:
    return f'.status.conditions[?(@.type=="{ctype}")].{field}'


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
SEALED_FEEDBACK = [
    ("phase", ".status.phase"),
    ("message", ".status.message"),
    # why not delivered: DecryptFailed, ...
    ("reason", _cond(SealedConditionType.DELIVERED, "reason")),
]
SERVING_RUNTIME_FEEDBACK = [("disabled", ".spec.disabled")]
INFERENCE_SERVICE_FEEDBACK = [
    ("ready", _cond("Ready", "status")),
    ("readyReason", _cond("Ready", "reason")),
    ("readyMessage", _cond("Ready", "message")),
    ("predictorReady", _cond("PredictorReady", "status")),
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
on the InferenceService, see :mod:`addon_agent.dataplane`)."""
ROUTE_FEEDBACK = [
    ("routeHost", ".status.ingress[0].host"),
    ("routeAdmitted", '.status.ingress[0].conditions[?(@.type=="Admitted")].status'),
    ("routeTermination", ".spec.tls.termination"),
]
"""What the router reports about a model's Route (RouteHost is where callers reach it)."""
IDENTITY_FEEDBACK = [
    (c.IDENTITY_PUBLIC_KEY, f".data.{c.IDENTITY_PUBLIC_KEY}"),
    (c.IDENTITY_KEY_ID, f".data.{c.IDENTITY_KEY_ID}"),
    (c.IDENTITY_NEXT_PUBLIC_KEY, f".data.{c.IDENTITY_NEXT_PUBLIC_KEY}"),
    (c.IDENTITY_NEXT_KEY_ID, f".data.{c.IDENTITY_NEXT_KEY_ID}"),
]


def _work(
    kind: str,
    namespace: str,
    name: str,
    cluster: str,
    manifests: list[dict[str, Any]],
    configs: list[dict[str, Any]],
    *,
    work_name: str | None = None,
    seal_inputs: SealInputs | None = None,
    sealed_spec: StorageConnectionSpec | None = None,
    field: str = "spec",
    hash_key: bytes = b"",
    shared: tuple[SpecMemo, Selection] | None = None,
) -> RenderedWork:
    """The work carrying ``manifests`` to ``cluster``, hashed.

    With ``shared`` (the plan's memo and the cluster's selection of overrides; only for works
    whose manifests depend on nothing else of the cluster), the work is built from the
    selection's :class:`WorkTemplate`: the same body and hash, without encoding it again.
    """
    wname = work_name or naming.work_name(kind, namespace, name)
    if shared is not None and not hash_key:
        memo, key = shared
        if key not in memo.works:
            memo.works[key] = _template(kind, namespace, name, wname, manifests, configs)
        templated = _from_template(shared, cluster, field)
        if templated is not None:
            return templated
    _check_size(len(json.dumps(manifests, separators=(",", ":")).encode()), cluster, field)
    body = _work_body(kind, namespace, name, wname, cluster, manifests, configs)
    digest = keyed_canonical_hash(hash_key, body) if hash_key else canonical_hash(body)
    body["metadata"]["annotations"][c.ANNOTATION_RENDER_HASH] = digest
    return RenderedWork(wname, cluster, body, digest, seal_inputs, sealed_spec)


def _from_template(shared: tuple[SpecMemo, Selection] | None, cluster: str,
                  field: str = "spec") -> RenderedWork | None:
    """The work of ``cluster`` from its selection's template.

    None: no template yet, or none possible; the caller renders the work in full (which makes
    the template).
    """
    if shared is None:
        return None
    memo, key = shared
    template = memo.works.get(key)
    if template is None:
        return None
    _check_size(template.manifests_bytes, cluster, field)
    digest = short_hash(template.prefix + json.dumps(cluster).encode() + template.suffix,
                        length=32)
    meta = {**template.body["metadata"], "namespace": cluster,
            "annotations": {c.ANNOTATION_RENDER_HASH: digest}}
    return RenderedWork(meta["name"], cluster, {**template.body, "metadata": meta}, digest)


_CLUSTER_PLACEHOLDER = "\x00cluster\x00"
"""Stands for the cluster's name in a :class:`WorkTemplate` (NUL bytes: no cluster name and
hardly any spec has them; a template whose content does is not made)."""


def _template(kind: str, namespace: str, name: str, wname: str,
              manifests: list[dict[str, Any]], configs: list[dict[str, Any]],
              ) -> WorkTemplate | None:
    body = _work_body(kind, namespace, name, wname, _CLUSTER_PLACEHOLDER, manifests, configs)
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    parts = canonical.split(json.dumps(_CLUSTER_PLACEHOLDER).encode())
    if len(parts) != 2:
        return None
    del body["metadata"]["namespace"]
    return WorkTemplate(body, len(json.dumps(manifests, separators=(",", ":")).encode()),
                        parts[0], parts[1])


def _check_size(size: int, cluster: str, field: str) -> None:
    if size > MAX_MANIFESTS_BYTES:
        raise RenderError(
            f"{field}: the ManifestWork for {cluster} would carry {size} bytes of manifests,"
            f" more than the {MAX_MANIFESTS_BYTES} OCM accepts"
        )


def _work_body(kind: str, namespace: str, name: str, wname: str, cluster: str,
               manifests: list[dict[str, Any]], configs: list[dict[str, Any]],
               ) -> dict[str, Any]:
    return {
        "apiVersion": WORK_API_VERSION,
        "kind": "ManifestWork",
        "metadata": {
            "name": wname,
            "namespace": cluster,
            "labels": owner_labels(kind, namespace, name),
            "annotations": {},
        },
        "spec": {
            "workload": {"manifests": manifests},
            "deleteOption": {"propagationPolicy": "Foreground"},
            "manifestConfigs": configs,
        },
    }


REVISION_FEEDBACK = "revision"
"""Feedback value: the revision annotation of the object the work agent last reported on."""
REVISION_PATH = ".metadata.annotations." + c.ANNOTATION_REVISION.replace(".", "\\.")
"""JSONPath of the revision annotation (dots of the key escaped)."""


def with_revision(rw: RenderedWork, revision: int) -> RenderedWork:
    """``rw`` marked as rendering intent revision ``revision``.

    The work and the objects it carries are annotated with the revision, and the work feeds
    back the annotation of the object it reports on: a report whose ``revision`` feedback is
    the work's revision describes the object as of that revision, not a status left over from
    the one before (the rollout's gates read only such reports). The mark is hashed too, so
    a work whose content is unchanged still gets its new mark written.
    """
    body = copy.deepcopy(rw.body)
    for manifest in body["spec"]["workload"]["manifests"]:
        manifest.setdefault("metadata", {}).setdefault("annotations", {})[
            c.ANNOTATION_REVISION] = str(revision)
    for config in body["spec"].get("manifestConfigs") or []:
        for rule in config.get("feedbackRules") or []:
            if rule.get("type") == "JSONPaths":
                rule["jsonPaths"].append({"name": REVISION_FEEDBACK, "path": REVISION_PATH})
    annotations = body["metadata"]["annotations"]
    annotations.pop(c.ANNOTATION_RENDER_HASH, None)
    annotations[c.ANNOTATION_REVISION] = str(revision)
    digest = canonical_hash(body)
    annotations[c.ANNOTATION_RENDER_HASH] = digest
    return replace(rw, body=body, render_hash=digest)


def render_model_serving(
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
            raise _invalid_after_overrides(cluster, err) from err

    key, spec = _memoized(memo, intent.spec.overrides, cluster, labels, platform_spec)
    templated = _from_template(_shared(memo, key), cluster)
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
    config = _ssa_config(
        c.GROUP, "servingplatforms", naming.SERVING_PLATFORM_NAME, "", SERVING_PLATFORM_FEEDBACK
    )
    return _work(c.KIND_MODEL_SERVING, ns, name, cluster, [platform], [config],
                 shared=_shared(memo, key))


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


def render_serving_runtime(
    intent: MultiClusterServingRuntime, cluster: str, labels: dict[str, str],
    memo: SpecMemo | None = None,
) -> RenderedWork:
    """The KServe ServingRuntime work of a MultiClusterServingRuntime for one cluster."""
    ns, name = str(intent.metadata.namespace), str(intent.metadata.name)
    key, spec = validated_cluster_spec(intent, cluster, labels, memo)
    templated = _from_template(_shared(memo, key), cluster, "spec.template")
    if templated is not None:
        return templated
    target = str(spec["targetNamespace"])
    runtime = {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": {
            "name": name,
            "namespace": target,
            "labels": owner_labels(c.KIND_SERVING_RUNTIME, ns, name),
        },
        "spec": spec["template"],
    }
    config = _ssa_config(
        "serving.kserve.io", "servingruntimes", name, target, SERVING_RUNTIME_FEEDBACK,
        force=False,
    )
    return _work(
        c.KIND_SERVING_RUNTIME, ns, name, cluster, [runtime], [config], field="spec.template",
        shared=_shared(memo, key),
    )


def render_inference_service(
    intent: MultiClusterInferenceService, cluster: str, labels: dict[str, str],
    memo: SpecMemo | None = None,
) -> RenderedWork:
    """The KServe InferenceService work of a MultiClusterInferenceService for one cluster."""
    ns, name = str(intent.metadata.namespace), str(intent.metadata.name)
    key, spec = validated_cluster_spec(intent, cluster, labels, memo)
    templated = _from_template(_shared(memo, key), cluster, "spec.template")
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
    config = _ssa_config(
        "serving.kserve.io", "inferenceservices", name, target, INFERENCE_SERVICE_FEEDBACK,
        force=False,
    )
    manifests, configs = [isvc], [config]
    exposure = spec.get("exposure")
    if exposure is not None and exposure.get("type", "Route") == "Route":
        manifests.append(route_for(name, target, owner_labels(c.KIND_INFERENCE_SERVICE, ns, name),
                                   exposure))
        configs.append(_ssa_config("route.openshift.io", "routes", name, target, ROUTE_FEEDBACK,
                                   force=False))
    return _work(
        c.KIND_INFERENCE_SERVICE, ns, name, cluster, manifests, configs, field="spec.template",
        shared=_shared(memo, key),
    )


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


def _shared(memo: SpecMemo | None, key: Selection | None) -> tuple[SpecMemo, Selection] | None:
    return (memo, key) if memo is not None and key is not None else None


def seal_placeholder(inputs: SealInputs, spec: StorageConnectionSpec) -> str:
    """What stands in for the ciphertext in the hashed body: a digest of the sealing inputs.

    It covers the cluster's spec too (endpoint, bucket, region... end up inside the sealed
    payload, not in the visible body), so changing one of them re-seals.
    """
    if not inputs.hash_key:
        raise RenderError("sealed works need the manager's render-hash key")
    return SEALED_PLACEHOLDER_PREFIX + keyed_canonical_hash(
        inputs.hash_key, [inputs.key_id, inputs.binding, inputs.secret_digest, spec.to_dict()]
    )


def storage_cluster_spec(
    intent: StorageConnection, cluster: str, labels: dict[str, str]
) -> StorageConnectionSpec:
    """A StorageConnection's spec as it applies to ``cluster``: its overrides applied.

    Raises :class:`RenderError` (naming the field) when an override makes it invalid.
    """
    spec = cluster_spec(intent.spec.to_dict(), intent.spec.overrides, cluster, labels)
    spec["placementRef"] = intent.spec.placement_ref.to_dict()
    try:
        return StorageConnectionSpec.from_wire(spec)
    except ValidationError as err:
        raise _invalid_after_overrides(cluster, err) from err


def render_storage_connection(
    intent: StorageConnection, cluster: str, labels: dict[str, str], inputs: SealInputs,
    spec: StorageConnectionSpec | None = None, namespace: str = c.AGENT_NAMESPACE,
) -> RenderedWork:
    """The SealedStorageConnection work of a StorageConnection for one cluster.

    The sealed object goes to ``namespace``, where the cluster's agent runs; ``inputs.binding``
    must name the same namespace (:func:`~addon_api.sealing.binding_for`), or the agent
    cannot open it. ``spec.sealed`` holds a placeholder; :func:`with_sealed` puts the
    ciphertext in, built by :func:`storage_payload` from the cluster's spec
    (``RenderedWork.sealed_spec``). ``spec`` is that spec when the caller already has it
    from :func:`storage_cluster_spec`.
    """
    ns, name = str(intent.metadata.namespace), str(intent.metadata.name)
    if spec is None:
        spec = storage_cluster_spec(intent, cluster, labels)
    sealed_name = naming.sealed_name(ns, name)
    sealed = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_SEALED_STORAGE_CONNECTION,
        "metadata": {
            "name": sealed_name,
            "namespace": namespace,
            "labels": owner_labels(c.KIND_STORAGE_CONNECTION, ns, name),
        },
        "spec": {
            "keyId": inputs.key_id,
            "sealed": seal_placeholder(inputs, spec),
            "type": spec.type,
            "targetNamespaces": list(spec.target_namespaces),
            "entryName": spec.entry_key(name),
            "source": {"namespace": ns, "name": name},
        },
    }
    config = _ssa_config(
        c.GROUP, "sealedstorageconnections", sealed_name, namespace, SEALED_FEEDBACK
    )
    return _work(
        c.KIND_STORAGE_CONNECTION, ns, name, cluster, [sealed], [config],
        seal_inputs=inputs, sealed_spec=spec, hash_key=inputs.hash_key,
    )


def with_sealed(work: RenderedWork, ciphertext: str) -> dict[str, Any]:
    """The work body with the sealed payload in place of its placeholder."""
    body = copy.deepcopy(work.body)
    body["spec"]["workload"]["manifests"][0]["spec"]["sealed"] = ciphertext
    return body


def binding_of(work: RenderedWork) -> sealing.Binding:
    """What the sealed payload of a StorageConnection work is bound to (its spoke object)."""
    obj = work.body["spec"]["workload"]["manifests"][0]
    meta, spec = obj["metadata"], obj["spec"]
    return sealing.Binding(
        cluster=work.cluster, namespace=str(meta["namespace"]), name=str(meta["name"]),
        target_namespaces=tuple(spec["targetNamespaces"]), entry_name=str(spec["entryName"]),
        type=str(spec["type"]),
    )


def render_identity(cluster: str, namespace: str = c.AGENT_NAMESPACE) -> RenderedWork:
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
        "feedbackRules": _jsonpaths(IDENTITY_FEEDBACK),
        "updateStrategy": {"type": "ReadOnly"},
    }
    return _work(
        naming.KIND_IDENTITY, "", "agent", cluster, [cm], [config],
        work_name=naming.IDENTITY_WORK_NAME,
    )


def missing_secret_keys(
    spec: StorageConnectionSpec, secret_keys: tuple[str, ...] | list[str]
) -> list[tuple[str, str]]:
    """(field, key) for every key that ``spec.secretRef.keys`` names and the Secret lacks."""
    if spec.secret_ref is None or not spec.secret_ref.keys:
        return []
    have = set(secret_keys)
    return [(f, k) for f, k in sorted(spec.secret_ref.keys.items()) if k not in have]


def secret_keys_read(spec: StorageConnectionSpec, secret_keys: tuple[str, ...]) -> list[str]:
    """The keys of the Secret whose values are sealed.

    Those ``spec.secretRef.keys`` names, or every key of the Secret when it names none.
    """
    if spec.secret_ref is None:
        return []
    if spec.secret_ref.keys:
        return sorted(set(spec.secret_ref.keys.values()))
    return sorted(secret_keys)


def storage_payload(spec: StorageConnectionSpec, secret_data: dict[str, str]) -> dict[str, Any]:
    """The storage-config entry (JSON object) of a StorageConnection, credentials included.

    ``spec`` is the connection's spec for one cluster (:func:`storage_cluster_spec`) and
    ``secret_data`` the decoded data of the Secret it names. Only the manager calls this,
    right before sealing; the result is never stored.
    """
    out: dict[str, Any] = {"type": spec.type}
    if spec.secret_ref is not None:
        if spec.secret_ref.keys:
            missing = missing_secret_keys(spec, list(secret_data))
            if missing:  # checked before rendering; never deliver half a credential
                raise RenderError(f"the Secret has no key {missing[0][1]!r}")
            for field_name, key in spec.secret_ref.keys.items():
                out[field_name] = secret_data[key]
        else:
            out.update(secret_data)
    if spec.s3 is not None:
        for field_name, value in (
            ("endpoint_url", spec.s3.endpoint),
            ("region", spec.s3.region),
            ("bucket", spec.s3.bucket),  # KServe's storage initializer
            ("default_bucket", spec.s3.bucket),  # ModelMesh's puller
        ):
            if value is not None:
                out[field_name] = value
    if spec.gcs is not None and spec.gcs.bucket is not None:
        out["bucket"] = spec.gcs.bucket
    if spec.azure is not None:
        out["storage_account"] = spec.azure.storage_account
        if spec.azure.container is not None:
            out["container"] = spec.azure.container
    if spec.pvc is not None:
        out["claim_name"] = spec.pvc.claim_name
    if spec.uri is not None:
        out["uri"] = spec.uri.uri
    return out
