"""Sharding (issue 35): intents to shards, shards to live replicas, and what a replica does
with the shard Leases as it observes them."""

from __future__ import annotations

from collections import Counter

from addon_manager.engine import sharding
from addon_manager.engine.sharding import Observed, decide, preferred, shard_of


def lease(holder: str, at: float = 0.0, transitions: int = 1, rv: str = "1") -> Observed:
    return Observed(holder, transitions, rv, at, 15.0)


def test_an_intent_always_lands_in_the_same_shard_and_shards_are_even() -> None:
    assert shard_of("team-a", "iris", 16) == shard_of("team-a", "iris", 16)
    assert shard_of("team-a", "iris", 1) == 0
    counts = Counter(shard_of(f"ns{i % 7}", f"model-{i}", 8) for i in range(8000))
    assert set(counts) == set(range(8))
    assert max(counts.values()) < 1.1 * 1000  # within 10 % of even


def test_a_replica_that_joins_or_dies_moves_only_its_share_of_the_shards() -> None:
    three = {k: preferred(k, ["a", "b", "c"]) for k in range(64)}
    assert set(three.values()) == {"a", "b", "c"}
    # "c" dies: only its shards move, each to one survivor
    two = {k: preferred(k, ["a", "b"]) for k in range(64)}
    assert all(two[k] == three[k] for k in range(64) if three[k] != "c")
    # "d" joins: it takes shards from the others and nothing moves between them
    four = {k: preferred(k, ["a", "b", "c", "d"]) for k in range(64)}
    assert all(four[k] in (three[k], "d") for k in range(64))
    assert 8 <= list(four.values()).count("d") <= 24
    assert preferred(3, []) == ""


def test_free_shards_are_acquired_by_their_preferred_replica_only() -> None:
    members = {"a": lease("a"), "b": lease("b")}
    got_a = decide("a", 8, members, {}, (), now=1.0)
    got_b = decide("b", 8, members, {}, (), now=1.0)
    assert sorted(got_a.acquire + got_b.acquire) == list(range(8))
    assert not set(got_a.acquire) & set(got_b.acquire)
    assert got_a.acquire == tuple(k for k in range(8) if preferred(k, ["a", "b"]) == "a")


def test_a_shard_a_live_replica_holds_is_waited_for_and_released_to_its_preferred() -> None:
    members = {"a": lease("a"), "b": lease("b")}
    theirs = [k for k in range(8) if preferred(k, ["a", "b"]) == "a"]
    # "b" held everything alone; "a" joined: b releases a's share, a waits until it has
    shards = {k: lease("b") for k in range(8)}
    b = decide("b", 8, members, shards, range(8), now=1.0)
    assert sorted(b.release) == theirs and sorted(b.renew + b.release) == list(range(8))
    a = decide("a", 8, members, shards, (), now=1.0)
    assert a.acquire == () and sorted(a.waiting) == theirs
    released = {**shards, **{k: lease("") for k in theirs}}
    assert sorted(decide("a", 8, members, released, (), now=2.0).acquire) == theirs


def test_a_dead_replicas_shards_go_to_the_survivors_once_its_leases_expire() -> None:
    members = {"a": lease("a", at=0.0), "b": lease("b", at=100.0)}
    mine_then = [k for k in range(8) if preferred(k, ["a", "b"]) == "a"]
    shards = {k: lease("a" if k in mine_then else "b", at=0.0 if k in mine_then else 100.0)
              for k in range(8)}
    # at 10 s "a" still counts (its member Lease not expired): nothing taken
    assert decide("b", 8, members, shards, [k for k in range(8) if k not in mine_then],
                  now=10.0).acquire == ()
    # at 16 s its member and shard Leases expired: "b" takes every one of them
    later = decide("b", 8, members, shards, [k for k in range(8) if k not in mine_then],
                   now=16.0)
    assert sorted(later.acquire) == mine_then
    assert sharding.live_replicas("b", members, 16.0) == {"b"}
    # and its member Lease is forgotten (deleted), not left for newcomers to wait on
    assert later.forget == ("a",)
    assert decide("b", 8, members, shards, (), now=10.0).forget == ()


def test_a_shard_released_or_held_under_our_own_name_is_acquired_again() -> None:
    # our own name on a Lease we do not hold (a restart with the same identity) is acquired
    # again, which moves its epoch: nothing written before the restart passes for ours
    members = {"a": lease("a")}
    got = decide("a", 2, members, {0: lease("a"), 1: lease("")}, (), now=1.0)
    assert got.acquire == (0, 1)


def test_lease_names_and_the_fence() -> None:
    assert sharding.fence(3, 7) == "3/7"
    assert sharding.shard_lease_name(3) == "model-serving-addon-manager-shard-3"
    assert sharding.member_lease_name("mgr-0") == "model-serving-addon-manager-member-mgr-0"


def test_a_sharded_replica_writes_its_epoch_on_every_work_and_names_itself_in_the_status(
) -> None:
    import asyncio

    from addon_api.common import ShardStatus
    from addon_manager.shell.reconcile import Reconciler
    from testbed.support.fake_hub import FakeHub
    from testbed.support.sealing import memory_sealer
    from tests.unit.test_namespace_policy_work import POLICY, msv

    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    held = ShardStatus(index=3, replica="mgr-1", epoch=7)
    asyncio.run(Reconciler(hub, hub, memory_sealer(), admin=POLICY).reconcile(
        "ModelServing", msv(), shard=held))
    written = [body for body in hub.bodies.values()]
    assert written and all(
        b["metadata"]["annotations"][sharding.FENCE_ANNOTATION] == "3/7" for b in written)
    assert hub.statuses["kserve"]["shard"] == {"index": 3, "replica": "mgr-1", "epoch": 7}
    # not sharded: no epoch, no shard in the status
    plain = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    asyncio.run(Reconciler(plain, plain, memory_sealer(), admin=POLICY).reconcile(
        "ModelServing", msv()))
    assert all(sharding.FENCE_ANNOTATION not in (b["metadata"].get("annotations") or {})
               for b in plain.bodies.values())
    assert "shard" not in plain.statuses["kserve"]


def test_a_write_the_hub_fences_off_leaves_the_status_to_the_shards_holder() -> None:
    import asyncio

    from addon_api.common import ShardStatus
    from addon_manager.shell.apply import WriteError
    from addon_manager.shell.reconcile import Reconciler
    from testbed.support.fake_hub import FakeHub
    from testbed.support.sealing import memory_sealer
    from tests.unit.test_namespace_policy_work import POLICY, msv

    class Fenced(FakeHub):
        async def apply_work(self, body: dict[str, object], *, force: bool,
                             holds: object = None) -> None:
            raise WriteError("admission webhook denied: written by a manager replica that no "
                             "longer holds shard 3/6 (its Lease ... is at epoch 7)", 403)

    hub = Fenced(placements={("ns", "p"): frozenset({"c1"})})
    out = asyncio.run(Reconciler(hub, hub, memory_sealer(), admin=POLICY).reconcile(
        "ModelServing", msv(), shard=ShardStatus(index=3, replica="old", epoch=6)))
    assert "kserve" not in hub.statuses  # no status claiming a failure it did not see
    assert not out.status_written


def test_a_shard_handed_over_mid_fan_out_sends_no_more_writes_and_no_status() -> None:
    """The replica handed the shard over while its fan-out waited: the writes whose turn
    came after are not sent (none reaches the hub's fence), and the status is the new
    holder's to write."""
    import asyncio

    from addon_api.common import ShardStatus
    from addon_manager.shell.reconcile import Reconciler
    from testbed.support.fake_hub import FakeHub
    from testbed.support.sealing import memory_sealer
    from tests.unit.test_namespace_policy_work import POLICY, msv

    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2", "c3"})})
    held = ShardStatus(index=3, replica="old", epoch=6)
    asked: list[bool] = []

    def holds() -> bool:  # handed over after the first write's turn
        asked.append(not asked)
        return asked[-1]

    out = asyncio.run(Reconciler(hub, hub, memory_sealer(), admin=POLICY).reconcile(
        "ModelServing", msv(), shard=held, holds=holds))
    assert [w[0] for w in hub.writes if w[0] in ("apply", "delete")] == ["apply"]
    assert len(asked) > 1  # asked per work write
    assert "kserve" not in hub.statuses and not out.status_written
    assert out.recheck_after is None


def test_after_a_gain_the_gained_shards_changed_intents_plan_before_the_others() -> None:
    import asyncio

    from addon_manager.shell.handlers import Sharding

    class Keeper:
        def epoch(self, shard: int) -> int:
            return 1

    count = 4
    names = [f"m{i}" for i in range(40)]
    key = {n: ("MultiClusterInferenceService", "ns", n) for n in names}
    by_shard: dict[int, list[str]] = {}
    for n in names:
        by_shard.setdefault(shard_of("ns", n, count), []).append(n)
    gained_shard, other_shard = sorted(by_shard)[:2]
    changed, unchanged = by_shard[gained_shard][:2]
    elsewhere = by_shard[other_shard][0]  # held from before the gain: not held back

    async def run() -> list[str]:
        shards = Sharding(Keeper(), count, "a")  # type: ignore[arg-type]
        shards.gain({gained_shard})
        order: list[str] = []

        async def daemon(name: str, work: float) -> None:
            await shards.first_turn(key[name], lambda: [key[changed], key[elsewhere]])
            order.append(f"start {name}")
            await asyncio.sleep(work)
            shards.takeover.reconciled(key[name])
            order.append(f"done {name}")

        await asyncio.gather(daemon(unchanged, 0), daemon(elsewhere, 0),
                             daemon(changed, 0.02))
        # a later gain ends the earlier pass: nobody waits on it for its limit
        shards.gain({gained_shard})
        waiting = asyncio.create_task(
            shards.first_turn(key[unchanged], lambda: [key[changed]]))
        await asyncio.sleep(0.01)
        assert not waiting.done()  # the changed one has not been through this pass
        shards.gain({other_shard})
        await asyncio.wait_for(waiting, 1.0)
        return order

    order = asyncio.run(run())
    assert order.index(f"start {elsewhere}") < order.index(f"done {changed}")
    assert order.index(f"start {changed}") < order.index(f"done {changed}") < order.index(
        f"start {unchanged}")
