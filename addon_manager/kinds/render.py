"""Rendering shared by every kind: the ManifestWork around a kind's manifests, hashed.

Each kind module renders its own manifests and feedback rules and wraps them with
:func:`manifest_work`; this module holds that wrapper, the overrides' cluster specs and their
memo, the per-selection templates, revision marks and the render errors. Everything here is
pure. A rendered work carries a hash of what it was rendered from (annotation
``render-hash``), so the manager writes only when the hash changes. Sealed credentials are
randomised ciphertext: their work is hashed over the sealing *inputs* (a digest standing in
for the ciphertext) and the ciphertext is filled in by
:func:`~addon_manager.kinds.storage_connection.with_sealed` only when the work is actually
written. That digest and the render-hash of such a work are HMAC-SHA256 under the manager's
hash key (``SealInputs.hash_key``), so a reader of ManifestWorks cannot test guesses of the
Secret against them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from addon_api import constants as c
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
from addon_manager.facts import naming
from addon_manager.facts.canonical import canonical_hash, keyed_canonical_hash

WORK_API_VERSION = "work.open-cluster-management.io/v1"
SPOKE_FIELD_MANAGER = "work-agent-model-serving"
"""Field manager the work agent uses on the spokes (OCM requires the work-agent prefix)."""
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


def invalid_after_overrides(cluster: str, err: ValidationError) -> RenderError:
    """The error of a cluster's spec that its overrides made invalid (naming the fields)."""
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


def memoized(
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
    return memoized(memo, intent.spec.overrides, cluster, labels,
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
        raise invalid_after_overrides(cluster, err) from err
    out = model.to_dict()
    out.pop("placementRef", None)
    out.pop("overrides", None)
    return out


def jsonpaths(pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Feedback rules of type JSONPaths from (name, path) pairs."""
    return [{"type": "JSONPaths", "jsonPaths": [{"name": n, "path": p} for n, p in pairs]}]


FEEDBACK_SCRAPE = "Watch"
"""How the work agent reads a manifest's feedback: watched (every manifest the manager reads
feedback from).

``manifestConfigs[].feedbackScrapeType`` (OCM 1.1 and later): ``Watch`` has the work agent
watch the object and report a change as it happens, where ``Poll`` (OCM's default) reads it
once per ``--status-sync-interval`` (10 s by default), so the hub would learn that a model
became Ready, or stopped being, up to that much later. The work agent keeps polling too (a
deletion, a missed event), runs at most ``--max-feedback-watch`` watches (one per kind and
namespace; 50 by default) and polls the rest; an older work API prunes the field and polls."""


def ssa_config(
    group: str, resource: str, name: str, namespace: str, feedback: list[tuple[str, str]],
    *, force: bool = True,
) -> dict[str, Any]:
    """A manifest's feedback rules (watched: :data:`FEEDBACK_SCRAPE`) and apply strategy.

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
        "feedbackRules": jsonpaths(feedback),
        "feedbackScrapeType": FEEDBACK_SCRAPE,
        "updateStrategy": {
            "type": "ServerSideApply",
            "serverSideApply": {"fieldManager": SPOKE_FIELD_MANAGER, "force": force},
        },
    }


def condition_path(ctype: str, field: str) -> str:
    """JSONPath of a field of the status condition of type ``ctype``."""
    return f'.status.conditions[?(@.type=="{ctype}")].{field}'


def manifest_work(
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
        templated = from_template(shared, cluster, field)
        if templated is not None:
            return templated
    _check_size(len(json.dumps(manifests, separators=(",", ":")).encode()), cluster, field)
    body = _work_body(kind, namespace, name, wname, cluster, manifests, configs)
    digest = keyed_canonical_hash(hash_key, body) if hash_key else canonical_hash(body)
    body["metadata"]["annotations"][c.ANNOTATION_RENDER_HASH] = digest
    return RenderedWork(wname, cluster, body, digest, seal_inputs, sealed_spec)


def from_template(shared: tuple[SpecMemo, Selection] | None, cluster: str,
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


def shared_by(memo: SpecMemo | None, key: Selection | None
              ) -> tuple[SpecMemo, Selection] | None:
    """The plan's memo and a selection of overrides, when both are known (a work's template)."""
    return (memo, key) if memo is not None and key is not None else None


