"""Who a ManifestWork change wakes: the owner and the kinds that depend on the work's kind."""

from __future__ import annotations

import asyncio
from typing import Any

from addon_api import constants as c
from addon_api import tenancy
from addon_manager.facts import naming
from addon_manager.facts.records import WorkFact
from addon_manager.shell import handlers
from addon_manager.shell.reconcile import Reconciler
from testbed.support.fake_hub import FakeHub
from testbed.support.sealing import memory_sealer

INTENTS = {
    c.KIND_MODEL_SERVING: [("team-a", "kserve")],
    c.KIND_STORAGE_CONNECTION: [("team-a", "s3"), ("team-b", "s3")],
    c.KIND_SERVING_RUNTIME: [("team-a", "rt"), ("team-b", "rt")],
    c.KIND_INFERENCE_SERVICE: [("team-a", "iris"), ("team-b", "iris")],
}


def _state() -> handlers.ManagerState:
    indexes: dict[str, Any] = {name: {} for name in handlers.INDEX_NAMES}
    for kind, keys in INTENTS.items():
        plural = handlers.KINDS[kind].plural
        indexes[f"{plural}_index"] = {("all",): [(ns, name, "", "p", "") for ns, name in keys]}
    state = handlers.ManagerState()
    hub = FakeHub()
    state.reconciler = Reconciler(handlers.IndexWorld(indexes, state), hub, memory_sealer())
    return state


def _woken(kind: str, namespace: str, name: str, *, gone: bool = False,
           waits: dict[tuple[str, str, str], frozenset[str]] | None = None,
           ) -> set[tuple[str, str, str]]:
    state = _state()
    assert state.reconciler is not None
    state.reconciler.removal_waits.update(waits or {})
    fact = WorkFact(name="w", cluster="c1", kind=kind, intent_namespace=namespace,
                    intent_name=name, render_hash="x")
    handlers.work_changed(state, fact if gone else None, None if gone else fact)
    return {key for key, wake in state.wakeups.intents.items() if wake.event.is_set()}


def test_a_stack_work_wakes_its_owner_and_what_it_gates() -> None:
    woken = _woken(c.KIND_MODEL_SERVING, "team-a", "kserve")
    assert woken == {(c.KIND_MODEL_SERVING, "team-a", "kserve"),
                     *((k, ns, n) for k in (c.KIND_SERVING_RUNTIME, c.KIND_INFERENCE_SERVICE)
                       for ns, n in INTENTS[k])}


def test_a_model_work_that_goes_wakes_the_stack_whose_removal_waits_for_it() -> None:
    stack = (c.KIND_MODEL_SERVING, "team-a", "kserve")
    assert _woken(c.KIND_INFERENCE_SERVICE, "team-b", "iris", gone=True,
                  waits={stack: frozenset({"c1", "c2"})}) == {
        (c.KIND_INFERENCE_SERVICE, "team-b", "iris"), stack}
    # a stack whose removal waits elsewhere, or nowhere, sleeps on (a model's delete fan-out
    # to thousands of clusters does not replan it once per second)
    for waits in ({stack: frozenset({"c2"})}, {}):
        assert _woken(c.KIND_INFERENCE_SERVICE, "team-b", "iris", gone=True, waits=waits) == {
            (c.KIND_INFERENCE_SERVICE, "team-b", "iris")}
    # one that appears or changes (a fan-out, status feedback) wakes its owner only
    assert _woken(c.KIND_INFERENCE_SERVICE, "team-b", "iris") == {
        (c.KIND_INFERENCE_SERVICE, "team-b", "iris")}


def test_a_runtime_work_wakes_its_owner_and_the_models_of_its_namespace() -> None:
    """The models of its namespace may wait for it to be Available (WaitingForServingRuntime);
    another namespace's models never resolve to it."""
    assert _woken(c.KIND_SERVING_RUNTIME, "team-b", "rt") == {
        (c.KIND_SERVING_RUNTIME, "team-b", "rt"), (c.KIND_INFERENCE_SERVICE, "team-b", "iris")}


def test_an_access_work_wakes_its_own_namespace_tenant_intents_only() -> None:
    woken = _woken(tenancy.ACCESS_KIND, "team-b", "access")
    assert woken == {(k, "team-b", n) for k in INTENTS if k != c.KIND_MODEL_SERVING
                     for ns, n in INTENTS[k] if ns == "team-b"}


def test_an_identity_work_wakes_the_storage_connections_and_collects_a_leftover() -> None:
    state = _state()
    fact = WorkFact(name=naming.IDENTITY_WORK_NAME, cluster="c9", kind=naming.KIND_IDENTITY,
                    intent_namespace="", intent_name="agent", render_hash="x")
    state.works.put(fact)

    async def changed() -> None:
        handlers.work_changed(state, None, fact)
        await asyncio.gather(*state.background)

    asyncio.run(changed())
    assert {key for key, w in state.wakeups.intents.items() if w.event.is_set()} == {
        (c.KIND_STORAGE_CONNECTION, ns, n) for ns, n in INTENTS[c.KIND_STORAGE_CONNECTION]}
    assert state.reconciler is not None
    assert ("delete", f"c9/{naming.IDENTITY_WORK_NAME}") in state.reconciler.writer.writes  # type: ignore[attr-defined]


def test_a_burst_of_helper_work_events_is_judged_once(monkeypatch: Any) -> None:
    """A fan-out's thousands of identity-work events ask whether each is needed once, all
    clusters together: the question reads every intent's selection (asked once per event, it
    took 38 of the manager's 138 busy seconds in a 10,000-cluster run)."""
    import dataclasses

    from addon_manager.kinds import registry

    helper = registry.HELPERS[naming.KIND_IDENTITY]
    asked: list[frozenset[str]] = []

    def needed_on(world: Any, clusters: Any) -> frozenset[str]:
        asked.append(frozenset(clusters))
        return frozenset(clusters)  # every one is needed: nothing collected

    monkeypatch.setitem(registry.HELPERS, naming.KIND_IDENTITY,
                        dataclasses.replace(helper, needed_on=needed_on))
    monkeypatch.setattr(handlers, "HELPER_CHECK_DELAY", 0.05)
    state = _state()

    async def burst() -> None:
        for i in range(500):
            handlers.work_changed(state, None, WorkFact(
                name=naming.IDENTITY_WORK_NAME, cluster=f"c{i}", kind=naming.KIND_IDENTITY,
                intent_namespace="", intent_name="agent", render_hash="x"))
        await asyncio.gather(*state.background)

    asyncio.run(burst())
    assert asked == [frozenset(f"c{i}" for i in range(500))]
    assert state.reconciler is not None
    assert not state.reconciler.writer.writes  # type: ignore[attr-defined]


def test_an_edit_ends_the_pause_between_reconciles_and_feedback_does_not() -> None:
    async def scenario() -> None:
        wakeups = handlers.Wakeups()
        key = (c.KIND_INFERENCE_SERVICE, "team-a", "iris")

        async def ends_pause(generation: int) -> bool:
            pause = asyncio.create_task(wakeups.pause(key, 3600))
            await asyncio.sleep(0)  # the pause is waiting
            wakeups.seen(key, generation)
            for _ in range(5):
                await asyncio.sleep(0)
            ended = pause.done()
            pause.cancel()
            return ended

        assert not await ends_pause(1)  # before the first reconcile: nothing to compare with
        wakeups.reconciling(key, 1)
        assert not await ends_pause(1)  # a status write or a work's feedback: same generation
        assert await ends_pause(2)  # the user changed the spec
        wakeups.reconciling(key, 2)
        assert not await ends_pause(2)  # the edit was reconciled: pauses as before

    asyncio.run(scenario())


def test_a_gone_intent_is_forgotten() -> None:
    wakeups = handlers.Wakeups()
    key = (c.KIND_INFERENCE_SERVICE, "team-a", "iris")
    wakeups.poke([key])
    wakeups.reconciling(key, 3)
    wakeups.seen(key, 4)
    wakeups.forget(key)
    assert not wakeups.intents
