"""Steady state and memory: a settled fleet over minutes of no change.

``python -m bench.steady --clusters 1000 --intents 10 --seconds 120``

``--intents`` counts every intent: one ModelServing (its works report the ServingPlatform
Available, as the work agent would, which opens the ordering gate) plus ``intents - 1``
MultiClusterInferenceServices. Once every work is written and the manager has made no write
for 10 s, the benchmark counts the manager's API writes (``model_serving_api_writes_total``)
and CPU seconds (``/proc/<pid>/stat`` utime + stime) over ``--seconds`` of no change, and
reads its peak RSS (``VmHWM``) and current RSS.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import (
    api_client,
    cpu_seconds,
    hub,
    log,
    memory_mib,
    quiesce,
    settled,
    table,
)
from bench.common import writes as api_writes


def measure(clusters: int, intents: int, seconds: float) -> list[str]:
    """One settled fleet; the table row of what it cost while nothing changed."""
    with tempfile.TemporaryDirectory(prefix="bench-steady-") as tmp, hub() as tb:
        api = api_client(tb)
        start = time.monotonic()
        with settled(tb, api, Path(tmp) / "manager.log", clusters, intents - 1) as (mgr, _, _):
            assert mgr.proc is not None
            pid = mgr.proc.pid
            settle = time.monotonic() - start
            log(f"quiet after {quiesce(mgr):.1f}s more")
            writes0, cpu0 = api_writes(mgr), cpu_seconds(pid)
            time.sleep(seconds)
            idle, cpu = api_writes(mgr) - writes0, cpu_seconds(pid) - cpu0
            peak, rss = memory_mib(pid), memory_mib(pid, "VmRSS")
            total = api_writes(mgr)
    log(f"{clusters} x {intents}: {idle:.0f} writes, {cpu:.2f} CPU s in {seconds:.0f}s")
    return [
        f"{clusters:,}", str(intents), f"{clusters * intents:,}", f"{settle:.0f}",
        f"{total:,.0f}", f"{seconds:.0f}", f"{idle:.0f}", f"{cpu:.2f}",
        f"{100 * cpu / seconds:.1f}", f"{peak:.0f}", f"{rss:.0f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", default="1000", help="comma-separated sizes")
    parser.add_argument("--intents", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=120)
    args = parser.parse_args()
    rows = [
        measure(int(n), args.intents, args.seconds) for n in args.clusters.split(",") if n.strip()
    ]
    print("\n" + table(
        ["clusters", "intents", "works", "settle s", "writes to settle", "idle s",
         "idle writes", "idle CPU s", "idle CPU %", "peak RSS MiB", "RSS MiB"],
        rows,
    ), flush=True)


if __name__ == "__main__":
    main()
