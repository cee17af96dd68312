"""What the manager keeps of each MultiClusterServingRuntime to order the models that use it.

KServe resolves an InferenceService's runtime when it reconciles the InferenceService: a
ServingRuntime of the named (or an auto-selecting) runtime in its namespace first, else a
ClusterServingRuntime. A ServingRuntime created later does not make KServe look again (its
watch ignores creations), so a model sent before the fleet's namespaced runtime landed runs
on the cluster-wide one until some later event rolls it over. The manager therefore holds a
model's first work on a cluster until the runtimes it would resolve there are Available
(:func:`addon_manager.kinds.inference_service.runtime_waits`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RuntimeFact:
    """A MultiClusterServingRuntime, as far as the models it may serve need it."""

    namespace: str
    name: str
    target_namespace: str
    """The spoke namespace its ServingRuntime goes to (the spec's, before overrides)."""
    placement: str
    auto_formats: frozenset[str] = frozenset()
    """Model formats the runtime is auto-selected for (``supportedModelFormats[].autoSelect``)."""
    deleting: bool = False

    def serves(self, target_namespace: str, runtime: str, model_format: str) -> bool:
        """Whether KServe would resolve a model in ``target_namespace`` to this runtime.

        ``runtime``: the runtime the model names ("" when none); ``model_format``: its
        ``modelFormat.name`` (KServe compares format names case-insensitively).
        """
        if self.deleting or target_namespace != self.target_namespace:
            return False
        if runtime:
            return runtime == self.name
        return model_format.lower() in self.auto_formats


def parse_runtime(body: Mapping[str, Any]) -> RuntimeFact:
    """A :class:`RuntimeFact` for a MultiClusterServingRuntime object."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    template = spec.get("template") or {}
    formats = frozenset(
        str(f.get("name", "")).lower()
        for f in template.get("supportedModelFormats") or []
        if isinstance(f, Mapping) and f.get("autoSelect") is True and f.get("name"))
    return RuntimeFact(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        target_namespace=str(spec.get("targetNamespace", "")),
        placement=str((spec.get("placementRef") or {}).get("name", "")),
        auto_formats=formats,
        deleting=bool(meta.get("deletionTimestamp")),
    )
