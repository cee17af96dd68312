"""The manager against a fleet of spoke-less clusters: status writes coalesced under churn.

ManagedClusters here have no spoke (no agent): the hub's ManifestWorks are what counts.
A manager SIGKILLed in the middle of a fan-out, with clusters leaving while it is down, is
tests/reliability/test_manager_killed.py; the fan-out benchmark is ``python -m bench.fanout``
(see docs/benchmarks.md).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from addon_api import constants as c
from addon_manager.facts import naming
from testbed.fleet import Testbed
from testbed.support.fake_fleet import (
    PLATFORM_META,
    FakeFleet,
    decided,
    fake_fleet,
    fleet_placement,
    intent_works,
)
from testbed.support.manager import (
    Manager,
    manager_identity,
    model_serving,
    prepare,
    report_work_status,
)
from testbed.support.waiting import eventually


@pytest.fixture
def fleet(testbed: Testbed) -> Iterator[FakeFleet]:
    """A fleet of spoke-less clusters, deleted afterwards."""
    prepare(testbed)
    with fake_fleet(testbed) as f:
        yield f


def _status_writes(mgr: Manager, plural: str) -> float:
    return sum(
        v for k, v in mgr.metrics().items()
        if k.startswith("model_serving_api_writes_total{")
        and 'verb="patch-status"' in k and f'resource="{plural}"' in k
    )


@pytest.mark.parametrize("min_interval", ["1.0", "0"], ids=["coalesced", "uncoalesced-control"])
def test_status_writes_are_coalesced_under_churn(
    testbed: Testbed, hub_namespace: str, fleet: FakeFleet, tmp_path: Any, min_interval: str
) -> None:
    """Feedback changes ~20 times a second on 4 clusters for 12 s: the intent's status is
    written at most once a second (the default ``--min-interval``), and the last change is
    not lost. The control run with ``--min-interval=0`` writes far more often, which shows
    the bound is what the coalescing does, not the speed of this machine."""
    hub, ns = testbed.hub, hub_namespace
    custom = client.CustomObjectsApi(fleet.api)
    names = fleet.create(4, f"c{uuid.uuid4().hex[:4]}")
    hub.apply_objects([fleet_placement(ns, fleet.label)])
    eventually(lambda: decided(custom, ns) == set(names), timeout=90)
    mgr = Manager(
        manager_identity(testbed), tmp_path / "manager.log",
        "--no-addon-enablement", f"--min-interval={min_interval}",
    ).start()
    work = naming.work_name(c.KIND_MODEL_SERVING, ns, "churn")
    meta = PLATFORM_META

    def messages() -> dict[str, str]:
        status = json.loads(hub.kubectl("get", "msv", "churn", "-n", ns, "-o", "json").stdout)
        return {e["cluster"]: e.get("message", "") for e in status["status"].get("clusters", [])}

    try:
        eventually(mgr.metrics, timeout=30, interval=0.2)
        hub.apply_objects([model_serving("churn", ns, "fleet")])
        eventually(lambda: len(intent_works(custom, ns, "churn")) == 4, timeout=60)
        for name in names:
            report_work_status(fleet.api, name, work, meta, {"phase": "Installing",
                                                            "message": "start"})
        eventually(lambda: set(messages().values()) == {"start"}, timeout=60)
        mgr.wait_quiet(window=1.5)  # the settling's last (coalesced) status write landed

        before = _status_writes(mgr, "modelservings")
        started = time.monotonic()
        step = 0
        while time.monotonic() - started < 12:
            step += 1
            report_work_status(fleet.api, names[step % 4], work, meta,
                               {"phase": "Installing", "message": f"step {step}"})
            time.sleep(0.05)
        churn = time.monotonic() - started
        last = {names[(step - i) % 4]: f"step {step - i}" for i in range(4)}
        # Nothing is lost: the status ends with every cluster's last message...
        eventually(lambda: messages() == last, timeout=30)
        mgr.wait_quiet(window=1.5)
        written = _status_writes(mgr, "modelservings") - before
        print(f"min-interval {min_interval}: {step} feedback changes in {churn:.1f}s, "
              f"{written:.0f} status writes")
        bound = churn + 2  # one write per second of churn, plus the settling write after it
        if min_interval == "1.0":
            assert written <= bound, f"{written} status writes in {churn:.1f}s of churn"
            assert written >= churn / 4, f"status fell behind: {written} writes"
        else:
            assert written > 2 * bound, f"control run wrote only {written} times"
    finally:
        hub.kubectl("delete", "msv", "churn", "-n", ns, "--wait=false", check=False)
        eventually(lambda: intent_works(custom, ns, "churn") == [], timeout=120)
        mgr.stop()
        mgr.print_tail()
