"""Where a command's CPU goes: every process's CPU time, by program, while the command runs.

``python -m bench.cpu -- .venv/bin/pytest -q -n 2 --dist loadgroup -m "not image" tests``

Once a second it reads ``/proc/<pid>/stat`` of every process on the machine (user and system
time) and ``/proc/stat`` (how busy the machine was); at the end it prints the machine's busy
fraction per minute and the CPU-seconds of each program (API servers, etcd, the manager and
agents, the test processes), largest first. A process that starts and ends between two samples
is not seen (a short ``kubectl``): its time shows in its parent's children's time, not here.
The testbed's control-plane processes are named with their cluster's role (``kube-apiserver
[spoke]``). With ``--by-module`` each process is also charged to the test module that started
it (the ``PYTEST_CURRENT_TEST`` of its environment: a fleet's processes to the module whose
first test started the fleet; ``-`` for none). What it measured for ``make test`` is in the
README's timing note (issue 31).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
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
    module: str = "-"
    """The test module that started the process (``--by-module``), ``-`` when none did."""


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


def cluster_role(argv: Sequence[str]) -> str:
    """``hub`` or ``spoke`` for a testbed cluster's process (its etcd prefix or its cluster's
    directory in a path argument), "" for anything else."""
    for arg in argv:
        found = re.search(r"--etcd-prefix=/(\w+)", arg) or re.search(r"/(hub|cluster\d+)/", arg)
        if found:
            return "hub" if found.group(1) == "hub" else "spoke"
    return ""


def module_of(environ: bytes) -> str:
    """The test file (``test_x.py``) a process's environment names in ``PYTEST_CURRENT_TEST``
    (pytest sets it while a test runs, and the processes it starts inherit it); ``-``."""
    for entry in environ.split(b"\0"):
        if entry.startswith(b"PYTEST_CURRENT_TEST="):
            node = entry.split(b"=", 1)[1].decode(errors="replace")
            return node.split("::", 1)[0].rsplit("/", 1)[-1]
    return "-"


def parse_stat(pid: str, stat: str, cmdline: bytes) -> Sample:
    """A :class:`Sample` from the text of ``/proc/<pid>/stat`` and ``/proc/<pid>/cmdline``."""
    comm = stat[stat.index("(") + 1:stat.rindex(")")]
    rest = stat[stat.rindex(")") + 1:].split()
    argv = [a.decode(errors="replace") for a in cmdline.split(b"\0") if a]
    cpu = (int(rest[11]) + int(rest[12])) / TICKS
    name, role = program_name(argv, comm), cluster_role(argv)
    return Sample(pid=pid, started=rest[19], program=f"{name} [{role}]" if role else name,
                  cpu=cpu)


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


def by_module(first: Iterable[Sample], last: Iterable[Sample]
              ) -> list[tuple[tuple[str, str], float]]:
    """CPU-seconds per (test module, program) between two views, largest first; counted as
    :func:`by_program` counts them."""
    before = {(s.pid, s.started): s.cpu for s in first}
    totals: dict[tuple[str, str], float] = {}
    for s in last:
        key = (s.module, s.program)
        totals[key] = totals.get(key, 0.0) + s.cpu - before.get((s.pid, s.started), 0.0)
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
    modules: bool = False
    """Read each new process's environment for its test module (:func:`module_of`)."""

    def run(self) -> None:
        """Sample once a second until :attr:`stop` is set."""
        self.first = processes()
        last = machine_times()
        while True:
            for s in processes():
                key = (s.pid, s.started)
                known = self.latest.get(key)
                if known is not None:
                    s = replace(s, module=known.module)
                elif self.modules:
                    with contextlib.suppress(OSError):  # it ended, or is not ours to read
                        s = replace(s, module=module_of(
                            Path(f"/proc/{s.pid}/environ").read_bytes()))
                self.latest[key] = s
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
    parser.add_argument("--by-module", action="store_true",
                        help="also charge each process to the test module that started it")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    watch = Watch(modules=args.by_module)
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
    if args.by_module:
        pairs = by_module(watch.first, watch.latest.values())
        modules: dict[str, float] = {}
        for (module, _), cpu in pairs:
            modules[module] = modules.get(module, 0.0) + cpu
        print("by the test module that started the process:", file=sys.stderr)
        for module, cpu in sorted(modules.items(), key=lambda item: -item[1])[:args.top]:
            print(f"{cpu:9.1f}  {module}", file=sys.stderr)
        print("by module and program:", file=sys.stderr)
        for (module, name), cpu in pairs[:args.top * 2]:
            print(f"{cpu:9.1f}  {module:40s} {name}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
