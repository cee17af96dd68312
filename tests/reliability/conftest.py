"""Fault-injection fixtures: the size of a run, a seeded random source, a hub of our own.

``RELIABILITY_SCALE`` picks the size: ``test`` (the default, what ``make test`` runs) or
``soak`` (``make soak``: the sizes of issue 8). ``RELIABILITY_SEED`` replays a run.
"""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from testbed.fleet import Testbed
from testbed.support.fake_fleet import FakeFleet, fake_fleet
from testbed.support.manager import Manager, prepare

APPLIES = "model_serving_manifestwork_applies_total"


def applies(mgr: Manager) -> float:
    """ManifestWork applies of the running manager process (waits for its /metrics; fails
    at once, with its log, when the process exited)."""
    mgr.wait_serving(timeout=120)
    return mgr.total(APPLIES)


@dataclass(frozen=True)
class Scale:
    """How big and how long one run of the reliability tests is."""

    name: str
    kill_clusters: int
    """Clusters of the fan-out during which the manager is killed."""
    kills: int
    """SIGKILLs of the manager, each at a random point of a fan-out."""
    restart_clusters: int
    """Clusters of the intent reconciled while the hub's API server and etcd restart."""
    restarts: int
    """Restarts of the API server, and as many of etcd."""
    timeout: int
    """Seconds one test may take (pytest-timeout)."""


SCALES = {
    "test": Scale("test", kill_clusters=200, kills=3, restart_clusters=50, restarts=1,
                  timeout=900),
    "soak": Scale("soak", kill_clusters=1000, kills=10, restart_clusters=300, restarts=3,
                  timeout=5400),
}


def current_scale() -> Scale:
    """The size of this run (``RELIABILITY_SCALE``; an unknown value is an error)."""
    name = os.environ.get("RELIABILITY_SCALE", "test")
    if name not in SCALES:
        raise ValueError(f"RELIABILITY_SCALE={name!r}: expected one of {sorted(SCALES)}")
    return SCALES[name]


@pytest.fixture(scope="session")
def scale() -> Scale:
    """The size of this run."""
    return current_scale()


def reliability_seed() -> int:
    """``RELIABILITY_SEED`` (to replay a run), else a new random seed."""
    return int(os.environ.get("RELIABILITY_SEED") or random.SystemRandom().randrange(2**32))


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> random.Random:
    """A random source whose seed is printed (``RELIABILITY_SEED`` replays it)."""
    seed = reliability_seed()
    print(f"{request.node.name}: RELIABILITY_SEED={seed}")
    return random.Random(seed)


@pytest.fixture(scope="package")
def hub_testbed(built_binaries: Callable[[str], Path]) -> Iterator[Testbed]:
    """A hub without spokes for these tests alone: they restart its API server and etcd,
    which would disturb the session's shared testbed."""
    bed = Testbed(spokes=0)
    with bed:
        prepare(bed)
        yield bed
    bed.cleanup()


def bound_namespace(hub_testbed: Testbed) -> str:
    """A new hub namespace bound to the default ManagedClusterSet."""
    name = f"r-{uuid.uuid4().hex[:8]}"
    hub_testbed.bind_clusterset(name)
    return name


@pytest.fixture
def namespace(hub_testbed: Testbed) -> str:
    """A new hub namespace bound to the default ManagedClusterSet."""
    return bound_namespace(hub_testbed)


@pytest.fixture
def fleet(hub_testbed: Testbed) -> Iterator[FakeFleet]:
    """Spoke-less clusters on the hub, deleted afterwards."""
    with fake_fleet(hub_testbed) as f:
        yield f
