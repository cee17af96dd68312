"""What each test costs the whole machine: its CPU-seconds, with its fleet's and processes'.

``TESTS_CPU_REPORT=/tmp/cpu.jsonl pytest -p no:xdist tests/integration/test_x.py`` makes
``tests/conftest.py`` append one JSON line per test: its node id, the machine's busy
CPU-seconds from the start of its setup to the end of its teardown (``/proc/stat``: every
process, so the API servers, controllers, the manager and agents it drives, and a shared
fleet's start in the setup of the first test that needs it), and its wall seconds. With one
worker nothing else runs beside the test, so the machine's time is the test's; with several
the numbers mix and mean nothing.

``python -m bench.cpu_per_test /tmp/cpu.jsonl [--top 30]`` prints the costliest tests and each
module's sum (issue 31: which tests to make cheaper).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Cost:
    """One test's cost: the machine's busy CPU-seconds and the wall seconds it took."""

    test: str
    cpu: float
    wall: float

    @property
    def module(self) -> str:
        """The test's file (the node id before its first ``::``)."""
        return self.test.split("::", 1)[0]


def read(lines: Iterable[str]) -> list[Cost]:
    """The costs of a report's JSON lines (blank lines skipped)."""
    out = []
    for line in lines:
        if line.strip():
            row = json.loads(line)
            out.append(Cost(str(row["test"]), float(row["cpu"]), float(row["wall"])))
    return out


def by_module(costs: Iterable[Cost]) -> list[tuple[str, float, float]]:
    """(module, CPU-seconds, wall seconds) summed per module, costliest first."""
    cpu: dict[str, float] = defaultdict(float)
    wall: dict[str, float] = defaultdict(float)
    for cost in costs:
        cpu[cost.module] += cost.cpu
        wall[cost.module] += cost.wall
    return sorted(((m, cpu[m], wall[m]) for m in cpu), key=lambda r: -r[1])


def render(costs: Sequence[Cost], top: int) -> str:
    """The report: totals, the ``top`` costliest tests, then every module's sum."""
    lines = [f"{len(costs)} tests, {sum(c.cpu for c in costs):.1f} CPU-seconds, "
             f"{sum(c.wall for c in costs):.1f} s", "", "costliest tests (CPU-s, wall s):"]
    for cost in sorted(costs, key=lambda c: -c.cpu)[:top]:
        lines.append(f"{cost.cpu:8.1f} {cost.wall:7.1f}  {cost.test}")
    lines += ["", "by module (CPU-s, wall s):"]
    lines += [f"{c:8.1f} {w:7.1f}  {m}" for m, c, w in by_module(costs)]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.cpu_per_test REPORT [--top N]``."""
    parser = argparse.ArgumentParser(prog="python -m bench.cpu_per_test")
    parser.add_argument("report", type=Path, help="the TESTS_CPU_REPORT file")
    parser.add_argument("--top", type=int, default=30, help="tests to list")
    args = parser.parse_args(argv)
    print(render(read(args.report.read_text().splitlines()), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
