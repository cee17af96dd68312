"""After a start or takeover, intents whose spec changed reconcile before the others."""

from __future__ import annotations

import asyncio

from addon_manager.shell import firstpass
from addon_manager.shell.firstpass import FirstPass

A = ("MultiClusterInferenceService", "ns", "a")
B = ("MultiClusterInferenceService", "ns", "b")
C = ("ModelServing", "ns", "c")


def test_an_intent_is_changed_until_its_status_observes_its_generation() -> None:
    assert firstpass.changed({"metadata": {"generation": 2}, "status": {"observedGeneration": 1}})
    assert firstpass.changed({"metadata": {"generation": 1}})  # never reconciled
    assert not firstpass.changed({"metadata": {"generation": 3},
                                  "status": {"observedGeneration": 3}})
    # being deleted: its removal runs, never a daemon's reconcile that others could wait for
    assert not firstpass.changed({"metadata": {"generation": 2, "deletionTimestamp": "x"},
                                  "status": {"observedGeneration": 1}})
    # no generation (an object the API server never counted): changed, generation 0
    assert firstpass.changed({"metadata": {}, "status": {"observedGeneration": 1}})
    assert firstpass.generation({"metadata": {}}) == 0
    assert firstpass.generation({"metadata": {"generation": 4}}) == 4


def test_unchanged_intents_wait_for_every_changed_ones_first_reconcile() -> None:
    async def run() -> list[str]:
        order: list[str] = []
        gate = FirstPass()

        async def daemon(key: tuple[str, str, str], work: float) -> None:
            await gate.turn(key, lambda: [A, C])
            order.append(f"start {key[2]}")
            await asyncio.sleep(work)
            gate.reconciled(key)
            order.append(f"done {key[2]}")

        await asyncio.gather(daemon(B, 0), daemon(A, 0.02), daemon(C, 0.01))
        return order

    order = asyncio.run(run())
    assert order.index("start b") > order.index("done a")
    assert order.index("start b") > order.index("done c")
    assert order[:2] == ["start a", "start c"]


def test_nothing_waits_when_nothing_changed_and_a_missing_intent_waits_at_most_the_limit(
) -> None:
    async def run() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        quiet = FirstPass()
        start = loop.time()
        await quiet.turn(B, list)
        nothing = loop.time() - start
        gone = FirstPass(limit=0.05)  # A changed but its daemon never comes
        start = loop.time()
        await gone.turn(B, lambda: [A])
        await gone.turn(C, lambda: [B])  # asked once: later calls keep the first answer
        return nothing, loop.time() - start

    nothing, limited = asyncio.run(run())
    assert nothing < 0.01
    assert 0.05 <= limited < 1.0


def test_an_intent_that_changed_after_the_list_of_changed_ones_waits_for_no_one() -> None:
    async def run() -> tuple[bool, bool]:
        gate = FirstPass()
        await gate.turn(A, lambda: [A])  # the first pass: A, still before its reconcile
        created = asyncio.create_task(gate.turn(C, list, is_changed=True))  # new since
        unchanged = asyncio.create_task(gate.turn(B, list))
        for _ in range(5):
            await asyncio.sleep(0)
        done = created.done(), unchanged.done()
        gate.reconciled(A)
        await asyncio.wait_for(unchanged, 5)
        return done

    created, unchanged = asyncio.run(run())
    assert created and not unchanged
