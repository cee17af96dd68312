"""Where a command's CPU goes: every process's CPU time, by program, while the command runs.

``python -m bench.cpu -- .venv/bin/pytest -q -n 2 --dist loadgroup -m "not image" tests``

Once a second it reads ``/proc/<pid>/stat`` of every process on the machine (user and system
time) and ``/proc/stat`` (how busy the machine was); at the end it prints the machine's busy
fraction per minute and the CPU-seconds of each program (API servers, etcd, the manager and
agents, the test processes), largest first. A process that starts and ends between two samples
is not seen (a short ``kubectl``): its time shows in its parent's children's time, not here.
What it measured for ``make test`` is in the README's timing note (issue 31).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Sample:
    """One process as ``/proc`` showed it: its program's name and CPU-seconds so far."""

    pid: str
    started: str
    """The process's start time in clock ticks (a pid may be reused)."""
    program: str
    cpu: float


def program_name(argv: Sequence[str], comm: str) -> str:
    """A readable program name: the executable's, or for Python what it runs
    (``python -m pkg``, ``python script.py``); ``comm`` when there is no command line."""
    if not argv or not argv[0]:
        return comm
    exe = os.path.basename(argv[0])
    if not exe.startswith("python"):
        return exe
    if "-m" in argv[1:]:
        at = argv.index("-m")
        return f"python -m {argv[at + 1]}" if at + 1 < len(argv) else "python"
    script = next((a for a in argv[1:] if a and not a.startswith("-")), "")
    return f"python {os.path.basename(script)}".strip()


def parse_stat(pid: str, stat: str, cmdline: bytes) -> Sample:
    """A :class:`Sample` from the text of ``/proc/<pid>/stat`` and ``/proc/<pid>/cmdline``."""
    comm = stat[stat.index("(") + 1:stat.rindex(")")]
    rest = stat[stat.rindex(")") + 1:].split()
    argv = [a.decode(errors="replace") for a in cmdline.split(b"\0") if a]
    cpu = (int(rest[11]) + int(rest[12])) / TICKS
    return Sample(pid=pid, started=rest[19], program=program_name(argv, comm), cpu=cpu)


def by_program(first: Iterable[Sample], last: Iterable[Sample]) -> list[tuple[str, float]]:
    """CPU-seconds each program used between two views of its processes, largest first.

    A process in ``last`` counts what it used since ``first`` (all of it when it started
    after); one that ended between them counts what it used until its last sample.
    """
    before = {(s.pid, s.started): s.cpu for s in first}
    totals: dict[str, float] = {}
    for s in last:
        used = s.cpu - before.get((s.pid, s.started), 0.0)
        totals[s.program] = totals.get(s.program, 0.0) + used
    return sorted(totals.items(), key=lambda item: -item[1])


def machine_times() -> tuple[int, int]:
    """(all, idle) clock ticks of the machine so far, from ``/proc/stat``."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields), fields[3] + fields[4]


def processes() -> list[Sample]:
    """Every process on the machine now."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:  # it ended
            continue
        out.append(parse_stat(pid, stat, cmdline))
    return out


@dataclass
class Watch:
    """The samples of one run: the latest view of every process seen, the busy fractions."""

    first: list[Sample] = field(default_factory=list)
    latest: dict[tuple[str, str], Sample] = field(default_factory=dict)
    busy: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        """Sample once a second until :attr:`stop` is set."""
        self.first = processes()
        last = machine_times()
        while True:
            for s in processes():
                self.latest[(s.pid, s.started)] = s
            now = machine_times()
            spent = now[0] - last[0]
            self.busy.append(1 - (now[1] - last[1]) / spent if spent else 0.0)
            last = now
            if self.stop.wait(1.0):
                return


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command under the sampler; print the busy fractions and the programs' CPU."""
    parser = argparse.ArgumentParser(prog="python -m bench.cpu", description=__doc__)
    parser.add_argument("--top", type=int, default=20, help="programs to print")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    watch = Watch()
    sampler = threading.Thread(target=watch.run, daemon=True)
    sampler.start()
    started = time.monotonic()
    code = subprocess.call(command)
    watch.stop.set()
    sampler.join()
    wall = time.monotonic() - started
    minutes = [watch.busy[i:i + 60] for i in range(0, len(watch.busy), 60)]
    print(f"{' '.join(command)}: exit {code}, {wall:.0f} s", file=sys.stderr)
    print("busy per minute: " + " ".join(f"{sum(m) / len(m):.2f}" for m in minutes if m),
          file=sys.stderr)
    rows = by_program(watch.first, watch.latest.values())
    print(f"CPU-seconds of every process seen: {sum(cpu for _, cpu in rows):.0f}",
          file=sys.stderr)
    for name, cpu in rows[:args.top]:
        print(f"{cpu:9.1f}  {name}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
