"""The engine's parts on the fake hub: the kind registry, the pure plan, finish.

Every hub kind is planned here without a write: what the plan says it would write, delete,
pin and enable, and what each cluster's entry is made of. The reconcile tests
(test_manager_reconcile.py) cover the same rules through the executor.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import replace
from typing import Any

import pytest

from addon_api import constants as c
from addon_api import sealing
from addon_api import tenancy as api_tenancy
from addon_api.hub import HUB_RESOURCES
from addon_manager.engine import policy
from addon_manager.engine.plan import Executed, Plan, finish
from addon_manager.facts import naming
from addon_manager.facts.records import WorkFact
from addon_manager.kinds import registry, tenant_access
from addon_manager.shell.reconcile import Reconciler
from testbed.support.fake_hub import OPEN_POLICY, FakeHub
from testbed.support.sealing import memory_sealer
from tests.unit.test_manager_reconcile import isvc_body, msv_body, platform_ready, sc_body


def runtime_body() -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_SERVING_RUNTIME,
        "metadata": {"name": "rt", "namespace": "ns", "generation": 1},
        "spec": {
            "placementRef": {"name": "p"},
            "targetNamespace": "models",
            "template": {"containers": [{"name": "c", "image": "img:1"}],
                         "supportedModelFormats": [{"name": "sklearn"}]},
        },
    }


BODIES = {
    c.KIND_MODEL_SERVING: lambda: msv_body("kserve", "2026-01-01T00:00:00Z"),
    c.KIND_STORAGE_CONNECTION: sc_body,
    c.KIND_SERVING_RUNTIME: runtime_body,
    c.KIND_INFERENCE_SERVICE: isvc_body,
}


def publish_key(hub: FakeHub, cluster: str) -> bytes:
    """The agent of ``cluster`` publishes a key through its identity work; its private key."""
    private = sealing.generate_private_key()
    key = sealing.public_key_of(private)
    name = naming.IDENTITY_WORK_NAME
    planned = Reconciler(hub, hub, memory_sealer(),
                         admin=OPEN_POLICY).plan(c.KIND_STORAGE_CONNECTION,
                                                               sc_body())
    identity = next(a.work for a in planned.applies if a.what == "identity"
                    and a.work.cluster == cluster)
    hub.bodies[(cluster, name)] = identity.body
    fact = hub.works[(cluster, name)] = WorkFact(
        name=name, cluster=cluster, kind=naming.KIND_IDENTITY, intent_namespace="",
        intent_name="agent", render_hash=identity.render_hash, applied="True",
        identity_source=f"{c.AGENT_NAMESPACE}/{c.AGENT_IDENTITY_CONFIGMAP}",
        feedback=(("keyId", sealing.key_id(key)), ("publicKey", key)),
    )
    assert fact.owner == (naming.KIND_IDENTITY, "", "agent")
    return private


def ready_hub() -> FakeHub:
    """Two selected clusters where every kind can be sent: stack Available, key published,
    the Secret readable, the StorageConnection delivered."""
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})},
                  secrets={("ns", "creds"): {"access_key_id": "AK1"}})
    platform_ready(hub, "c1", "c2")
    for cl in ("c1", "c2"):
        publish_key(hub, cl)
        hub.works[(cl, "sc")] = WorkFact(
            name="sc", cluster=cl, kind=c.KIND_STORAGE_CONNECTION, intent_namespace="ns",
            intent_name="s3", render_hash="x", applied="True",
            feedback=(("phase", "Delivered"),))
    return hub


def plan_of(hub: FakeHub, kind: str, body: dict[str, Any] | None = None,
            admin: policy.Policy = OPEN_POLICY) -> Plan:
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=admin)
    return reconciler.plan(kind, body if body is not None else BODIES[kind]())


# The registry ---------------------------------------------------------------------------------


def test_every_hub_kind_has_one_spec_named_from_its_crd() -> None:
    assert [cls.crd.plural for cls in HUB_RESOURCES] == [s.plural for s in registry.KINDS.values()]
    assert set(registry.KINDS) == set(c.HUB_KINDS)
    for kind, spec in registry.KINDS.items():
        assert spec.kind == kind and spec.model.crd.plural == spec.plural
    assert registry.STACK_OWNERS == (c.KIND_MODEL_SERVING,)
    assert set(registry.STACK_HOLDERS) == {c.KIND_SERVING_RUNTIME, c.KIND_INFERENCE_SERVICE}
    assert set(registry.TENANT_KINDS) == set(c.HUB_KINDS) - {c.KIND_MODEL_SERVING}


def test_what_a_change_of_each_kind_of_work_wakes() -> None:
    woken = {k: sorted((kind, dep.same_namespace)
                       for kind, dep in registry.dependents(k, gone=True))
             for k in
             (*c.HUB_KINDS, registry.IDENTITY, registry.ACCESS)}
    assert woken[c.KIND_MODEL_SERVING] == [(c.KIND_INFERENCE_SERVICE, False),
                                           (c.KIND_SERVING_RUNTIME, False)]
    # a stack's removal waits for what holds it
    assert woken[c.KIND_INFERENCE_SERVICE] == [(c.KIND_MODEL_SERVING, False)]
    # ... and a model's first work waits for the runtimes of its namespace it would run on
    assert woken[c.KIND_SERVING_RUNTIME] == [(c.KIND_MODEL_SERVING, False),
                                             (c.KIND_INFERENCE_SERVICE, True)]
    assert woken[c.KIND_STORAGE_CONNECTION] == [(c.KIND_INFERENCE_SERVICE, False)]
    assert woken[registry.IDENTITY] == [(c.KIND_STORAGE_CONNECTION, False)]
    assert woken[registry.ACCESS] == sorted((k, True) for k in registry.TENANT_KINDS)
    assert registry.ACCESS == api_tenancy.ACCESS_KIND
    # a model's or runtime's work that appears or changes does not concern the stack's owner
    assert registry.dependents(c.KIND_INFERENCE_SERVICE) == []
    assert [(k, d.same_namespace) for k, d in registry.dependents(c.KIND_SERVING_RUNTIME)] == [
        (c.KIND_INFERENCE_SERVICE, True)]


# The plan is pure -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", c.HUB_KINDS)
def test_planning_writes_nothing_and_says_the_same_twice(kind: str) -> None:
    hub = ready_hub()
    before = copy.deepcopy(hub.works)
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    first = reconciler.plan(kind, BODIES[kind]())
    second = reconciler.plan(kind, BODIES[kind]())
    assert hub.writes == [] and hub.works == before and hub.addons == set()
    assert reconciler.sealer.pinned("c1") is None  # a pin is planned, not recorded
    assert [(a.what, a.work.cluster, a.work.render_hash) for a in first.applies] == [
        (a.what, a.work.cluster, a.work.render_hash) for a in second.applies]
    own = [a for a in first.applies if a.what == "apply"]
    assert sorted(a.work.cluster for a in own) == ["c1", "c2"]
    assert all(a.work.name == naming.work_name(kind, "ns", BODIES[kind]()["metadata"]["name"])
               for a in own)
    assert first.invalid is None and first.deletes == [] and first.errors == []


def test_a_stack_plan_enables_the_addon_where_it_is_missing_only() -> None:
    hub = ready_hub()
    hub.addons.add("c1")
    assert plan_of(hub, c.KIND_MODEL_SERVING).addons == ["c2"]
    other = plan_of(hub, c.KIND_INFERENCE_SERVICE)
    assert other.addons == []  # only the stack's owner enables the add-on


def test_a_storage_plan_pins_the_published_key_and_names_the_secret() -> None:
    hub = ready_hub()
    out = plan_of(hub, c.KIND_STORAGE_CONNECTION)
    assert set(out.pins) == {"c1", "c2"}
    own = [a for a in out.applies if a.what == "apply"]
    assert {a.secret for a in own} == {"creds"}
    assert all(a.work.seal_inputs is not None for a in own)
    assert [a for a in out.applies if a.what == "identity"] == []  # identity works are current


def test_a_storage_plan_without_a_key_asks_for_it_and_waits() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})},
                  secrets={("ns", "creds"): {"access_key_id": "AK1"}})
    out = plan_of(hub, c.KIND_STORAGE_CONNECTION)
    assert [(a.what, a.work.name) for a in out.applies] == [
        ("identity", naming.IDENTITY_WORK_NAME)]
    assert [w.reason for w in out.inputs["c1"].waits] == ["WaitingForAgentKey"]
    assert out.pins == {}


def test_gates_hold_runtimes_and_models_back_until_what_they_need_is_there() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    runtime = plan_of(hub, c.KIND_SERVING_RUNTIME)
    assert runtime.applies == [] and runtime.inputs["c1"].waits[0].reason == "WaitingForPlatform"
    platform_ready(hub, "c1")
    assert [a.what for a in plan_of(hub, c.KIND_SERVING_RUNTIME).applies] == ["apply"]
    model = plan_of(hub, c.KIND_INFERENCE_SERVICE, isvc_body(storageConnections=["s3"]))
    assert model.applies == []
    assert [w.reason for w in model.inputs["c1"].waits] == ["WaitingForStorage"]


def test_a_tenant_plan_writes_its_access_first_and_waits_for_the_grant() -> None:
    hub = ready_hub()
    team = policy.Policy(namespaces=api_tenancy.parse("ns=ns,models"))
    out = plan_of(hub, c.KIND_SERVING_RUNTIME, admin=team)
    access = [a for a in out.applies if a.what == "access"]
    assert sorted(a.work.cluster for a in access) == ["c1", "c2"]
    assert all(a.kind == tenant_access.ACCESS_KIND for a in access)
    assert [a for a in out.applies if a.what == "apply"] == []  # never before the grant
    assert {w.reason for item in out.inputs.values() for w in item.waits} == {
        tenant_access.WAITING_FOR_ACCESS}


def test_a_stack_is_not_removed_under_what_holds_it() -> None:
    hub = ready_hub()
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    body = msv_body("kserve", "2026-01-01T00:00:00Z")
    asyncio.run(reconciler.reconcile(c.KIND_MODEL_SERVING, body))
    asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body()))
    hub.placements[("ns", "p")] = frozenset({"c1"})  # c2 leaves
    out = reconciler.plan(c.KIND_MODEL_SERVING, body)
    assert set(out.blocked) == {"c2"} and out.deletes == []
    assert out.blocked["c2"] == [f"{c.KIND_INFERENCE_SERVICE} ns/iris"]
    isvc_plan = reconciler.plan(c.KIND_INFERENCE_SERVICE, isvc_body())
    assert [d.work.cluster for d in isvc_plan.deletes] == ["c2"]  # the model goes first


def test_an_invalid_or_refused_intent_plans_no_write() -> None:
    hub = ready_hub()
    bad = isvc_body(deploymentMode="Serverless")
    out = plan_of(hub, c.KIND_INFERENCE_SERVICE, bad)
    assert out.invalid is not None and out.invalid[0] == "InvalidSpec"
    assert out.applies == [] and out.deletes == [] and out.inputs == {}
    body = msv_body("kserve", "2026-01-01T00:00:00Z")
    body["spec"]["devFlags"] = {"images": {"kserve-controller-manager": "example.com/k:1"}}
    refused = plan_of(hub, c.KIND_MODEL_SERVING, body, admin=policy.Policy())
    assert refused.invalid is not None and refused.invalid[0] == policy.REASON_DEV_FLAGS
    assert refused.errors == [policy.REASON_DEV_FLAGS] and refused.applies == []


# finish -----------------------------------------------------------------------------------------


def test_finish_shows_failed_writes_and_sent_deletes() -> None:
    hub = ready_hub()
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    out = reconciler.plan(c.KIND_INFERENCE_SERVICE, isvc_body())
    now = reconciler.snapshot().now
    failed = finish(out, Executed(failed={"c2": ("ApplyFailed", "HTTP 500")}), now, 60)
    entries = {e.cluster: e for e in failed.status.clusters}
    assert (entries["c2"].phase, entries["c2"].reason) == ("Failed", "ApplyFailed")
    assert failed.status.phase == "Degraded"
    work = WorkFact(name="w", cluster="c3", kind=c.KIND_INFERENCE_SERVICE, intent_namespace="ns",
                    intent_name="iris", render_hash="x", applied="True")
    gone = replace(out, existing={**out.existing, "c3": work})
    going = finish(gone, Executed(going={"c3"}), now, 60)
    entry = next(e for e in going.status.clusters if e.cluster == "c3")
    assert (entry.phase, entry.reason) == ("Removing", "WorkDeleting")


def test_clusters_the_same_overrides_select_share_one_validated_spec() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2", "c3"})},
                  labels={"c2": {"tier": "gpu"}})
    platform_ready(hub, "c1", "c2", "c3")
    body = isvc_body(overrides=[{"clusterSelector": {"matchLabels": {"tier": "gpu"}},
                                 "patch": {"template": {"predictor": {"minReplicas": 3}}}}])
    out = plan_of(hub, c.KIND_INFERENCE_SERVICE, body)
    specs = {a.work.cluster: a.work.body["spec"]["workload"]["manifests"][0]["spec"]
             for a in out.applies}
    assert specs["c1"] is specs["c3"]  # validated once for both
    assert specs["c2"]["predictor"]["minReplicas"] == 3
    assert "minReplicas" not in specs["c1"]["predictor"]
    hashes = {a.work.cluster: a.work.render_hash for a in out.applies}
    assert len(set(hashes.values())) == 3  # each cluster's work is its own


def test_a_write_is_trusted_until_the_facts_show_a_version_at_least_as_new() -> None:
    from addon_manager.engine.plan import WATCH_GRACE, Recent
    from addon_manager.kinds import render
    from addon_manager.shell.apply import resource_version_of

    work = WorkFact(name="w", cluster="c1", kind=c.KIND_INFERENCE_SERVICE,
                    intent_namespace="ns", intent_name="iris", render_hash="old",
                    resource_version=100)
    rw = render.RenderedWork("w", "c1", {}, "new")
    later = 1000.0 + WATCH_GRACE * 4  # long after the write: the grace alone has run out

    def recent(version: int) -> Recent:
        return Recent({("c1", "w"): ("new", 1000.0, version)}, {}, {}, {}, later)

    # The facts predate our write (a list that began before it): no second write.
    assert not recent(150).needs_write(rw, work)
    # The facts show a newer version that still differs (someone changed it back): write.
    assert recent(150).needs_write(rw, replace(work, resource_version=160))
    # No version known: the watch grace decides, as before.
    assert recent(0).needs_write(rw, work)
    assert not Recent({("c1", "w"): ("new", later - 1, 0)}, {}, {}, {}, later).needs_write(
        rw, work)
    body = (b'{"kind":"ManifestWork","metadata":{"name":"w","resourceVersion":"4711",'
            b'"generation":2},"spec":{"x":{"resourceVersion":"1"}}}')
    assert resource_version_of(body) == 4711 and resource_version_of(b"{}") is None
