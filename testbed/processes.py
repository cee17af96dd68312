"""Child processes of the testbed: start, watch, tail logs, stop without orphans."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1


GO_RUNTIME = {"GOGC": os.environ.get("TESTBED_GOGC", "400")}
"""The Go runtime's settings for every process the testbed starts (Python ignores them): the
collector's heap target is 5x the live heap instead of 2x (Go's default, GOGC=100). Memory is
plentiful here and CPU is not: a CPU profile of a spoke's API server in the end-to-end module
(``TESTBED_PROFILING=1``, ``go tool pprof``) had a sixth of its samples in the collector's
mark workers, and with 400 the module's three API servers used 104 CPU-seconds instead of 124
(2026-12-05). ``TESTBED_GOGC`` overrides it."""


class ProcessFailed(RuntimeError):
    """A testbed process exited (or never became ready); carries its log tail."""


def die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """Ask the kernel to SIGKILL this child when the testbed process dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    os.setpgrp()


# Ports are handed out below the kernel's ephemeral range (32768-60999 on
# Linux), so an outgoing connection's source port can never take one between
# the moment it is chosen and the moment its server binds it. Processes of
# one machine (pytest, `make demo`, benchmarks) coordinate through a lock file
# per port, held for the life of the process that chose it.
_PORT_RANGE = range(20000, 32000)
_PORT_LOCK_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / "model-serving-addon-ports"
_held_ports: dict[int, int] = {}


def _claim(port: int) -> bool:
    """Lock `port` for this process if no other process of ours holds it."""
    if port in _held_ports:
        return False
    _PORT_LOCK_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(_PORT_LOCK_DIR / f"{port}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _held_ports[port] = fd
    return True


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on and no other caller got.

    Each port is returned once per process and locked against the other
    processes of the project until this one exits; it lies outside the
    kernel's ephemeral range, so client connections cannot take it either.
    """
    span = len(_PORT_RANGE)
    start = random.randrange(span)
    for offset in range(span):
        port = _PORT_RANGE[(start + offset) % span]
        # A claimed port that is not bindable belongs to someone else's
        # server; the claim stays so this process does not try it again.
        if _claim(port) and _bindable(port):
            return port
    raise RuntimeError(f"no free TCP port left in {_PORT_RANGE.start}-{_PORT_RANGE.stop - 1}")


class Process:
    """One long-running binary with its log file.

    Processes must be started from the main thread: the kernel delivers the
    parent-death signal when the *thread* that forked the child exits.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_dir: Path,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = [str(a) for a in argv]
        self.env = env
        self.log_path = log_dir / f"{name}.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self.stopped = False
        """Stopped on purpose (:meth:`stop`, fault injection) and not started since: its exit
        is not a failure (:meth:`check`)."""

    @property
    def pid(self) -> int | None:
        """PID of the running process, if started."""
        return self._proc.pid if self._proc else None

    def start(self) -> Process:
        """Start the process, appending its output to its log file."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"--- start {' '.join(self.argv)}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **GO_RUNTIME, **(self.env or {})},
                preexec_fn=die_with_parent,
            )
        # Only now: a check() from another thread meanwhile must not take the process stopped
        # on purpose (the one replaced) for a failure.
        self.stopped = False
        return self

    def alive(self) -> bool:
        """True while the process runs."""
        return self._proc is not None and self._proc.poll() is None

    def check(self) -> None:
        """Raise ProcessFailed with the log tail when the process has exited.

        A process stopped on purpose (:meth:`stop`) has not failed.
        """
        if self._proc is not None and not self.stopped and self._proc.poll() is not None:
            raise ProcessFailed(
                f"{self.name} exited with code {self._proc.returncode}; last log lines "
                f"({self.log_path}):\n{self.tail()}"
            )

    def tail(self, lines: int = 25) -> str:
        """The last lines of the process log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the process (and its process group), killing it after ``timeout``."""
        self.stopped = True
        if self.terminate():
            self.reap(time.monotonic() + timeout)

    def terminate(self) -> bool:
        """Send SIGTERM to the process group; False when it was not running."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return False
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return False
        return True

    def reap(self, deadline: float) -> bool:
        """Wait for the exit after :meth:`terminate`; SIGKILL the group at ``deadline``.

        True when it had to be killed.
        """
        proc = self._proc
        if proc is None:
            return False
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
            return True
        return False

    def kill(self) -> None:
        """SIGKILL the process at once (fault injection)."""
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(5)


def wait_until(
    what: str,
    condition: Callable[[], object],
    timeout: float,
    watch: Sequence[Process] = (),
    interval: float = 0.25,
) -> None:
    """Poll ``condition()`` until true; fail early when a watched process dies."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        for proc in watch:
            proc.check()
        try:
            if condition():
                return
        except Exception as exc:  # the condition may fail while a server starts
            last_error = exc
        time.sleep(interval)
    detail = f" (last error: {last_error})" if last_error else ""
    tails = "".join(f"\n--- {p.name} ({p.log_path}):\n{p.tail(15)}" for p in watch)
    raise ProcessFailed(f"timed out after {timeout:.0f}s waiting for {what}{detail}{tails}")
