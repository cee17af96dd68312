"""The manager SIGKILLed at random points of a fan-out, again and again.

One ModelServing fans out to spoke-less clusters selected by a real Placement. Each round
changes what is desired (a new spec, so every work is re-rendered, and some clusters leave
or come back), kills the manager with -9 after a random number of the fan-out's applies,
sometimes changes the fleet again while it is down, restarts it, and requires exactly the
desired ManifestWorks: one per selected cluster, none missing, no leftovers, each identical
to the pure render. Sizes: ``RELIABILITY_SCALE`` (see conftest.py).
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest
from kubernetes import client

from addon_api.hub import ModelServing
from testbed.fleet import Testbed
from testbed.support.fake_fleet import (
    FakeFleet,
    decided,
    exact,
    fleet_placement,
    intent_works,
)
from testbed.support.manager import Manager, manager_identity, model_serving
from testbed.support.waiting import eventually
from tests.reliability.conftest import APPLIES, Scale, applies, current_scale

pytestmark = pytest.mark.timeout(current_scale().timeout)


def _flip(rng: random.Random, fleet: FakeFleet, members: set[str], most: int) -> set[str]:
    """Move up to ``most`` random clusters in or out of the Placement; return the members."""
    chosen = rng.sample(fleet.names, rng.randint(0, most))
    leaving = [n for n in chosen if n in members]
    joining = [n for n in chosen if n not in members]
    fleet.relabel(leaving, "no")
    fleet.relabel(joining, "yes")
    return (members - set(leaving)) | set(joining)


def test_manager_killed_during_fan_out(
    hub_testbed: Testbed, namespace: str, fleet: FakeFleet, scale: Scale, rng: random.Random,
    tmp_path: Path,
) -> None:
    hub, ns, n = hub_testbed.hub, namespace, scale.kill_clusters
    custom = client.CustomObjectsApi(fleet.api)
    t0 = time.monotonic()
    members = set(fleet.create(n, f"k{rng.randrange(16**4):04x}"))
    hub.apply_objects([fleet_placement(ns, fleet.label)])
    eventually(lambda: decided(custom, ns) == members, timeout=600, interval=0.5)
    print(f"{n} clusters created and decided in {time.monotonic() - t0:.1f}s")

    def intent() -> ModelServing:
        return ModelServing.from_object(
            json.loads(hub.kubectl("get", "msv", "fleet", "-n", ns, "-o", "json").stdout)
        )

    def converged() -> bool:
        return decided(custom, ns) == members and exact(custom, intent(), members)

    mgr = Manager(manager_identity(hub_testbed), tmp_path / "manager.log",
                  "--no-addon-enablement").start()
    times: list[float] = []
    try:
        for round_ in range(scale.kills):
            # A change that needs a fan-out: every work gets a new spec, some clusters move.
            before = applies(mgr)
            hub.apply_objects([model_serving(
                "fleet", ns, "fleet", servingNamespaces=["models", f"round-{round_}"]
            )])
            members = _flip(rng, fleet, members, n // 10)
            target = before + rng.randint(1, len(members) - 1)
            eventually(lambda t=target: mgr.total(APPLIES) >= t, timeout=600, interval=0.02)
            mgr.kill()
            done = sum(
                1 for w in intent_works(custom, ns, "fleet")
                if f"round-{round_}" in json.dumps(w["spec"])
            )
            down = ""
            if round_ == 0 or rng.random() < 0.5:  # the fleet changes while nobody watches
                members = _flip(rng, fleet, members, n // 20)
                down = ", fleet changed while down"
            started = time.monotonic()
            mgr.start()
            eventually(converged, timeout=900, interval=1)
            times.append(time.monotonic() - started)
            print(
                f"kill {round_ + 1}/{scale.kills} after {target - before:.0f} applies "
                f"({done} works carried the new spec{down}): exactly {len(members)} works "
                f"{times[-1]:.1f}s after the restart (load {os.getloadavg()[0]:.0f})"
            )

        # Settled: nothing more is written, and it is still exact.
        mgr.wait_quiet(window=5)  # fails if the manager keeps writing after converging
        assert converged()
        print(f"{scale.kills} kills, {n} clusters: converged in "
              f"{min(times):.1f}-{max(times):.1f}s (mean {sum(times) / len(times):.1f}s)")

        hub.kubectl("delete", "msv", "fleet", "-n", ns, "--wait=false")
        eventually(lambda: intent_works(custom, ns, "fleet") == [], timeout=600, interval=0.5)
        eventually(lambda: hub.kubectl("get", "msv", "fleet", "-n", ns, check=False)
                   .returncode != 0, timeout=120)
    finally:
        hub.kubectl("delete", "msv", "--all", "-n", ns, "--wait=false", check=False)
        mgr.stop()
        mgr.print_tail()
