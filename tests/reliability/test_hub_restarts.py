"""The hub's kube-apiserver and etcd restarted while the manager reconciles.

The manager is left running. Each restart happens in the middle of a fan-out (a spec change
of the ModelServing, every work re-rendered). Once the hub is back, the work agents' side
reports new feedback on every cluster and one cluster leaves the Placement: the manager must
see all of it through its watches, so every intent ends with exactly the desired works and a
status that counts what the clusters reported now (not before the outage), at the intent's
current generation. Sizes: ``RELIABILITY_SCALE`` (see conftest.py).

The scenario is a class whose steps report separately (see tests/conftest.py): the settled
start, then one step per restart (parametrised: round and fault), then the manager's survival.
"""

from __future__ import annotations

import concurrent.futures
import os
import random
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client

from addon_api import constants as c
from addon_api.common import Resource
from addon_api.hub import ModelServing, MultiClusterInferenceService
from addon_manager.facts import naming
from testbed.fleet import Testbed
from testbed.support.fake_fleet import (
    PLATFORM_META,
    FakeFleet,
    decided,
    exact,
    fake_fleet,
    fleet_placement,
)
from testbed.support.manager import (
    Manager,
    get_json,
    inference_service,
    manager_identity,
    model_serving,
    report_work_status,
)
from testbed.support.waiting import eventually
from tests.reliability.conftest import (
    APPLIES,
    Scale,
    applies,
    bound_namespace,
    current_scale,
    reliability_seed,
)

ISVC_META = {"group": "serving.kserve.io", "version": "v1beta1", "kind": "InferenceService",
             "resource": "inferenceservices", "namespace": "models", "name": "iris"}
PLATFORM_PHASES = {"Available": "ready", "Degraded": "failed", "Installing": "progressing"}
ISVC_STATES: dict[str, tuple[str, dict[str, Any]]] = {
    "ready": ("ready", {"ready": "True", "readyReason": "Ready", "url": "http://iris.example"}),
    "failed": ("failed", {"ready": "False", "failureReason": "ModelLoadFailed",
                          "transitionStatus": "BlockedByFailedLoad"}),
    "loading": ("progressing", {"ready": "False", "readyReason": "Loading"}),
}

pytestmark = pytest.mark.timeout(current_scale().timeout)

FAULTS = ["apiserver", "etcd"] * current_scale().restarts
"""The fault of each round, alternately the API server and etcd."""


def _report_all(api: client.ApiClient, jobs: list[tuple[str, str, dict[str, str],
                                                        dict[str, Any]]]) -> None:
    """Report feedback on many works as their work agents would (retrying a dropped
    connection: the hub just came back)."""
    def one(job: tuple[str, str, dict[str, str], dict[str, Any]]) -> None:
        eventually(lambda: report_work_status(api, *job) or True, timeout=120, interval=1)

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(one, jobs))


def _status_counts(hub: Any, plural: str, ns: str, name: str, want: Counter[str]) -> bool:
    """The intent's status is current: its generation, and the clusters counted as ``want``."""
    obj = get_json(hub, plural, name, "-n", ns)
    status = obj.get("status") or {}
    summary = status.get("summary") or {}
    got = {k: summary.get(k, 0) for k in ("desired", "ready", "progressing", "failed")}
    expected = {"desired": sum(want.values()), "ready": want["ready"],
                "progressing": want["progressing"], "failed": want["failed"]}
    assert status.get("observedGeneration") == obj["metadata"]["generation"], (
        f"{name}: observedGeneration {status.get('observedGeneration')} of "
        f"{obj['metadata']['generation']}"
    )
    assert got == expected, f"{name}: summary {got}, expected {expected}"
    return True


@dataclass
class Restarts:
    """What the steps of :class:`TestHubApiserverAndEtcdRestarted` share."""

    hub_testbed: Testbed
    ns: str
    fleet: FakeFleet
    seed: int
    """``RELIABILITY_SEED`` of the scenario: it replays the whole class, every round."""
    rng: random.Random
    members: set[str]
    """The clusters the Placement selects now (one leaves each round)."""
    mgr: Manager

    @property
    def hub(self) -> Any:
        return self.hub_testbed.hub

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.fleet.api)

    def platform(self) -> Resource:
        return ModelServing.from_object(get_json(self.hub, "msv", "platform", "-n", self.ns))

    def model(self) -> Resource:
        return MultiClusterInferenceService.from_object(
            get_json(self.hub, "multiclusterinferenceservices", "iris", "-n", self.ns))

    def works_exact(self) -> bool:
        return decided(self.custom, self.ns) == self.members and all(
            exact(self.custom, i, self.members) for i in (self.platform(), self.model())
        )


@pytest.fixture(scope="class")
def restarts(
    hub_testbed: Testbed, scale: Scale, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Restarts]:
    """N spoke-less clusters selected by a Placement, and the manager running."""
    hub, n = hub_testbed.hub, scale.restart_clusters
    seed = reliability_seed()
    print(f"{TestHubApiserverAndEtcdRestarted.__name__}: RELIABILITY_SEED={seed}")
    rng = random.Random(seed)
    ns = bound_namespace(hub_testbed)
    with fake_fleet(hub_testbed) as fleet:
        custom = client.CustomObjectsApi(fleet.api)
        members = set(fleet.create(n, f"h{rng.randrange(16**4):04x}"))
        hub.apply_objects([fleet_placement(ns, fleet.label)])
        eventually(lambda: decided(custom, ns) == members, timeout=300, interval=2)
        mgr = Manager(manager_identity(hub_testbed),
                      tmp_path_factory.mktemp("manager") / "manager.log",
                      "--no-addon-enablement").start()
        try:
            yield Restarts(hub_testbed, ns, fleet, seed, rng, members, mgr)
        finally:
            hub.kubectl("delete", "msv,multiclusterinferenceservices", "--all", "-n", ns,
                        "--wait=false", check=False)
            mgr.stop()
            mgr.print_tail()


class TestHubApiserverAndEtcdRestarted:
    """The hub's API server and etcd restarted mid fan-out: once back, every intent has
    exactly the desired works and a status current with what the clusters report now."""

    def test_1_settled_platform_then_model(self, restarts: Restarts) -> None:
        s = restarts
        # Settled: the platform Available everywhere (the gate), the model on every cluster.
        s.hub.apply_objects([model_serving("platform", s.ns, "fleet")])
        eventually(lambda: exact(s.custom, s.platform(), s.members), timeout=300, interval=2)
        platform_work = naming.work_name(c.KIND_MODEL_SERVING, s.ns, "platform")
        _report_all(s.fleet.api, [(cl, platform_work, PLATFORM_META, {"phase": "Available"})
                                  for cl in s.members])
        s.hub.apply_objects([inference_service("iris", s.ns, "fleet")])
        eventually(s.works_exact, timeout=300, interval=2)

    @pytest.mark.needs("test_1_settled_platform_then_model")
    @pytest.mark.parametrize(
        ("round_", "fault"), list(enumerate(FAULTS)), ids=[f"{i}-{f}" for i, f in enumerate(FAULTS)]
    )
    def test_2_restarted_mid_fan_out(self, restarts: Restarts, round_: int, fault: str) -> None:
        s = restarts
        hub, ns, mgr, rng, n = s.hub, s.ns, s.mgr, s.rng, current_scale().restart_clusters
        print(f"round {round_} of RELIABILITY_SEED={s.seed}")
        platform_work = naming.work_name(c.KIND_MODEL_SERVING, ns, "platform")
        isvc_work = naming.work_name(c.KIND_INFERENCE_SERVICE, ns, "iris")
        # Mid-reconcile: both intents change, a fan-out of 2 x N applies starts.
        before = applies(mgr)
        hub.apply_objects([
            model_serving("platform", ns, "fleet", servingNamespaces=[f"round-{round_}"]),
            inference_service("iris", ns, "fleet", replicas=round_ + 2),
        ])
        target = before + rng.randint(1, n)
        eventually(lambda: mgr.total(APPLIES) >= target, timeout=300, interval=0.02)
        at_fault = mgr.total(APPLIES) - before
        kill = rng.random() < 0.5
        if fault == "apiserver":
            outage = s.hub_testbed.restart_apiserver(hub, kill=kill)
        else:
            outage = s.hub_testbed.restart_etcd(kill=kill)
        back = time.monotonic()

        # The hub is back: every cluster reports something new, and one leaves.
        leaving = rng.choice(sorted(s.members))
        s.fleet.relabel([leaving], "no")
        s.members.discard(leaving)
        phases = {cl: rng.choice(sorted(PLATFORM_PHASES)) for cl in s.members}
        states = {cl: rng.choice(sorted(ISVC_STATES)) for cl in s.members}
        _report_all(s.fleet.api, [
            *((cl, platform_work, PLATFORM_META, {"phase": p}) for cl, p in phases.items()),
            *((cl, isvc_work, ISVC_META, ISVC_STATES[st][1]) for cl, st in states.items()),
        ])
        reported = time.monotonic()
        eventually(s.works_exact, timeout=300, interval=2)
        want_platform = Counter(PLATFORM_PHASES[p] for p in phases.values())
        want_isvc = Counter(ISVC_STATES[st][0] for st in states.values())
        eventually(lambda: _status_counts(
            hub, "msv", ns, "platform", want_platform
        ) and _status_counts(hub, "multiclusterinferenceservices", ns, "iris", want_isvc),
            timeout=300, interval=1)
        done = time.monotonic()
        print(
            f"{fault} {'SIGKILLed' if kill else 'stopped'} after {at_fault:.0f} of "
            f"{2 * (len(s.members) + 1)} applies, hub unavailable {outage:.1f}s; once back, "
            f"{2 * len(s.members)} reports written in {reported - back:.1f}s; works exact and "
            f"status current {done - reported:.1f}s after the last report "
            f"({done - back:.1f}s after the hub was back; load {os.getloadavg()[0]:.0f})"
        )

    def test_3_manager_ran_through_every_restart(self, restarts: Restarts) -> None:
        mgr = restarts.mgr
        assert mgr.proc is not None and mgr.proc.poll() is None, "the manager exited"
