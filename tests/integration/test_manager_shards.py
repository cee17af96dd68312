"""Sharded managers (issue 35): every replica acts on the shards it holds; a replica that dies
loses its shards to the others within the Lease's duration, one that stops cleanly at once,
and one that joins takes its share; each intent's works and status are written by the holder
of its shard only, every work carrying the shard's epoch."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from addon_api import constants as c
from addon_manager.engine import sharding
from testbed import chart, identities
from testbed.fleet import Testbed
from testbed.support.manager import (
    Manager,
    exists,
    get_json,
    inference_service,
    manager_identity,
    model_serving,
    placement,
    prepare,
    set_platform_phase,
    works,
)
from testbed.support.waiting import eventually

LEASE_NS = identities.MANAGER_NAMESPACE
SHARDS = 8
LEASE = 10


def _replica(testbed: Testbed, tmp_path: Path, name: str) -> Manager:
    return Manager(
        manager_identity(testbed), tmp_path / f"{name}.log", "--no-addon-enablement",
        f"--shards={SHARDS}", f"--leader-election-namespace={LEASE_NS}",
        f"--leader-election-identity={name}", f"--lease-duration={LEASE}",
    ).start()


@pytest.fixture
def replicas(testbed: Testbed) -> Iterator[dict[str, Manager]]:
    """Replicas started on demand (as the chart's ServiceAccount), with the chart's fence
    admission policy on the hub; stopped (and the policy removed) afterwards."""
    prepare(testbed)
    fence = [o for o in chart.render(f"manager.shards={SHARDS}", namespace=LEASE_NS)
             if o["kind"].startswith("ValidatingAdmissionPolicy")
             and o["metadata"]["name"].endswith("-shard-fence")]
    assert [o["kind"] for o in fence] == ["ValidatingAdmissionPolicy",
                                          "ValidatingAdmissionPolicyBinding"]
    testbed.hub.apply_objects(fence)
    started: dict[str, Manager] = {}
    yield started
    for mgr in started.values():
        mgr.stop()
        mgr.print_tail()
    for obj in fence:
        testbed.hub.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"],
                            "--ignore-not-found")


def _models(ns: str, replicas: list[str], count: int) -> dict[str, str]:
    """``count`` model names whose shards spread over ``replicas`` (at least two each),
    with the replica that should hold each."""
    out: dict[str, str] = {}
    i = 0
    while len(out) < count or min(list(out.values()).count(r) for r in replicas) < 2:
        name = f"m{i}"
        out[name] = sharding.preferred(sharding.shard_of(ns, name, SHARDS), replicas)
        i += 1
    return out


def _shard(hub: Any, resource: str, name: str, ns: str) -> dict[str, Any]:
    return dict((get_json(hub, resource, name, "-n", ns).get("status") or {}).get("shard") or {})


def _held(mgr: Manager) -> set[str]:
    """The intents whose shard the replica says it holds (its metric)."""
    return {key.split('name="')[1].split('"')[0] for key, v in mgr.metrics().items()
            if key.startswith("model_serving_intent_shard_held{") and v == 1}


def _released_at_stop(mgr: Manager) -> set[int]:
    """The shards the replica's log says it released when it was stopped cleanly."""
    said = re.findall(r"stopped: released shards \[([0-9, ]*)\]", mgr.log_path.read_text())
    assert said, f"{mgr.log_path} has no 'stopped: released shards' line"
    return {int(x) for x in said[-1].split(",") if x.strip()}


def _fences(hub: Any, ns: str, name: str) -> set[str]:
    return {w["metadata"]["annotations"].get(sharding.FENCE_ANNOTATION, "")
            for w in works(hub, ns, name, c.KIND_INFERENCE_SERVICE).values()}


def test_replicas_split_the_intents_and_hand_them_over(
    testbed: Testbed, hub_namespace: str, replicas: dict[str, Manager], tmp_path: Path,
) -> None:
    hub, spoke, ns = testbed.hub, testbed.spokes[0], hub_namespace
    label = f"sh-{uuid.uuid4().hex[:6]}"
    hub.kubectl("label", "managedcluster", spoke.name, f"{label}=yes", "--overwrite")
    for name in ("a", "b"):
        replicas[name] = _replica(testbed, tmp_path, name)
    models = _models(ns, ["a", "b"], 6)
    try:
        hub.apply_objects([placement("p", ns, {label: "yes"}), model_serving("stack", ns, "p"),
                           *(inference_service(m, ns, "p") for m in models)])
        eventually(lambda: exists(spoke, "servingplatform", "model-serving"), timeout=90)
        set_platform_phase(spoke, "Available")

        # Each model is held by the replica its shard's Lease names; its works carry its
        # shard's epoch (an earlier one when the first replica up wrote them before the
        # second took the shard over: a handover rewrites nothing unchanged).
        def split(expected: dict[str, str]) -> bool:
            for m, replica in expected.items():
                shard = _shard(hub, "mcisvc", m, ns)
                if shard.get("replica") != replica:
                    return False
                fences = _fences(hub, ns, m)
                if not fences or not fences <= {
                        f"{shard['index']}/{e}" for e in range(1, shard["epoch"] + 1)}:
                    return False
            return True

        eventually(lambda: split(models), timeout=90)
        for name, mgr in replicas.items():  # each replica's metric lists exactly its models
            mine = {m for m, r in models.items() if r == name}
            eventually(lambda mgr=mgr, mine=mine: _held(mgr) & set(models) == mine, timeout=10)
        lease = get_json(hub, "lease", sharding.shard_lease_name(
            sharding.shard_of(ns, "m0", SHARDS)), "-n", LEASE_NS)
        assert lease["spec"]["holderIdentity"] == models["m0"]

        # "a" dies without a word: "b" takes its shards once their Leases expire, at a new
        # epoch, and writes a's models' next change.
        before = {m: _shard(hub, "mcisvc", m, ns) for m in models}
        hashes = {m: {w["metadata"]["annotations"][c.ANNOTATION_RENDER_HASH]
                      for w in works(hub, ns, m, c.KIND_INFERENCE_SERVICE).values()}
                  for m in models}
        replicas["a"].kill()
        killed = time.time()
        eventually(lambda: all(_shard(hub, "mcisvc", m, ns).get("replica") == "b"
                               for m in models), timeout=60)
        print(f"b holds a's shards {time.time() - killed:.1f}s after a was killed "
              f"(Lease {LEASE}s)")
        # b took each of a's shards once its Lease ran out (at most LEASE after the kill) and
        # its next round came: by the Leases' acquireTime, not this test's polling.
        for index in {sharding.shard_of(ns, m, SHARDS) for m, r in models.items() if r == "a"}:
            lease = get_json(hub, "lease", sharding.shard_lease_name(index), "-n", LEASE_NS)
            acquired = datetime.fromisoformat(lease["spec"]["acquireTime"]).timestamp()
            assert acquired - killed < 2 * LEASE, (index, acquired - killed)
        # the dead replica's member Lease went with its shards: a replica that starts later
        # does not count "a" among the living (and wait a Lease for it), nor does it linger
        assert not exists(hub, "lease", sharding.member_lease_name("a"), "-n", LEASE_NS)
        for m, replica in models.items():
            now = _shard(hub, "mcisvc", m, ns)
            assert now["epoch"] == before[m]["epoch"] + (1 if replica == "a" else 0), (m, now)
            # nothing was rewritten by the takeover: the works are what a wrote
            assert {w["metadata"]["annotations"][c.ANNOTATION_RENDER_HASH]
                    for w in works(hub, ns, m, c.KIND_INFERENCE_SERVICE).values()} == hashes[m]
        # A write with a's old epoch (a replica paused past its renew deadline, resuming
        # mid-write) is refused by the hub, whoever sends it.
        moved = next(m for m, r in models.items() if r == "a")
        shard = before[moved]
        (work,) = works(hub, ns, moved, c.KIND_INFERENCE_SERVICE).values()
        stale = hub.kubectl(
            "patch", "manifestwork", work["metadata"]["name"], "-n",
            work["metadata"]["namespace"], "--type=merge", "-p", json.dumps({
                "metadata": {"annotations": {
                    sharding.FENCE_ANNOTATION: f"{shard['index']}/{shard['epoch']}"}},
                "spec": {"deleteOption": {"propagationPolicy": "Orphan"}}}), check=False)
        assert stale.returncode != 0
        assert "no longer holds shard" in stale.stderr, stale.stderr
        hub.kubectl("patch", "mcisvc", moved, "-n", ns, "--type=merge", "-p", json.dumps(
            {"spec": {"template": {"predictor": {"minReplicas": 2}}}}))
        eventually(lambda: _fences(hub, ns, moved) == {
            f"{shard['index']}/{shard['epoch'] + 1}"}, timeout=60)

        # "c" joins: it takes its share from "b" (a release, then its acquisition), and a
        # clean stop of "b" hands the rest to "c" at once, without waiting for the Lease.
        replicas["c"] = _replica(testbed, tmp_path, "c")
        joined = {m: sharding.preferred(sharding.shard_of(ns, m, SHARDS), ["b", "c"])
                  for m in models}
        eventually(lambda: all(_shard(hub, "mcisvc", m, ns).get("replica") == r
                               for m, r in joined.items()), timeout=60)
        b_shards = {sharding.shard_of(ns, m, SHARDS) for m, r in joined.items() if r == "b"}
        assert b_shards, joined
        stopped = time.time()
        replicas["b"].stop()
        eventually(lambda: all(_shard(hub, "mcisvc", m, ns).get("replica") == "c"
                               for m in models), timeout=60)
        print(f"c holds every shard {time.time() - stopped:.1f}s after b stopped")
        # Handed back, not expired: b said it released its shards as it stopped, and c's
        # acquisition of each (the Lease's acquireTime, c's clock, this machine's) came sooner
        # than a Lease could have run out (b renews every 2 s, so its last renewal ran out
        # LEASE - 2 s after the stop at the earliest). Judged by what the Leases record, not by
        # how long this test's polling took to see it (a busy machine slows the polling).
        assert b_shards <= _released_at_stop(replicas["b"])
        for index in b_shards:
            lease = get_json(hub, "lease", sharding.shard_lease_name(index), "-n", LEASE_NS)
            assert lease["spec"]["holderIdentity"] == "c", lease
            acquired = datetime.fromisoformat(lease["spec"]["acquireTime"]).timestamp()
            assert acquired - stopped < LEASE - 2, (index, acquired - stopped)
        assert not exists(hub, "lease", sharding.member_lease_name("b"), "-n", LEASE_NS)

        # Removal by the holder: finalizers go, works go.
        hub.kubectl("delete", "mcisvc", "--all", "-n", ns, "--wait=false")
        eventually(lambda: all(not exists(hub, "mcisvc", m, "-n", ns) for m in models),
                   timeout=90)
        assert all(works(hub, ns, m, c.KIND_INFERENCE_SERVICE) == {} for m in models)
    finally:
        hub.kubectl("delete", "mcisvc,msv", "--all", "-n", ns, "--wait=false", check=False)
        live = [m for m in replicas.values() if m.proc is not None and m.proc.poll() is None]
        if live:
            eventually(lambda: not exists(hub, "msv", "stack", "-n", ns), timeout=120)
        hub.kubectl("label", "managedcluster", spoke.name, f"{label}-", check=False)
