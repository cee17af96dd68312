"""Process handling: no orphans even when the testbed process is killed outright."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testbed.processes import Process, ProcessFailed, free_port, wait_until
from testbed.support.waiting import eventually


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return True
    return stat == "Z"


def test_children_die_when_parent_is_killed(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(Path.cwd())!r})
        from pathlib import Path
        from testbed.processes import Process
        procs = [Process(f"sleep{{i}}", ["sleep", "300"], Path({str(tmp_path)!r})).start()
                 for i in range(3)]
        print(" ".join(str(p.pid) for p in procs), flush=True)
        time.sleep(300)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 3 and not any(_gone(p) for p in pids)
    parent.kill()
    parent.wait()
    eventually(lambda: all(_gone(p) for p in pids), timeout=10)


def test_stop_terminates_and_check_reports_log_tail(tmp_path: Path) -> None:
    proc = Process("sleeper", ["sleep", "300"], tmp_path).start()
    assert proc.alive()
    proc.stop()
    assert not proc.alive()

    failing = Process("failing", ["sh", "-c", "echo boom-123; exit 3"], tmp_path).start()
    with pytest.raises(ProcessFailed, match="boom-123"):
        wait_until("never", lambda: False, timeout=5, watch=[failing])


def test_free_port_is_bindable() -> None:
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_free_ports_are_unique_across_processes_and_outside_the_ephemeral_range() -> None:
    """Two processes choosing ports at once never get the same one.

    The ports also lie below the kernel's ephemeral range, where an outgoing
    connection's source port could otherwise take one before its server binds.
    """
    import subprocess
    import sys
    from pathlib import Path

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    code = (
        "import sys\n"
        "from testbed.processes import free_port\n"
        "print(' '.join(str(free_port()) for _ in range(300)), flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        theirs = {int(p) for p in child.stdout.readline().split()}
        ours = [free_port() for _ in range(300)]
    finally:
        child.communicate("")
    assert len(theirs) == 300
    assert len(set(ours)) == 300
    assert not theirs & set(ours)
    assert max(theirs | set(ours)) < low


def test_go_processes_get_the_testbeds_collector_setting_unless_their_env_says_otherwise(
    tmp_path: Path,
) -> None:
    """Every testbed process runs with GOGC=400 (the Go runtime's heap target at 5x the live
    heap: memory is plentiful here, CPU is not); a process's own env wins."""
    def gogc(env: dict[str, str] | None) -> str:
        proc = Process("env", ["sh", "-c", "echo GOGC=$GOGC"], tmp_path, env=env).start()
        eventually(lambda: not proc.alive(), timeout=10, interval=0.05)
        return proc.log_path.read_text().splitlines()[-1]

    assert gogc(None) == "GOGC=400"
    assert gogc({"GOGC": "100"}) == "GOGC=100"
