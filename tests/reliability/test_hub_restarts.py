"""The hub's kube-apiserver and etcd restarted while the manager reconciles.

The manager is left running. Each restart happens in the middle of a fan-out (a spec change
of the ModelServing, every work re-rendered). Once the hub is back, the work agents' side
reports new feedback on every cluster and one cluster leaves the Placement: the manager must
see all of it through its watches, so every intent ends with exactly the desired works and a
status that counts what the clusters reported now (not before the outage), at the intent's
current generation. Sizes: ``RELIABILITY_SCALE`` (see conftest.py).
"""

from __future__ import annotations

import concurrent.futures
import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from addon_api import constants as c
from addon_api.common import Resource
from addon_api.hub import ModelServing, MultiClusterInferenceService
from addon_manager import naming
from testbed.fleet import Testbed
from testbed.support.fake_fleet import (
    PLATFORM_META,
    FakeFleet,
    decided,
    exact,
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
from tests.reliability.conftest import APPLIES, Scale, applies, current_scale

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


def test_hub_apiserver_and_etcd_restarted(
    hub_testbed: Testbed, namespace: str, fleet: FakeFleet, scale: Scale, rng: random.Random,
    tmp_path: Path,
) -> None:
    hub, ns, n = hub_testbed.hub, namespace, scale.restart_clusters
    api = fleet.api
    custom = client.CustomObjectsApi(api)
    members = set(fleet.create(n, f"h{rng.randrange(16**4):04x}"))
    hub.apply_objects([fleet_placement(ns, fleet.label)])
    eventually(lambda: decided(custom, ns) == members, timeout=300, interval=2)
    platform_work = naming.work_name(c.KIND_MODEL_SERVING, ns, "platform")
    isvc_work = naming.work_name(c.KIND_INFERENCE_SERVICE, ns, "iris")

    def platform() -> Resource:
        return ModelServing.from_object(get_json(hub, "msv", "platform", "-n", ns))

    def model() -> Resource:
        return MultiClusterInferenceService.from_object(
            get_json(hub, "multiclusterinferenceservices", "iris", "-n", ns))

    def works_exact() -> bool:
        return decided(custom, ns) == members and all(
            exact(custom, i, members) for i in (platform(), model())
        )

    mgr = Manager(manager_identity(hub_testbed), tmp_path / "manager.log",
                  "--no-addon-enablement").start()
    try:
        # Settled: the platform Available everywhere (the gate), the model on every cluster.
        hub.apply_objects([model_serving("platform", ns, "fleet")])
        eventually(lambda: exact(custom, platform(), members), timeout=300, interval=2)
        _report_all(api, [(cl, platform_work, PLATFORM_META, {"phase": "Available"})
                          for cl in members])
        hub.apply_objects([inference_service("iris", ns, "fleet")])
        eventually(works_exact, timeout=300, interval=2)

        faults = ["apiserver", "etcd"] * scale.restarts
        for round_, fault in enumerate(faults):
            # Mid-reconcile: both intents change, a fan-out of 2 x N applies starts.
            before = applies(mgr)
            hub.apply_objects([
                model_serving("platform", ns, "fleet", servingNamespaces=[f"round-{round_}"]),
                inference_service("iris", ns, "fleet", replicas=round_ + 2),
            ])
            target = before + rng.randint(1, n)
            eventually(lambda t=target: mgr.total(APPLIES) >= t, timeout=300, interval=0.02)
            at_fault = mgr.total(APPLIES) - before
            kill = rng.random() < 0.5
            if fault == "apiserver":
                outage = hub_testbed.restart_apiserver(hub, kill=kill)
            else:
                outage = hub_testbed.restart_etcd(kill=kill)
            back = time.monotonic()

            # The hub is back: every cluster reports something new, and one leaves.
            leaving = rng.choice(sorted(members))
            fleet.relabel([leaving], "no")
            members.discard(leaving)
            phases = {cl: rng.choice(sorted(PLATFORM_PHASES)) for cl in members}
            states = {cl: rng.choice(sorted(ISVC_STATES)) for cl in members}
            _report_all(api, [
                *((cl, platform_work, PLATFORM_META, {"phase": p}) for cl, p in phases.items()),
                *((cl, isvc_work, ISVC_META, ISVC_STATES[s][1]) for cl, s in states.items()),
            ])
            reported = time.monotonic()
            eventually(works_exact, timeout=300, interval=2)
            want_platform = Counter(PLATFORM_PHASES[p] for p in phases.values())
            want_isvc = Counter(ISVC_STATES[s][0] for s in states.values())
            eventually(lambda wp=want_platform, wi=want_isvc: _status_counts(
                hub, "msv", ns, "platform", wp
            ) and _status_counts(hub, "multiclusterinferenceservices", ns, "iris", wi),
                timeout=300, interval=1)
            done = time.monotonic()
            print(
                f"{fault} {'SIGKILLed' if kill else 'stopped'} after {at_fault:.0f} of "
                f"{2 * (len(members) + 1)} applies, hub unavailable {outage:.1f}s; once back, "
                f"{2 * len(members)} reports written in {reported - back:.1f}s; works exact and "
                f"status current {done - reported:.1f}s after the last report "
                f"({done - back:.1f}s after the hub was back; load {os.getloadavg()[0]:.0f})"
            )
        assert mgr.proc is not None and mgr.proc.poll() is None, "the manager exited"
    finally:
        hub.kubectl("delete", "msv,multiclusterinferenceservices", "--all", "-n", ns,
                    "--wait=false", check=False)
        mgr.stop()
        mgr.print_tail()
