"""Several manager replicas: one holds the Lease and acts, a standby takes over when it dies,
and a clean stop hands the Lease back."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from addon_api import constants as c
from testbed import identities
from testbed.fleet import Testbed
from testbed.support.manager import (
    Manager,
    get_json,
    manager_identity,
    model_serving,
    placement,
    prepare,
    works,
)
from testbed.support.waiting import eventually

LEASE_NS = identities.MANAGER_NAMESPACE  # the namespace of manager_identity()


def _leader(mgr: Manager) -> float:
    return mgr.metrics().get("model_serving_manager_leader", -1.0)


def _holder(hub: Any) -> str:
    lease = get_json(hub, "lease", "model-serving-addon-manager", "-n", LEASE_NS)
    return str(lease["spec"].get("holderIdentity") or "")


def _hashes(hub: Any, ns: str) -> dict[str, str]:
    return {
        cl: w["metadata"]["annotations"][c.ANNOTATION_RENDER_HASH]
        for cl, w in works(hub, ns, "ha", c.KIND_MODEL_SERVING).items()
    }


@pytest.fixture
def replicas(testbed: Testbed, tmp_path: Path) -> Iterator[list[Manager]]:
    """Start managers on demand (as the chart's ServiceAccount); all stopped afterwards."""
    prepare(testbed)
    started: list[Manager] = []
    yield started
    for mgr in started:
        mgr.stop()
        mgr.print_tail()


def _replica(testbed: Testbed, tmp_path: Path, name: str) -> Manager:
    return Manager(
        manager_identity(testbed), tmp_path / f"{name}.log",
        "--no-addon-enablement", "--leader-elect", f"--leader-election-namespace={LEASE_NS}",
        f"--leader-election-identity={name}", "--lease-duration=6",
    ).start()


def test_one_replica_acts_and_a_standby_takes_over(
    testbed: Testbed, hub_namespace: str, replicas: list[Manager], tmp_path: Path
) -> None:
    hub, ns = testbed.hub, hub_namespace
    label = f"ha-{uuid.uuid4().hex[:6]}"
    for spoke in testbed.spokes:
        hub.kubectl("label", "managedcluster", spoke.name, f"{label}=yes", "--overwrite")
    a = _replica(testbed, tmp_path, "replica-a")
    replicas.append(a)
    eventually(lambda: _leader(a) == 1, timeout=90)
    b = _replica(testbed, tmp_path, "replica-b")
    replicas.append(b)
    eventually(lambda: _leader(b) == 0, timeout=60)  # up, serving metrics, standing by
    assert _holder(hub) == "replica-a"
    try:
        hub.apply_objects([placement("p", ns, {label: "yes"}), model_serving("ha", ns, "p")])
        eventually(lambda: len(_hashes(hub, ns)) == len(testbed.spokes), timeout=90)
        a.wait_quiet()
        assert b.writes() == 0, "the standby wrote to the hub"
        assert a.writes() > 0
        first = _hashes(hub, ns)

        # The leader dies without a word: the standby takes over once the Lease expires.
        a.kill()
        killed = time.monotonic()
        eventually(lambda: _leader(b) == 1, timeout=90)
        print(f"standby took over {time.monotonic() - killed:.1f}s after the kill")
        assert _holder(hub) == "replica-b"
        hub.kubectl(
            "patch", "msv", "ha", "-n", ns, "--type=merge", "-p",
            json.dumps({"spec": {"components": {"kserve-controller-manager": {"replicas": 2}}}}),
        )
        eventually(
            lambda: all(h != first[cl] for cl, h in _hashes(hub, ns).items()), timeout=90
        )

        # A clean stop hands the Lease back: the next replica does not wait for it to expire.
        b.stop()
        assert _holder(hub) == ""
        c3 = _replica(testbed, tmp_path, "replica-c")
        replicas.append(c3)
        eventually(lambda: _leader(c3) == 1, timeout=90)
        assert _holder(hub) == "replica-c"
    finally:
        hub.kubectl("delete", "msv", "ha", "-n", ns, "--wait=false", check=False)
        leader = replicas[-1]
        if leader.proc is not None and leader.proc.poll() is None:
            eventually(lambda: works(hub, ns, "ha", c.KIND_MODEL_SERVING) == {}, timeout=120)
        for spoke in testbed.spokes:
            hub.kubectl("label", "managedcluster", spoke.name, f"{label}-", check=False)
