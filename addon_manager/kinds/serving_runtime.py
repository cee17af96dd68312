"""MultiClusterServingRuntime: a KServe ServingRuntime on each selected cluster.

Its render, feedback rules, gate (the stack Available) and report.
"""

from __future__ import annotations

from typing import cast

from addon_api import constants as c
from addon_api.common import ClusterStatus, Resource
from addon_api.hub import MultiClusterServingRuntime
from addon_api.reasons import ClusterPhase, ClusterReason
from addon_manager.facts.records import WorkFact
from addon_manager.kinds.base import Category, Context, Dependency, KindSpec, Prepared
from addon_manager.kinds.model_serving import platform_waits
from addon_manager.kinds.render import (
    RenderedWork,
    SpecMemo,
    from_template,
    manifest_work,
    owner_labels,
    shared_by,
    ssa_config,
    validated_cluster_spec,
)
from addon_manager.kinds.tenant_access import ACCESS_KIND

SERVING_RUNTIME_FEEDBACK = [("disabled", ".spec.disabled")]
"""What is fed back of a ServingRuntime (its readiness is the work's Available)."""


def render(
    intent: MultiClusterServingRuntime, cluster: str, labels: dict[str, str],
    memo: SpecMemo | None = None,
) -> RenderedWork:
    """The KServe ServingRuntime work of a MultiClusterServingRuntime for one cluster."""
    ns, name = str(intent.metadata.namespace), str(intent.metadata.name)
    key, spec = validated_cluster_spec(intent, cluster, labels, memo)
    templated = from_template(shared_by(memo, key), cluster, "spec.template")
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
    config = ssa_config(
        "serving.kserve.io", "servingruntimes", name, target, SERVING_RUNTIME_FEEDBACK,
        force=False,
    )
    return manifest_work(
        c.KIND_SERVING_RUNTIME, ns, name, cluster, [runtime], [config], field="spec.template",
        shared=shared_by(memo, key),
    )


def prepare(ctx: Context, intent: Resource, cluster: str) -> Prepared:
    """A runtime's work, gated on the cluster's ServingPlatform being Available."""
    waits = platform_waits(ctx.world.works_on(cluster, c.KIND_MODEL_SERVING))
    return Prepared(render(
        cast(MultiClusterServingRuntime, intent), cluster, ctx.world.cluster_labels(cluster),
        ctx.specs,
    ), tuple(waits))


def report(work: WorkFact, removed: bool) -> tuple[ClusterStatus, Category]:
    """A ServingRuntime is ready once the work agent reports it Available."""
    del removed
    ok = work.available == "True"
    return ClusterStatus(
        cluster=work.cluster, phase=ClusterPhase.AVAILABLE if ok else ClusterPhase.APPLIED,
        ready=ok, reason=ClusterReason.AVAILABLE if ok else work.reason,
    ), "ready" if ok else "progressing"


SPEC = KindSpec(
    MultiClusterServingRuntime, prepare, report,
    depends_on=(Dependency(c.KIND_MODEL_SERVING), Dependency(ACCESS_KIND, same_namespace=True)),
    holds_stack=True, tenant=True, claims=True, spoke_namespaces=("targetNamespace", False),
)
"""The registry's entry (:mod:`addon_manager.kinds.registry`)."""
