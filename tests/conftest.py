"""Shared fixtures: shared testbeds, a fresh hub namespace per test, the agent's spoke.

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

A long scenario is a test class whose methods are its steps, run in file order
(``test_1_...``, ``test_2_...``) on one class-scoped setup, each reporting on its own. A step
marked ``@pytest.mark.needs("test_2_...")`` builds on what that earlier step of its class did:
if that step did not pass, it fails at once, naming it, instead of timing out on a state that
never came. A step without the marker runs whatever happened before it, so one failure does
not hide the rest of the scenario.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed import build, upstream
from testbed.dataplane import envs
from testbed.dataplane.podspec import Environments
from testbed.fleet import Testbed
from testbed.support import agent as agent_support

HARNESS_FIXTURES = frozenset({"bundles", "built_binaries", "dataplane", "go_modules", "haproxy",
                              "testbed"})
"""Fixtures that need more than Python: the Go-built binaries (``make binaries``), the Go
toolchain and its module cache (also behind the rendered bundles), the running fleet
(which needs the binaries), the data plane's model servers (virtualenvs installed from
the package index, ``python -m testbed build dataplane``), or HAProxy (Debian's package)."""


@pytest.fixture(scope="session")
def haproxy() -> Path:
    """HAProxy from Debian's package, unpacked into the binary cache on first use."""
    from testbed.support import haproxy as haproxy_support

    return haproxy_support.binary()


@pytest.fixture(scope="session")
def built_binaries() -> Callable[..., Path]:
    """Path of a Go-built testbed binary by name (``built_binaries("helm")``).

    The binaries come from ``make binaries``; a missing one raises, naming that target.
    """
    return build.binary


@pytest.fixture(scope="session")
def dataplane() -> Environments:
    """Where the real model servers are: their virtualenvs and the trained iris models.

    Installed on first use (``python -m testbed build dataplane``; a few minutes on a fresh
    machine, nothing once cached). Needs no Go binary and no fleet.
    """
    envs.build_all()
    return envs.environments()


@pytest.fixture(scope="session")
def go_modules() -> Callable[[str, str], Path]:
    """Directory of ``module@version`` in the Go module cache (needs ``go``; may download)."""
    return upstream.module_dir


DEMO = "demo"
"""The shared testbed that is the demo's fleet (:func:`testbed.demo.fleet`): a hub and two
spokes with the add-on installed, its manager and one agent per spoke running, each with its
production identity, the agents in :data:`DEMO_AGENT_NAMESPACE`."""


SHARED_TESTBED_OF_FILE = {
    # The agent and stacks on the first spoke: each file leaves cluster-wide state there (CRDs
    # installed before the agent, a stack removed) that the next one of its testbed expects.
    "test_agent_bundles": "spokes",
    "test_agent_certmanager": "spokes",
    "test_agent_kserve": "spokes",
    "test_agent_policy_watch": "spokes",
    "test_agent_storage": "spokes",
    "test_agent_sealing": "spokes",
    "test_identities": "spokes",
    "test_agent_modelmesh": "stacks",
    "test_testbed_smoke": "stacks",
    "test_agent_killed": "stacks",
    # The manager through OCM's work agents, one testbed for the long-running kinds of test.
    "test_manager_cases": "works",
    "test_manager_core": "works",
    "test_work_agent_rbac": "works",
    "test_work_agent_stopped": "works",
    "test_endpoint_export": "works",
    # The demo's fleet (the add-on installed, the manager and an agent per spoke running):
    # the rollouts first, which put back what they changed, then the end-to-end flow, which
    # ends by removing the stack and stopping an agent.
    "test_rollout": DEMO,
    "test_e2e": DEMO,
}
"""Test files (by name) that do not use the default ``hub`` testbed, and the one they use.

Files on one testbed run one after the other in file order, on one parallel worker; files on
different testbeds run in parallel (``make test``). Every other file that asks for
``testbed`` uses ``hub`` (admission, the chart, the manager's leader election and scale)."""


DEMO_AGENT_NAMESPACE = "model-serving-agent"
"""The chart's ``agent.installNamespace`` on the shared demo fleet: not the default (the demo
uses that), so that nothing finds the agent by that name alone."""


SPOKES_OF_TESTBED = {"spokes": 1, "hub": 1}
"""Managed clusters of a shared testbed when not two: the agent's tests and the hub's
(admission, the chart, tenancy, leader election) use only the first, and an idle cluster
still costs CPU (its API server, controller-manager and OCM agents: about 20 CPU-seconds
over the hub testbed's four minutes). Each cluster holds about a dozen inotify instances
(API server and controller-manager cert watchers), and parallel testbeds share the user's
limit (128 by default)."""


def shared_testbed_name(path: Path) -> str:
    """Which shared testbed the tests of the file at ``path`` use."""
    return SHARED_TESTBED_OF_FILE.get(path.stem, "hub")


_RUNNING_SHARED: dict[str, Testbed] = {}
"""The shared testbeds running in this process, by name (:func:`_shared_testbeds`)."""

_SHARED_EXITS: dict[str, contextlib.ExitStack] = {}
"""What stops each shared testbed started through a context manager (the demo's fleet)."""


@pytest.fixture(scope="session")
def _shared_testbeds(built_binaries: Callable[[str], Path]) -> Iterator[dict[str, Testbed]]:
    """The shared testbeds started so far in this process, by name; stopped when the last test
    of theirs is done (:func:`pytest_runtest_teardown`) or at the end."""
    beds = _RUNNING_SHARED
    yield beds
    for name in list(beds):
        _stop_shared(name)


def _stop_shared(name: str) -> None:
    """Stop a shared testbed; keep its files when ``TESTBED_RUN_DIR`` asks for them."""
    bed = _RUNNING_SHARED.pop(name)
    exits = _SHARED_EXITS.pop(name, None)
    if exits is not None:
        exits.close()
    if os.environ.get("TESTBED_RUN_DIR"):
        bed.stop()
    else:
        bed.cleanup()


def _start_shared(name: str) -> Testbed:
    """Start the shared testbed ``name``: a bare one, or the demo's fleet (:data:`DEMO`)."""
    run_dir = os.environ.get("TESTBED_RUN_DIR")
    where = None
    if run_dir:
        where = Path(run_dir) / os.environ.get("PYTEST_XDIST_WORKER", "main") / name
    if name != DEMO:
        return Testbed(spokes=SPOKES_OF_TESTBED.get(name, 2), run_dir=where).__enter__()
    from testbed import demo

    exits = contextlib.ExitStack()
    bed = exits.enter_context(demo.fleet(demo.Phases(), agent_namespace=DEMO_AGENT_NAMESPACE))
    _SHARED_EXITS[name] = exits
    return bed


@pytest.fixture(scope="module")
def testbed(_shared_testbeds: dict[str, Testbed], request: pytest.FixtureRequest) -> Testbed:
    """A hub and its spokes (two unless :data:`SPOKES_OF_TESTBED` says otherwise) on real
    binaries, shared by the test files of one name (:func:`shared_testbed_name`); started by
    the first test that needs it and stopped when this worker moves on to another shared
    testbed.

    Set ``TESTBED_RUN_DIR`` to keep logs and kubeconfigs in a known place (a folder per
    parallel worker and testbed).
    """
    name = shared_testbed_name(Path(str(request.path)))
    if name not in _shared_testbeds:
        # The files of one testbed run one after the other (one worker group, longest
        # first): a worker that moves on to another testbed is done with the one it had, and
        # an idle testbed still costs CPU (API servers, controllers, OCM's agents).
        for other in list(_shared_testbeds):
            _stop_shared(other)
        _shared_testbeds[name] = _start_shared(name)
    return _shared_testbeds[name]


def _shared_name_of(item: pytest.Item | None) -> str | None:
    if item is None or "testbed" not in getattr(item, "fixturenames", ()):
        return None
    return shared_testbed_name(Path(str(item.path)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Stop a shared testbed once no test will use it, after the fixtures on it are torn down.

    The tests of one shared testbed are one worker group, handed to a worker at once, so the
    next item (which pytest-xdist knows before running the last queued one) not being on it
    means none will be: an idle testbed still costs a fifth of a core (API servers,
    controllers, OCM's agents) that the other workers' tests are waiting for. It waits for
    the end of the module, though, whose module-scoped fixtures (an agent on a spoke) may still
    hold it while the module's tests that need no testbed run.
    """
    result = yield
    module_done = nextitem is None or getattr(nextitem, "module", None) is not getattr(
        item, "module", None)
    if module_done:
        for name in [n for n in _RUNNING_SHARED if n != _shared_name_of(nextitem)]:
            _stop_shared(name)
    return result


def _bound_namespace(testbed: Testbed) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    testbed.bind_clusterset(name)
    yield name
    testbed.hub.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def hub_namespace(testbed: Testbed) -> Iterator[str]:
    """A new hub namespace bound to the default ManagedClusterSet, deleted afterwards."""
    yield from _bound_namespace(testbed)


@pytest.fixture(scope="class")
def scenario_namespace(testbed: Testbed) -> Iterator[str]:
    """Like ``hub_namespace``, shared by the steps of one scenario class."""
    yield from _bound_namespace(testbed)


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


def _worker_group(item: pytest.Item) -> str:
    """Which tests must run on the same parallel worker (``make test``: pytest-xdist with
    ``--dist loadgroup``), one after the other in file order.

    The tests on one shared ``testbed`` (:func:`shared_testbed_name`) are one group: they leave
    cluster-wide state behind (CRDs, the chart's RBAC, a spoke's stack) that later files
    expect, as in a serial run. The rest of tests/reliability shares its package's hub. Any
    other file is a group of its own, so its module- and class-scoped fleets are made once.
    """
    if "testbed" in getattr(item, "fixturenames", ()):
        return f"testbed-{shared_testbed_name(Path(str(item.path)))}"
    path = Path(str(item.path)).resolve()
    if "reliability" in path.parts:
        return "reliability"
    return path.stem


def pytest_itemcollected(item: pytest.Item) -> None:
    """Give each test its parallel worker group (before any collection_modifyitems hook, where
    pytest-xdist reads the groups)."""
    item.add_marker(pytest.mark.xdist_group(_worker_group(item)))


LONGEST_GROUPS = (
    "test_dataplane_fleet", "testbed-hub", "testbed-demo", "testbed-spokes", "testbed-works",
    "reliability", "testbed-stacks", "test_stack_upgrade", "test_docs_hub_setup",
)
"""The worker groups that take minutes, in the order they are handed out, longest first:
``test_dataplane_fleet`` 477, ``hub`` 454, ``demo`` (the rollouts and the end-to-end module)
354, ``spokes`` 330, ``works`` 327, ``reliability`` 222, ``stacks`` 141, ``test_stack_upgrade``
83 and ``test_docs_hub_setup`` 40 s of test time (``pytest --durations=0`` with ``make test``'s
options, three workers, 2026-12-07 thirteenth session; ``hub`` took 659 to 784 s with four).

They go first: pytest-xdist hands a worker the next group in this order when the one it runs
has at most two tests left, so the longest start at once and the short files fill the ends
(``make test`` passes ``--no-loadscope-reorder``, which keeps this order). With the longest
group seventh, as the order of 2026-12-01 had it, one worker ran alone for the last five
minutes. The groups' test time summed over the workers (2,551 s over three) is the bound:
the longest is about half a worker's share."""


FIRST_IN_GROUP = ("test_shard_handover", "test_manager_killed", "test_rollout")
"""Files that go first in their worker group, which otherwise keeps file order: the
``reliability`` group's two longest tests, one per file, independent of the others there
(each has its own namespace and clusters on the package's hub).

pytest-xdist hands a worker its next group as soon as its current one has two tests left.
Last in their group (file order), these two were those two tests: on 2026-12-06 the worker
took the stack upgrade's group 147 s before it could start it, and ended 40 s after the
other three workers, which had run out of groups.

``test_rollout`` goes before ``test_e2e`` on the demo's fleet: it puts back what it changed,
where the end-to-end flow ends by removing the stack and stopping an agent."""


def _group_rank(item: pytest.Item) -> tuple[int, int]:
    """Where a test goes: its worker group's place in :data:`LONGEST_GROUPS` (after them all
    if not there), then :data:`FIRST_IN_GROUP` before the rest of its group."""
    group = _worker_group(item)
    rank = LONGEST_GROUPS.index(group) if group in LONGEST_GROUPS else len(LONGEST_GROUPS)
    stem = Path(str(item.path)).stem
    return rank, FIRST_IN_GROUP.index(stem) if stem in FIRST_IN_GROUP else len(FIRST_IN_GROUP)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``testbed`` every test that uses one of :data:`HARNESS_FIXTURES`; skip ``image``
    tests unless ``-m`` asks for them; check that every ``needs`` names an earlier step of the
    same class; put the longest worker groups first (file order kept within each, but for
    :data:`FIRST_IN_GROUP`)."""
    items.sort(key=_group_rank)
    wants_image = "image" in (config.option.markexpr or "")
    for item in items:
        if HARNESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.testbed)
        if not wants_image and item.get_closest_marker("image") is not None:
            # A plain `pytest tests` has no podman image to run; `make test` deselects these
            # with -m "not image" and `make image-test` selects them, so nothing is hidden.
            item.add_marker(pytest.mark.skip(reason="needs podman and the image: make image-test"))
        for step in _needed_steps(item):
            _check_step(item, step)


STEP_OUTCOMES = pytest.StashKey[dict[str, str]]()
"""Outcome of every test of the session so far by node id: passed, failed or skipped."""


def _needed_steps(item: pytest.Item) -> list[str]:
    return [str(step) for mark in item.iter_markers("needs") for step in mark.args]


def _check_step(item: pytest.Item, step: str) -> None:
    cls = getattr(item, "cls", None)
    steps = [name for name in vars(cls) if name.startswith("test")] if cls else []
    name = getattr(item, "originalname", item.name)
    if step not in steps or steps.index(step) >= steps.index(name):
        raise pytest.UsageError(
            f"{item.nodeid}: needs({step!r}) must name an earlier step of the same class"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Record each test's outcome: its call, or a setup or teardown that did not pass."""
    report = yield
    outcomes = item.session.stash.setdefault(STEP_OUTCOMES, {})
    nodeid = _plain_nodeid(item.nodeid)
    if (report.when == "call" or not report.passed) and outcomes.get(nodeid, "passed") == "passed":
        outcomes[nodeid] = report.outcome
    return report


def _plain_nodeid(nodeid: str) -> str:
    """A node id without the ``@group`` suffix pytest-xdist's loadgroup appends."""
    return nodeid.rsplit("@", 1)[0] if nodeid.rfind("@") > nodeid.rfind("]") else nodeid


def _step_outcome(item: pytest.Item, step: str) -> str:
    """How ``step`` (every parametrisation of it) of ``item``'s class went."""
    outcomes = item.session.stash.get(STEP_OUTCOMES, {})
    node = f"{_plain_nodeid(item.parent.nodeid) if item.parent else ''}::{step}"
    found = [o for nid, o in outcomes.items() if nid == node or nid.startswith(node + "[")]
    if not found:
        return "did not run"
    return next((o for o in found if o != "passed"), "passed")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With ``TESTS_CPU_REPORT=FILE``, append what the test cost the machine (its CPU-seconds
    from setup to teardown, wall seconds, when it ended and on which worker) to FILE as a JSON
    line (:mod:`bench.cpu_per_test`; the CPU is the machine's, meaningful with one worker only;
    with several, the ends and workers give each worker's timeline)."""
    report = os.environ.get("TESTS_CPU_REPORT")
    if not report:
        return (yield)
    from bench.cpu import TICKS, machine_times

    busy_before, wall_before = _busy_ticks(machine_times()), time.monotonic()
    result = yield
    cpu = (_busy_ticks(machine_times()) - busy_before) / TICKS
    with open(report, "a") as out:
        out.write(json.dumps({"test": item.nodeid, "cpu": round(cpu, 2),
                              "wall": round(time.monotonic() - wall_before, 2),
                              "end": round(time.time(), 2),
                              "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}) + "\n")
    return result


def _busy_ticks(times: tuple[int, int]) -> int:
    total, idle = times
    return total - idle


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """A step whose needed earlier step did not pass fails at once, naming that step."""
    for step in _needed_steps(item):
        outcome = _step_outcome(item, step)
        if outcome != "passed":
            said = {"skipped": "was skipped"}.get(outcome, outcome)
            pytest.fail(f"not run: needs step {step}, which {said}", pytrace=False)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Under ``--dist loadgroup``, refuse to run if the groups did not take: a split group
    would run a shared testbed's files on two workers, in an order they do not expect."""
    if not getattr(session.config.option, "loadgroup", False) or not session.items:
        return
    ungrouped = [i.nodeid for i in session.items if "@" not in i.nodeid]
    if ungrouped:
        raise pytest.UsageError(
            f"pytest-xdist did not apply the worker groups (e.g. {ungrouped[0]}): this pytest "
            "and pytest-xdist do not work together for --dist loadgroup"
        )
