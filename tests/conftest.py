"""Shared fixtures: one testbed per session, a fresh hub namespace per test, the agent's spoke.

The helpers behind them are the test-support library :mod:`testbed.support` (shared with
``bench/``); the fixtures are here so that every test module can request them by name.

A test gets the ``testbed`` marker from what it uses, not from its folder: every test whose
fixtures (direct or indirect) include one of :data:`HARNESS_FIXTURES` is marked, so
``pytest -m "not testbed"`` (``make unit``) runs everything that needs only Python.
Requesting the fixture is how a test says it needs the harness; a test that calls a built
binary or the Go module cache without one of these fixtures breaks ``make unit``.

Tests marked ``image`` (tests/image: the container image on the testbed, which needs podman and
``make image``) run only when the ``-m`` expression names that marker (``make image-test``);
otherwise they are skipped, and ``make test`` deselects them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed import build, upstream
from testbed.fleet import Testbed
from testbed.support import agent as agent_support

HARNESS_FIXTURES = frozenset({"bundles", "built_binaries", "go_modules", "testbed"})
"""Fixtures that need more than Python: the Go-built binaries (``make binaries``), the Go
toolchain and its module cache (also behind the rendered bundles), or the running fleet
(which needs the binaries)."""


@pytest.fixture(scope="session")
def built_binaries() -> Callable[[str], Path]:
    """Path of a Go-built testbed binary by name (``built_binaries("helm")``).

    The binaries come from ``make binaries``; a missing one raises, naming that target.
    """
    return build.binary


@pytest.fixture(scope="session")
def go_modules() -> Callable[[str, str], Path]:
    """Directory of ``module@version`` in the Go module cache (needs ``go``; may download)."""
    return upstream.module_dir


@pytest.fixture(scope="session")
def testbed(built_binaries: Callable[[str], Path]) -> Iterator[Testbed]:
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


@pytest.fixture(scope="session")
def bundles() -> Path:
    """Rendered bundles of every stack, rendered once per version (from the Go module cache)."""
    return agent_support.rendered_bundles()


@pytest.fixture(scope="module")
def spoke(testbed: Testbed) -> Any:
    """The first spoke with what the chart's AddOnTemplate deploys there (CRDs, the agent's
    ServiceAccount and RBAC) and a kubeconfig of that identity for the agent."""
    return agent_support.agent_spoke(testbed)


@pytest.fixture(scope="module")
def agent(
    spoke: Any, bundles: Path, request: pytest.FixtureRequest
) -> Iterator[agent_support.AgentProcess]:
    """An agent process on the spoke; its log tail is printed when a test of the session failed."""
    log = agent_support.agent_log(Path(str(request.fspath)).stem)
    with agent_support.running_agent(
        spoke, bundles, log, failed=lambda: bool(request.session.testsfailed)
    ) as proc:
        yield proc


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``testbed`` every test that uses one of :data:`HARNESS_FIXTURES`; skip ``image``
    tests unless ``-m`` asks for them."""
    wants_image = "image" in (config.option.markexpr or "")
    for item in items:
        if HARNESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.testbed)
        if not wants_image and item.get_closest_marker("image") is not None:
            item.add_marker(pytest.mark.skip(reason="needs podman and the image: make image-test"))
