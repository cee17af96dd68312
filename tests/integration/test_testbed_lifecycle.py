"""The testbed leaves nothing behind: every process it starts is gone when it stops."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from testbed.support.waiting import eventually


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone for our purposes once reaped or a zombie.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_up_then_ctrl_c_stops_every_process(
    tmp_path: Path, built_binaries: Callable[[str], Path]
) -> None:
    state_file = tmp_path / "state.json"
    started = time.monotonic()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "testbed",
            "up",
            "--spokes",
            "1",
            "--run-dir",
            str(tmp_path / "run"),
            "--state-file",
            str(state_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        eventually(lambda: state_file.exists() or proc.poll() is not None, timeout=240)
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        state = json.loads(state_file.read_text())
        pids = state["pids"]
        # etcd, 2 API servers, 2 controller-managers, scheduler, kwok, 2 OCM hub
        # controllers, registration and work agents.
        assert len(pids) == 11
        assert all(_alive(p) for p in pids)
        print(f"testbed with 1 spoke up in {time.monotonic() - started:.1f}s")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 0  # a bound, not a speed: stopping is parallel and capped
        assert eventually(lambda: not any(_alive(p) for p in pids), timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
