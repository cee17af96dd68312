"""Sharded managers under faults (issue 35): replicas killed, frozen and stopped while the
intents change; after each fault every intent's works are exactly the pure render, written by
the replica that holds its shard now, at that shard's epoch.

Three replicas split six ModelServings (``--shards=6``), each on a fleet of spoke-less
clusters of its own. Round by round a replica is SIGKILLed halfway through a fan-out (the
survivors write what it had not, and nothing twice: each work's generation moves once),
then another SIGSTOPped (a replica cut off from the hub: its Leases expire while it believes
nothing changed) and woken after the others took its shards, then a third stopped cleanly;
between a fault and the check every intent's spec changes, so the new holders must fan out.
The hub's fence policy (the chart's ``-shard-fence``) is installed: a frozen replica that
resumed and wrote with its old epoch would be refused, and the test requires that it never
even tried.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from addon_api import constants as c
from addon_api.hub import ModelServing
from addon_manager.engine import sharding
from testbed import chart, identities
from testbed.fleet import Testbed
from testbed.support.fake_fleet import FakeFleet, exact, fake_fleet, fleet_placement, intent_works
from testbed.support.manager import Manager, manager_identity, model_serving
from testbed.support.waiting import eventually
from tests.reliability.conftest import Scale, current_scale

pytestmark = pytest.mark.timeout(current_scale().timeout)

SHARDS = 6
LEASE = 6
REPLICAS = ("a", "b", "c")
INTENTS = 6
CLUSTERS = 15
"""Clusters per intent (each intent on a fleet of its own: one stack owner per cluster)."""


@pytest.fixture
def fence(hub_testbed: Testbed) -> Iterator[None]:
    """The chart's shard fence policy on the hub (params: the Leases of the managers' ns)."""
    objs = [o for o in chart.render(f"manager.shards={SHARDS}",
                                    namespace=identities.MANAGER_NAMESPACE)
            if o["metadata"]["name"].endswith("-shard-fence")]
    assert len(objs) == 2
    hub_testbed.hub.apply_objects(objs)
    yield
    for obj in objs:
        hub_testbed.hub.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"],
                                "--ignore-not-found")


@pytest.fixture
def fleets(hub_testbed: Testbed) -> Iterator[list[FakeFleet]]:
    """One spoke-less fleet per intent."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(fake_fleet(hub_testbed)) for _ in range(INTENTS)]


def _hold(ns: str, intents: list[str], clusters: set[str]) -> list[dict[str, Any]]:
    """A policy refusing every write of ``intents``' works to ``clusters`` (a fault: a
    fan-out that gets only part of the way)."""
    label = c.LABEL_INTENT_NAME
    ns_label = c.LABEL_INTENT_NAMESPACE
    labels = "object.metadata.labels"
    matched = (f"object.metadata.namespace in {json.dumps(sorted(clusters))}"
               f" && has(object.metadata.labels) && '{label}' in {labels}"
               f" && '{ns_label}' in {labels} && {labels}['{ns_label}'] == '{ns}'"
               f" && {labels}['{label}'] in {json.dumps(sorted(intents))}")
    name = f"hold-{ns}"
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": name},
         "spec": {"failurePolicy": "Fail",
                  "matchConstraints": {"resourceRules": [{
                      "apiGroups": ["work.open-cluster-management.io"], "apiVersions": ["v1"],
                      "operations": ["CREATE", "UPDATE"], "resources": ["manifestworks"]}]},
                  "matchConditions": [{"name": "held", "expression": matched}],
                  "validations": [{"expression": "false",
                                   "message": "held by the test: a fan-out stopped midway"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1",
         "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
         "spec": {"policyName": name, "validationActions": ["Deny"]}},
    ]


def _names(ns: str) -> list[str]:
    """Intent names whose shards give each replica at least one while all three live."""
    names: list[str] = []
    i = 0
    while True:
        names.append(f"ms{i}")
        i += 1
        if len(names) >= INTENTS:
            held = {sharding.preferred(sharding.shard_of(ns, n, SHARDS), REPLICAS)
                    for n in names[-INTENTS:]}
            if held == set(REPLICAS):
                return names[-INTENTS:]


def test_shards_survive_kills_freezes_and_stops(
    hub_testbed: Testbed, namespace: str, fleets: list[FakeFleet], fence: None,
    scale: Scale, tmp_path: Path,
) -> None:
    del fence, scale
    hub, ns = hub_testbed.hub, namespace
    custom = client.CustomObjectsApi(fleets[0].api)
    names = _names(ns)
    members: dict[str, set[str]] = {}
    for name, fleet in zip(names, fleets, strict=True):
        members[name] = set(fleet.create(CLUSTERS, f"{name}-{fleet.label[-6:]}"))
    hub.apply_objects([o for name, fleet in zip(names, fleets, strict=True) for o in (
        fleet_placement(ns, fleet.label, name=name),
        model_serving(name, ns, name, servingNamespaces=["models"]))])

    def replica(name: str) -> Manager:
        return Manager(
            manager_identity(hub_testbed), tmp_path / f"{name}.log", "--no-addon-enablement",
            f"--shards={SHARDS}", f"--leader-election-namespace={identities.MANAGER_NAMESPACE}",
            f"--leader-election-identity={name}", f"--lease-duration={LEASE}").start()

    def intent(name: str) -> ModelServing:
        return ModelServing.from_object(json.loads(
            hub.kubectl("get", "msv", name, "-n", ns, "-o", "json").stdout))

    def settled(live: set[str]) -> bool:
        """Every intent exact, held by a live replica, every work at its shard's epoch."""
        for name in names:
            got = intent(name)
            shard = got.status.shard if got.status else None
            if shard is None or shard.replica not in live:
                return False
            if got.status is None or got.status.observed_generation != got.metadata.generation:
                return False
            exact(custom, got, members[name])
            fences = {w["metadata"]["annotations"].get(sharding.FENCE_ANNOTATION)
                      for w in intent_works(custom, ns, name)}
            written = {f"{shard.index}/{e}" for e in range(1, shard.epoch + 1)}
            assert fences <= written, (name, fences, shard)  # never a future or foreign epoch
        return True

    def change(round_: int) -> None:
        for name in names:
            hub.kubectl("patch", "msv", name, "-n", ns, "--type=merge", "-p", json.dumps(
                {"spec": {"servingNamespaces": ["models", f"round-{round_}"]}}))

    managers = {name: replica(name) for name in REPLICAS}
    try:
        eventually(lambda: settled(set(REPLICAS)), timeout=180, interval=1)
        holders = {n: intent(n).status.shard.replica for n in names}  # type: ignore[union-attr]
        print(f"held by {holders}")

        # 1. SIGKILL mid fan-out: the hub refuses the victim's writes to a third of its
        # intents' clusters, so once it wrote the rest it is stuck halfway; it is killed
        # there. The survivors take its shards once the Leases expire and write only what
        # it had not: no work is written twice.
        victim = max(REPLICAS, key=lambda r: list(holders.values()).count(r))
        theirs = [n for n in names if holders[n] == victim]
        held = {cluster for n in theirs for cluster in sorted(members[n])[::3]}
        hold = _hold(ns, theirs, held)
        hub.apply_objects(hold)
        probe = next(w for n in theirs for w in intent_works(custom, ns, n)
                     if w["metadata"]["namespace"] in held)
        eventually(lambda: "held by the test" in hub.kubectl(
            "annotate", "manifestwork", probe["metadata"]["name"], "-n",
            probe["metadata"]["namespace"], "probe=1", "--dry-run=server", check=False).stderr)
        change(1)

        def halfway() -> bool:
            return all(("round-1" in json.dumps(w["spec"])) == (w["metadata"]["namespace"]
                                                                 not in held)
                       for n in theirs for w in intent_works(custom, ns, n))

        eventually(halfway, timeout=60)
        managers[victim].kill()
        before = {(n, w["metadata"]["namespace"]): (w["metadata"]["generation"],
                                                   "round-1" in json.dumps(w["spec"]))
                  for n in theirs for w in intent_works(custom, ns, n)}
        assert {k[1] for k, (_, new) in before.items() if not new} == held  # stopped halfway
        for obj in hold:
            hub.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"])
        started = time.monotonic()
        live = set(REPLICAS) - {victim}
        eventually(lambda: settled(live), timeout=120, interval=1)
        print(f"killed {victim} mid fan-out: exact on {live} after "
              f"{time.monotonic() - started:.1f}s")
        after = {(n, w["metadata"]["namespace"]): w["metadata"]["generation"]
                 for n in theirs for w in intent_works(custom, ns, n)}
        assert after == {k: gen + (0 if new else 1) for k, (gen, new) in before.items()}
        managers[victim].start()  # it comes back and takes its share again
        live = set(REPLICAS)
        eventually(lambda: {intent(n).status.shard.replica  # type: ignore[union-attr]
                            for n in names} == live, timeout=120, interval=1)

        # 2. SIGSTOP: frozen, its Leases expire; the others take over and fan out the change.
        frozen = next(r for r in REPLICAS if r != victim)
        managers[frozen].wait_serving()
        proc = managers[frozen].proc
        assert proc is not None
        proc.send_signal(signal.SIGSTOP)
        change(2)
        started = time.monotonic()
        eventually(lambda: settled(set(REPLICAS) - {frozen}), timeout=120, interval=1)
        print(f"froze {frozen}: exact on the others after {time.monotonic() - started:.1f}s")
        proc.send_signal(signal.SIGCONT)
        eventually(lambda: settled(set(REPLICAS)), timeout=120, interval=1)
        refused = [line for line in managers[frozen].tail(100000).splitlines()
                   if "the hub refused a write" in line]
        assert not refused, refused  # it stopped writing on its own, before the fence

        # 3. A clean stop: its shards go at once, not after the Lease.
        leaving = next(r for r in REPLICAS if r not in (victim, frozen))
        managers[leaving].stop()
        change(3)
        started = time.monotonic()
        eventually(lambda: settled(set(REPLICAS) - {leaving}), timeout=120, interval=1)
        print(f"stopped {leaving}: exact on the others after {time.monotonic() - started:.1f}s")

        # Settled: no replica writes any more.
        for name, mgr in managers.items():
            if name != leaving:
                mgr.wait_quiet(window=4)
        assert settled(set(REPLICAS) - {leaving})

        hub.kubectl("delete", "msv", "--all", "-n", ns, "--wait=false")
        eventually(lambda: all(intent_works(custom, ns, n) == [] for n in names), timeout=180,
                   interval=2)
    finally:
        hub.kubectl("delete", "msv", "--all", "-n", ns, "--wait=false", check=False)
        for mgr in managers.values():
            if mgr.proc is not None and mgr.proc.poll() is None:
                mgr.proc.send_signal(signal.SIGCONT)
            mgr.stop()
            mgr.print_tail()
