"""Adding a hub kind is one module and one registry line: an example kind, registered here only.

The kind below is what a kind module holds (its model, render, gate, report and ``SPEC``);
the test adds it to the registry (the one line) and runs the pure planner, the reconciler on
the fake hub and the registry's queries on it. Nothing else in the manager names it.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, ClassVar, Literal, cast

import pytest

from addon_api import constants as c
from addon_api.common import ClusterStatus, CrdInfo, Resource
from addon_api.hub import IntentSpec
from addon_api.reasons import ClusterPhase, ClusterReason
from addon_manager.engine.plan import Executed, finish, plan
from addon_manager.facts import naming
from addon_manager.facts.records import WorkFact
from addon_manager.kinds import model_serving, registry
from addon_manager.kinds.base import Category, Context, Dependency, KindSpec, Prepared
from addon_manager.kinds.render import RenderedWork, manifest_work, owner_labels, ssa_config
from addon_manager.shell.reconcile import Reconciler
from testbed.support.fake_hub import OPEN_POLICY, FakeHub
from testbed.support.sealing import memory_sealer
from tests.unit.test_manager_reconcile import platform_ready

# --- the kind's module: what ``addon_manager/kinds/model_card.py`` would hold ----------------

KIND = "ModelRoute"


class ModelRouteSpec(IntentSpec):
    """A Route to a model's predictor Service on every selected cluster."""

    target_namespace: str
    """Namespace of the model (and of the Route) on the clusters."""
    model: str
    """Name of the InferenceService whose predictor the Route leads to."""


class ModelRoute(Resource):
    """The example hub kind."""

    crd: ClassVar[CrdInfo] = CrdInfo(plural="modelroutes", short_names=("mroute",),
                                     scope="Namespaced", hub=True)
    kind: Literal["ModelRoute"] = "ModelRoute"
    spec: ModelRouteSpec


FEEDBACK = [("routeHost", ".status.ingress[0].host")]


def render(route: ModelRoute, cluster: str) -> RenderedWork:
    """The Route work of a ModelRoute for one cluster."""
    ns, name = str(route.metadata.namespace), str(route.metadata.name)
    target = route.spec.target_namespace
    manifest = {"apiVersion": "route.openshift.io/v1", "kind": "Route",
                "metadata": {"name": name, "namespace": target,
                             "labels": owner_labels(KIND, ns, name)},
                "spec": {"to": {"kind": "Service", "name": f"{route.spec.model}-predictor"}}}
    config = ssa_config("route.openshift.io", "routes", name, target, FEEDBACK, force=False)
    return manifest_work(KIND, ns, name, cluster, [manifest], [config])


def prepare(ctx: Context, intent: Resource, cluster: str) -> Prepared:
    """The route's work, gated on the cluster's stack like a runtime's."""
    waits = model_serving.platform_waits(ctx.world.works_on(cluster, c.KIND_MODEL_SERVING))
    return Prepared(render(cast(ModelRoute, intent), cluster), tuple(waits))


def report(work: WorkFact, removed: bool) -> tuple[ClusterStatus, Category]:
    """Ready once the router reports the Route's host."""
    del removed
    host = work.value("routeHost")
    ok = isinstance(host, str) and bool(host)
    return ClusterStatus(cluster=work.cluster, ready=ok,
                         phase=ClusterPhase.AVAILABLE if ok else ClusterPhase.APPLIED,
                         reason=ClusterReason.AVAILABLE if ok else work.reason,
                         ), "ready" if ok else "progressing"


SPEC = KindSpec(ModelRoute, prepare, report, depends_on=(Dependency(c.KIND_MODEL_SERVING),),
                spoke_namespaces=("targetNamespace", False))

# --- the test ------------------------------------------------------------------------------


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> KindSpec:
    """The one registry line: ``KINDS`` gets the example kind (for this test only)."""
    monkeypatch.setitem(registry.KINDS, SPEC.kind, SPEC)
    return SPEC


def route_body() -> dict[str, Any]:
    return {"apiVersion": c.API_VERSION, "kind": KIND,
            "metadata": {"name": "iris", "namespace": "ns", "generation": 1},
            "spec": {"placementRef": {"name": "p"}, "targetNamespace": "models",
                     "model": "iris"}}


def test_the_pure_planner_renders_an_example_kind_registered_in_one_line(
        registered: KindSpec) -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    platform_ready(hub, "c1")  # c2 has no stack yet: the route's gate holds it back there
    snap = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY).snapshot()
    planned = plan(registry.spec_of(KIND), route_body(), snap)
    assert [(a.what, a.kind, a.work.cluster) for a in planned.applies] == [("apply", KIND, "c1")]
    work = planned.applies[0].work
    assert work.name == naming.work_name(KIND, "ns", "iris")
    (manifest,) = work.body["spec"]["workload"]["manifests"]
    assert (manifest["kind"], manifest["metadata"]["namespace"]) == ("Route", "models")
    assert manifest["spec"]["to"]["name"] == "iris-predictor"
    assert [w.reason for w in planned.inputs["c2"].waits] == [ClusterReason.WAITING_FOR_PLATFORM]
    status = finish(planned, Executed(), snap.now, 60).status
    assert {e.cluster: e.phase for e in status.clusters} == {
        "c1": ClusterPhase.PENDING, "c2": ClusterPhase.WAITING}
    assert next(e for e in status.clusters if e.cluster == "c2").reason == (
        ClusterReason.WAITING_FOR_PLATFORM)


def test_the_registry_and_the_reconciler_take_the_example_kind_as_any_other(
        registered: KindSpec) -> None:
    # Wake-ups and the informer's prefetch follow its depends_on, with no code naming it.
    assert (KIND, Dependency(c.KIND_MODEL_SERVING)) in registry.dependents(c.KIND_MODEL_SERVING)
    assert registry.works_read(KIND) == {c.KIND_MODEL_SERVING}
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    platform_ready(hub, "c1")
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    asyncio.run(reconciler.reconcile(KIND, route_body()))
    assert set(hub.works_of(KIND, "ns", "iris")) == {"c1"}
    assert hub.statuses["iris"]["clusters"][0]["phase"] == ClusterPhase.PENDING
    # The router reports the Route's host: the kind's own report makes the cluster Ready.
    key = ("c1", naming.work_name(KIND, "ns", "iris"))
    hub.works[key] = replace(hub.works[key], applied="True",
                             feedback=(("routeHost", "iris.apps.c1"),))
    asyncio.run(reconciler.reconcile(KIND, {**route_body(), "status": hub.statuses["iris"]}))
    entry = hub.statuses["iris"]["clusters"][0]
    assert (entry["phase"], entry["ready"]) == (ClusterPhase.AVAILABLE, True)


def test_without_its_registry_line_the_manager_does_not_know_the_kind() -> None:
    assert KIND not in registry.KINDS
    with pytest.raises(KeyError):
        registry.spec_of(KIND)
