"""Run a translated pod (:class:`~testbed.dataplane.podspec.PodPlan`) the way a kubelet would.

- volumes are created under the pod's root and filled before any container starts;
- init containers run one after the other, each to completion; a failed one is run again
  after a back-off (``restartPolicy: Always``/``OnFailure``) and the pod never gets further;
- then every container starts; an exited one is recorded with its real exit status
  (``128 + signal`` when a signal ended it, as the kubelet reports it) and, after the
  kubelet's back-off (10 s doubling to 300 s, reset after 10 minutes of running), started
  again with its restart count raised;
- readiness follows the container's readiness probe (or the server's own readiness endpoint,
  :mod:`~testbed.dataplane.podspec`), liveness probes kill and restart, startup probes hold
  both back until they pass;
- :meth:`PodRunner.status` is the pod's ``status`` as Kubernetes writes it (phase, conditions,
  container statuses with ``state``/``lastState``, exit codes and termination messages).

All processes of a runner are forked by its one supervising thread (the parent-death signal
follows the forking thread), each in a process group of its own, logging to
``<log_dir>/<pod>/<container>.log``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from testbed.dataplane.podspec import ContainerPlan, PodPlan, Probe
from testbed.processes import die_with_parent

Obj = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class BackOff:
    """The kubelet's crash-loop back-off.

    ``initial`` doubling up to ``maximum``; a container that ran ``reset_after`` seconds
    starts from ``initial`` again.
    """

    initial: float = 10.0
    maximum: float = 300.0
    reset_after: float = 600.0

    def delay(self, previous: float | None, ran_for: float) -> float:
        """The wait before the next start, given the last wait and how long the run lasted."""
        if previous is None or ran_for >= self.reset_after:
            return self.initial
        return min(previous * 2, self.maximum)


MESSAGE_LINES = 80
MESSAGE_BYTES = 2048
"""The kubelet's limits on a termination message taken from the log
(``kubecontainer.MaxContainerTerminationMessageLogLines`` and ``...LogLength``)."""


def _kill_group(pgid: int) -> None:
    """SIGKILL every process left in a container's process group.

    A container's processes end with its main process (its PID namespace goes); here each
    container is a process group, the main process its leader.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def probe_once(probe: Probe) -> bool:
    """Run one probe: an HTTP status in 200-399, or a TCP connection that opens."""
    if probe.kind == "tcp":
        try:
            with socket.create_connection(("127.0.0.1", probe.port), timeout=probe.timeout):
                return True
        except OSError:
            return False
    request = urllib.request.Request(probe.url, headers=dict(probe.headers))
    try:
        with urllib.request.urlopen(request, timeout=probe.timeout) as response:
            return 200 <= int(response.status) < 400
    except urllib.error.HTTPError as err:
        return 200 <= err.code < 400
    except (OSError, ValueError):
        return False


@dataclasses.dataclass
class _ProbeState:
    probe: Probe
    due: float
    successes: int = 0
    failures: int = 0
    passed: bool = False


class ContainerRun:
    """One container's process across its restarts, and its Kubernetes status."""

    def __init__(self, plan: ContainerPlan, log_path: Path, init: bool) -> None:
        self.plan = plan
        self.init = init
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.restart_count = 0
        self.ready = False
        self.started_at: str | None = None
        self.started_mono = 0.0
        self.state: Obj = {"waiting": {"reason": "PodInitializing" if not init else "Pending"}}
        self.last_state: Obj = {}
        self.next_start: float | None = 0.0
        """Monotonic time of the next start; None while running or when done for good."""
        self.last_delay: float | None = None
        self.restart_delays: list[float] = []
        """Every back-off waited before a restart, in order (what the test of back-off reads)."""
        self.completed = False
        self.probes: dict[str, _ProbeState] = {}

    @property
    def pid(self) -> int | None:
        """PID of the running process (the leader of its process group), if any."""
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def spawn(self, now: float) -> None:
        """Start the process (from the supervising thread)."""
        self.plan.cwd.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"--- start {' '.join(self.plan.argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                list(self.plan.argv), cwd=self.plan.cwd, env=self.plan.env,
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent,
            )
        self.started_at = _now()
        self.started_mono = now
        self.state = {"running": {"startedAt": self.started_at}}
        self.next_start = None
        self.ready = False
        self.probes = {}
        for kind, probe in (("startup", self.plan.startup), ("readiness", self.plan.readiness),
                            ("liveness", self.plan.liveness)):
            if probe is not None:
                self.probes[kind] = _ProbeState(probe, now + probe.initial_delay)

    def termination_message(self, exit_code: int) -> str:
        """The kubelet's ``FallbackToLogsOnError``: the log's tail when the exit failed.

        As the kubelet reads it: the last :data:`MESSAGE_LINES` lines of this run's log, at
        most :data:`MESSAGE_BYTES` bytes of them. Under the default policy (``File``) the
        message is what the container wrote to its ``terminationMessagePath``, a file no
        process here can write: none.
        """
        if exit_code == 0 or self.plan.termination_message_policy != "FallbackToLogsOnError":
            return ""
        try:
            data = self.log_path.read_bytes()
        except FileNotFoundError:
            return ""
        run = data.rsplit(b"\n--- start ", 1)[-1] if b"\n--- start " in data else data
        lines = [line for line in run.split(b"\n") if not line.startswith(b"--- start ")]
        tail = b"\n".join(lines[-MESSAGE_LINES:]).strip(b"\n")[-MESSAGE_BYTES:]
        return tail.decode(errors="replace")

    def reap(self, now: float, backoff: BackOff, policy: str, reason: str | None = None) -> bool:
        """Record an exit if the process has ended; True when it had.

        The restart is scheduled as ``policy`` (``Always``, ``OnFailure``, ``Never``) says.
        """
        if self.proc is None:
            return False
        code = self.proc.poll()
        if code is None:
            return False
        exit_code = 128 - code if code < 0 else code
        terminated: Obj = {
            "exitCode": exit_code,
            "reason": reason or ("Completed" if exit_code == 0 else "Error"),
            "startedAt": self.started_at,
            "finishedAt": _now(),
        }
        if code < 0:
            terminated["signal"] = -code
        message = self.termination_message(exit_code)
        if message:
            terminated["message"] = message
        _kill_group(self.proc.pid)
        self.proc = None
        self.ready = False
        self.probes = {}
        if self.init and exit_code == 0:
            self.completed = True
            self.state = {"terminated": terminated}
            return True
        if policy == "Never" or (policy == "OnFailure" and exit_code == 0):
            self.state = {"terminated": terminated}
            return True
        self.last_state = {"terminated": terminated}
        delay = backoff.delay(self.last_delay, now - self.started_mono)
        self.last_delay = delay
        self.next_start = now + delay
        self.state = {"waiting": {"reason": "CrashLoopBackOff",
                                  "message": f"back-off {delay:g}s restarting failed container="
                                             f"{self.plan.name}"}}
        return True

    def run_probes(self, now: float, probe: Callable[[Probe], bool]) -> bool:
        """Run the probes that are due; False when liveness (or startup) failed for good."""
        startup = self.probes.get("startup")
        if startup is not None and not startup.passed:
            if not self._run(startup, now, probe):
                return startup.failures < startup.probe.failure_threshold
            if not startup.passed:
                return True
        readiness = self.probes.get("readiness")
        if readiness is not None:
            self._run(readiness, now, probe)
            self.ready = readiness.passed
        elif self.pid is not None:
            self.ready = True
        liveness = self.probes.get("liveness")
        if liveness is not None:
            self._run(liveness, now, probe)
            if liveness.failures >= liveness.probe.failure_threshold:
                return False
        return True

    @staticmethod
    def _run(state: _ProbeState, now: float, probe: Callable[[Probe], bool]) -> bool:
        """Run ``state``'s probe if due; True when it ran and succeeded."""
        if now < state.due:
            return False
        state.due = now + state.probe.period
        if probe(state.probe):
            state.successes += 1
            state.failures = 0
            if state.successes >= state.probe.success_threshold:
                state.passed = True
            return True
        state.failures += 1
        state.successes = 0
        if state.failures >= state.probe.failure_threshold:
            state.passed = False
        return False

    def terminate(self, grace: float) -> None:
        """SIGTERM the process group; SIGKILL it after ``grace`` seconds."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is not None:
            _kill_group(proc.pid)
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.wait(5)
        # What the main process left behind goes with it (MLServer's inference workers
        # ignore SIGTERM and outlive a stopped server otherwise).
        _kill_group(proc.pid)

    def status(self) -> Obj:
        """The container's entry of ``containerStatuses``/``initContainerStatuses``."""
        running = "running" in self.state
        entry: Obj = {
            "name": self.plan.name,
            "image": self.plan.image,
            "imageID": "",
            "ready": self.ready,
            "started": running,
            "restartCount": self.restart_count,
            "state": self.state,
            "lastState": self.last_state,
        }
        return entry


class PodRunner:
    """A pod's containers as supervised processes, and the pod status they amount to."""

    def __init__(
        self,
        plan: PodPlan,
        log_dir: Path,
        backoff: BackOff | None = None,
        probe: Callable[[Probe], bool] = probe_once,
        interval: float = 0.2,
        grace: float = 10.0,
        on_change: Callable[[Obj], None] | None = None,
    ) -> None:
        self.plan = plan
        self.on_change = on_change
        """Called from the supervising thread with every new pod status (what a kubelet
        would write to the API server)."""
        self._published: Obj | None = None
        self.backoff = backoff or BackOff()
        self.probe = probe
        self.interval = interval
        self.grace = grace
        pod_logs = log_dir / f"{plan.namespace}_{plan.name}"
        self.init_runs = [ContainerRun(c, pod_logs / f"{c.name}.log", init=True)
                          for c in plan.init_containers]
        self.runs = [ContainerRun(c, pod_logs / f"{c.name}.log", init=False)
                     for c in plan.containers]
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.failed: str | None = None
        """Set when the supervising thread itself failed (its exception's text)."""

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> PodRunner:
        """Create the volumes and start supervising (returns at once)."""
        for volume in self.plan.volumes:
            volume.path.mkdir(parents=True, exist_ok=True)
            for relative, content in volume.files.items():
                target = volume.path / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
        self._thread = threading.Thread(target=self._supervise, name=f"pod {self.plan.key}",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop supervising, then terminate every process (SIGKILL after the grace period)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(self.grace + 15)
        for run in [*self.init_runs, *self.runs]:
            run.terminate(self.grace)

    def __enter__(self) -> PodRunner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------- fault injection
    def container(self, name: str) -> ContainerRun:
        """The run of the container (or init container) named ``name``."""
        for run in [*self.init_runs, *self.runs]:
            if run.plan.name == name:
                return run
        raise KeyError(name)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` to container ``name``'s process group; return the PID it had."""
        pid = self.container(name).pid
        if pid is None:
            raise RuntimeError(f"container {name} of {self.plan.key} is not running")
        os.killpg(pid, sig)
        return pid

    # -------------------------------------------------------------- supervision
    def _supervise(self) -> None:
        try:
            while not self._stopping.is_set():
                self.step(time.monotonic())
                self._stopping.wait(self.interval)
        except Exception as exc:  # recorded for status(); the pod is then not ready
            self.failed = f"{type(exc).__name__}: {exc}"
            with self._lock:
                for run in self.runs:
                    run.ready = False

    def step(self, now: float) -> None:
        """One pass of the kubelet's loop: reap, restart, probe; then report a changed status."""
        self._step(now)
        if self.on_change is not None:
            status = self.status()
            if status != self._published:
                self._published = status
                self.on_change(status)

    def _step(self, now: float) -> None:
        policy = self.plan.restart_policy
        # Init containers of a pod that restarts are restarted only when they fail.
        init_policy = "Never" if policy == "Never" else "OnFailure"
        with self._lock:
            for run in self.init_runs:
                if run.completed:
                    continue
                if run.proc is not None:
                    if run.reap(now, self.backoff, init_policy) and run.completed:
                        continue
                    return
                if run.next_start is not None and now >= run.next_start:
                    if run.started_at is not None:
                        run.restart_count += 1
                    run.spawn(now)
                return
            for run in self.runs:
                if run.proc is not None:
                    run.reap(now, self.backoff, policy)
                if run.proc is None and run.next_start is not None and now >= run.next_start:
                    if run.started_at is not None:
                        run.restart_count += 1
                        run.restart_delays.append(run.last_delay or 0.0)
                    run.spawn(now)
                    continue
                if run.proc is not None and not run.run_probes(now, self.probe):
                    # Liveness failed: the kubelet kills the container and restarts it.
                    run.terminate(self.grace)
                    run.reap(now, self.backoff, "Always")

    # ------------------------------------------------------------------- status
    def ready(self) -> bool:
        """True when every container is ready (the pod's Ready condition)."""
        with self._lock:
            return bool(self.runs) and all(r.ready for r in self.runs)

    def status(self) -> Obj:
        """The pod's ``status`` as Kubernetes writes it."""
        with self._lock:
            initialized = all(r.completed for r in self.init_runs)
            ready = initialized and bool(self.runs) and all(r.ready for r in self.runs)
            terminal = [r for r in self.runs if "terminated" in r.state]
            if not initialized:
                phase = "Pending"
            elif terminal and len(terminal) == len(self.runs):
                codes = [r.state["terminated"]["exitCode"] for r in terminal]
                phase = "Succeeded" if not any(codes) else "Failed"
            else:
                phase = "Running"

            def condition(kind: str, true: bool, reason: str | None = None) -> Obj:
                entry: Obj = {"type": kind, "status": "True" if true else "False"}
                if reason and not true:
                    entry["reason"] = reason
                return entry

            unready = [r.plan.name for r in self.runs if not r.ready]
            why = f"containers with unready status: [{' '.join(unready)}]" if unready else None
            conditions = [
                condition("PodReadyToStartContainers", True),
                condition("Initialized", initialized, "ContainersNotInitialized"),
                condition("ContainersReady", ready, "ContainersNotReady"),
                condition("Ready", ready, "ContainersNotReady"),
                condition("PodScheduled", True),
            ]
            for entry in conditions:
                if entry["status"] == "False" and why and entry["type"] in (
                        "ContainersReady", "Ready"):
                    entry["message"] = why
            status: Obj = {
                "phase": phase,
                "conditions": conditions,
                "hostIP": "127.0.0.1",
                "podIP": "127.0.0.1",
                "podIPs": [{"ip": "127.0.0.1"}],
                "containerStatuses": [r.status() for r in self.runs],
            }
            if self.init_runs:
                status["initContainerStatuses"] = [r.status() for r in self.init_runs]
            return status
