"""The pod runner's kubelet loop (testbed/dataplane/runner.py) on plain Python processes.

The loop is driven step by step with a made-up clock (``PodRunner.step(now)``), and probes
answer as the test says, so back-off and readiness are checked without waiting for them;
the processes, their exits and their exit statuses are real.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from testbed.dataplane.podspec import ContainerPlan, PodPlan, Probe
from testbed.dataplane.runner import BackOff, PodRunner

SLEEP = (sys.executable, "-c", "import time; time.sleep(120)")
"""A container that keeps running (the child process idles; no test waits on it: each test
stops or kills it and waits for the runner's report of that)."""


def container(tmp: Path, name: str, argv: tuple[str, ...] = SLEEP, **extra: Any) -> ContainerPlan:
    return ContainerPlan(name=name, image=f"example/{name}:1", runner="test", argv=argv,
                         env={"PATH": "/usr/bin:/bin"}, cwd=tmp / name, ports={}, **extra)


def pod(tmp: Path, containers: tuple[ContainerPlan, ...],
        init: tuple[ContainerPlan, ...] = (), policy: str = "Always") -> PodPlan:
    return PodPlan(namespace="models", name="p", uid="u", root=tmp, volumes=(),
                   init_containers=init, containers=containers, restart_policy=policy)


class Answers:
    """Probe results by port, as the test sets them."""

    def __init__(self) -> None:
        self.ok: dict[int, bool] = {}

    def __call__(self, probe: Probe) -> bool:
        return self.ok.get(probe.port, False)


def exited(runner: PodRunner, name: str) -> None:
    """Wait for the container's process to end (it was killed or exits by itself)."""
    proc = runner.container(name).proc
    assert proc is not None
    proc.wait(30)


@pytest.fixture
def stopper() -> Any:
    runners: list[PodRunner] = []
    yield runners.append
    for r in runners:
        r.stop()


def test_a_killed_server_is_not_ready_with_its_exit_status_and_restarts_with_back_off(
        tmp_path: Path, stopper: Any) -> None:
    answers = Answers()
    readiness = Probe("http", 1, "/v2/health/ready", period=1.0)
    plan = pod(tmp_path, (container(tmp_path, "kserve-container", readiness=readiness),))
    runner = PodRunner(plan, tmp_path / "logs", backoff=BackOff(initial=5, maximum=300),
                       probe=answers, grace=2)
    stopper(runner)
    runner.step(100.0)
    assert runner.container("kserve-container").pid is not None
    assert not runner.ready()  # running, but the server has not answered yet
    answers.ok[1] = True
    runner.step(100.5)
    assert runner.ready()
    status = runner.status()
    assert status["phase"] == "Running"
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"

    runner.kill("kserve-container")
    exited(runner, "kserve-container")
    runner.step(101.0)
    status = runner.status()
    (entry,) = status["containerStatuses"]
    assert entry["ready"] is False
    assert entry["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    terminated = entry["lastState"]["terminated"]
    assert terminated["exitCode"] == 128 + signal.SIGKILL
    assert terminated["signal"] == signal.SIGKILL and terminated["reason"] == "Error"
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"
    assert ready["message"] == "containers with unready status: [kserve-container]"

    runner.step(105.9)  # within the back-off: not started again
    assert runner.container("kserve-container").pid is None
    runner.step(106.0)
    assert runner.container("kserve-container").pid is not None
    runner.step(107.0)
    assert runner.ready()
    assert runner.status()["containerStatuses"][0]["restartCount"] == 1

    runner.kill("kserve-container", signal.SIGTERM)
    exited(runner, "kserve-container")
    runner.step(108.0)
    assert runner.status()["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 143
    runner.step(117.9)
    assert runner.container("kserve-container").pid is None
    runner.step(118.0)  # the second back-off doubled: 10 s
    assert runner.container("kserve-container").pid is not None
    assert runner.container("kserve-container").restart_delays == [5.0, 10.0]


def test_back_off_doubles_to_its_maximum_and_resets_after_a_long_run() -> None:
    backoff = BackOff(initial=10, maximum=300, reset_after=600)
    assert backoff.delay(None, 1) == 10
    assert backoff.delay(10, 1) == 20
    assert backoff.delay(160, 1) == 300
    assert backoff.delay(300, 1) == 300
    assert backoff.delay(300, 600) == 10


def _failed_initializer(tmp_path: Path, stopper: Any, script: str, backoff: float
                        ) -> PodRunner:
    """A pod whose storage initializer runs ``script`` (logs on error as the message) and
    failed once: the runner after its exit was seen."""
    failing = container(tmp_path, "storage-initializer", termination_message_policy=(
        "FallbackToLogsOnError"), argv=(sys.executable, "-c", script))
    plan = pod(tmp_path, (container(tmp_path, "kserve-container"),), init=(failing,))
    runner = PodRunner(plan, tmp_path / "logs", backoff=BackOff(initial=backoff),
                       probe=Answers())
    stopper(runner)
    runner.step(0.0)
    exited(runner, "storage-initializer")
    runner.step(1.0)
    return runner


def test_a_failed_init_container_holds_the_pod_with_its_message_and_is_retried(
        tmp_path: Path, stopper: Any) -> None:
    runner = _failed_initializer(tmp_path, stopper, (
        "import sys; print('downloading s3://models/iris'); "
        "print('AccessDenied: the key id does not exist', file=sys.stderr); sys.exit(1)"), 10)
    status = runner.status()
    assert status["phase"] == "Pending"
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Initialized"] == "False" and conditions["Ready"] == "False"
    (init,) = status["initContainerStatuses"]
    terminated = init["lastState"]["terminated"]
    assert terminated["exitCode"] == 1
    assert "AccessDenied: the key id does not exist" in terminated["message"]
    assert init["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    # The server never started while its model was not downloaded.
    assert runner.container("kserve-container").proc is None
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    runner.step(10.9)  # within the back-off
    assert runner.status()["initContainerStatuses"][0]["restartCount"] == 0
    runner.step(11.0)
    assert runner.status()["initContainerStatuses"][0]["restartCount"] == 1
    assert runner.container("storage-initializer").proc is not None


def test_the_servers_start_once_every_init_container_completed(
        tmp_path: Path, stopper: Any) -> None:
    done = container(tmp_path, "storage-initializer", argv=(sys.executable, "-c", "pass"))
    plan = pod(tmp_path, (container(tmp_path, "kserve-container"),), init=(done,))
    runner = PodRunner(plan, tmp_path / "logs", probe=Answers())
    stopper(runner)
    runner.step(0.0)
    exited(runner, "storage-initializer")
    runner.step(0.1)
    runner.step(0.2)
    status = runner.status()
    assert status["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    assert status["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert "message" not in status["initContainerStatuses"][0]["state"]["terminated"]
    assert runner.container("kserve-container").pid is not None
    # No readiness probe: a running container is ready, as the kubelet has it.
    assert runner.ready()
    assert {c["type"]: c["status"] for c in status["conditions"]}["Initialized"] == "True"


def test_a_failing_liveness_probe_kills_and_restarts_the_container(
        tmp_path: Path, stopper: Any) -> None:
    answers = Answers()
    liveness = Probe("tcp", 2, period=1.0, failure_threshold=2)
    plan = pod(tmp_path, (container(tmp_path, "kserve-container", liveness=liveness),))
    runner = PodRunner(plan, tmp_path / "logs", backoff=BackOff(initial=1), probe=answers,
                       grace=5)
    stopper(runner)
    runner.step(0.0)
    answers.ok[2] = True
    runner.step(0.1)
    pid = runner.container("kserve-container").pid
    answers.ok[2] = False
    runner.step(1.1)
    assert runner.container("kserve-container").pid == pid  # one failure is not enough
    runner.step(2.1)
    entry = runner.status()["containerStatuses"][0]
    assert entry["lastState"]["terminated"]["exitCode"] == 128 + signal.SIGTERM
    runner.step(3.1)
    assert runner.container("kserve-container").pid not in (None, pid)


def test_with_restart_policy_never_an_exit_is_final(tmp_path: Path, stopper: Any) -> None:
    plan = pod(tmp_path, (container(tmp_path, "job", argv=(
        sys.executable, "-c", "raise SystemExit(3)")),), policy="Never")
    runner = PodRunner(plan, tmp_path / "logs", probe=Answers())
    stopper(runner)
    runner.step(0.0)
    exited(runner, "job")
    runner.step(1.0)
    runner.step(1000.0)
    status = runner.status()
    assert status["phase"] == "Failed"
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
    assert status["containerStatuses"][0]["restartCount"] == 0
    # The default termination message policy (File) reads a file no process here writes.
    assert "message" not in status["containerStatuses"][0]["state"]["terminated"]


def _gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (exited, or a zombie waiting for its reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


STUBBORN_CHILD = (
    "import os, signal, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import os, signal, time; "
    "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "open(os.environ[\"PIDFILE\"] + \".tmp\", \"w\").write(str(os.getpid())); "
    "os.rename(os.environ[\"PIDFILE\"] + \".tmp\", os.environ[\"PIDFILE\"]); time.sleep(120)'])\n"
    "while not os.path.exists(os.environ['PIDFILE']): time.sleep(0.01)\n"
    "{after}\n"
)


@pytest.mark.parametrize("after", ["raise SystemExit(2)", "time.sleep(120)"],
                         ids=["main-crashed", "pod-stopped"])
def test_processes_a_container_started_die_with_it(tmp_path: Path, after: str) -> None:
    from testbed.support.waiting import eventually

    pidfile = tmp_path / "child.pid"
    plan = pod(tmp_path, (dataclasses.replace(
        container(tmp_path, "server", argv=(sys.executable, "-c",
                                            STUBBORN_CHILD.format(after=after))),
        env={"PATH": "/usr/bin:/bin", "PIDFILE": str(pidfile)}),))
    runner = PodRunner(plan, tmp_path / "logs", backoff=BackOff(initial=60), probe=Answers(),
                       grace=1)
    runner.step(0.0)
    child = int(eventually(lambda: pidfile.exists() and pidfile.read_text(), timeout=30))
    if after.startswith("raise"):
        exited(runner, "server")
        runner.step(1.0)  # the main process's exit is reaped: the rest of it goes too
    else:
        runner.stop()  # SIGTERM, which the child ignores, then SIGKILL for what is left
    eventually(lambda: _gone(child), timeout=10, interval=0.05)
    runner.stop()


def test_a_termination_message_is_this_runs_log_tail_within_the_kubelets_limits(
        tmp_path: Path, stopper: Any) -> None:
    """The kubelet's FallbackToLogsOnError: the last 80 lines, at most 2048 bytes, of the
    run that ended (not of the runs before it)."""
    runner = _failed_initializer(tmp_path, stopper, (
        "import sys\nfor i in range(300): print(f'line {i:03d} ' + 'x' * 40)\n"
        "sys.stdout.flush(); print('AccessDenied: the last line', file=sys.stderr); "
        "sys.exit(1)"), 0.0)
    first = runner.status()["initContainerStatuses"][0]["lastState"]["terminated"]["message"]
    assert first.endswith("AccessDenied: the last line")
    assert len(first.encode()) <= 2048 and len(first.splitlines()) <= 80
    assert "line 299" in first and "line 200" not in first and "--- start" not in first
    runner.step(2.0)  # the restart logs into the same file
    exited(runner, "storage-initializer")
    runner.step(3.0)
    second = runner.status()["initContainerStatuses"][0]["lastState"]["terminated"]["message"]
    assert second == first
