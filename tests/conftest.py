"""Shared fixtures: one testbed per session, a fresh hub namespace per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.fleet import Testbed


@pytest.fixture(scope="session")
def testbed() -> Iterator[Testbed]:
    """A hub and two spokes on real binaries, shared by every test of the session.

    Set ``TESTBED_RUN_DIR`` to keep logs and kubeconfigs in a known place.
    """
    run_dir = os.environ.get("TESTBED_RUN_DIR")
    bed = Testbed(spokes=2, run_dir=Path(run_dir) if run_dir else None)
    with bed:
        yield bed
    if run_dir is None:
        bed.cleanup()


@pytest.fixture
def hub_namespace(testbed: Testbed) -> Iterator[str]:
    """A new hub namespace bound to the default ManagedClusterSet, deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    testbed.bind_clusterset(name)
    yield name
    testbed.hub.kubectl("delete", "namespace", name, "--wait=false", check=False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/integration needs the testbed."""
    for item in items:
        if "integration" in Path(str(item.fspath)).parts:
            item.add_marker(pytest.mark.testbed)
