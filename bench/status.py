"""Status aggregation: feedback changes on every cluster; how fast and with how many status
writes the intents' status reflects it.

``python -m bench.status --clusters 1000 --intents 3``

A settled fleet (the ModelServing gate open, ``--intents`` MultiClusterInferenceServices on
every cluster). Then the work agent's side is played: every InferenceService work's status
gets feedback, first ``Ready=True`` with a URL (all N ready), then a failed load
(``lastFailureInfo.reason``, all N failed). For each change: the seconds the N x intents
status patches took (the agents' side), the seconds until every intent's ``status.summary``
counts all N (from the first patch), and the manager's status writes it took.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

from bench.common import (
    INTENTS,
    ISVC_META,
    api_client,
    hub,
    isvc_work_name,
    log,
    parallel,
    quiesce,
    scrape,
    settled,
    summary,
    table,
    wait_for,
    writes,
)
from testbed.support.manager import Manager, report_work_status

READY = {"ready": "True", "readyReason": "Ready", "predictorReady": "True",
         "url": "http://isvc.example", "activeModelState": "Loaded"}
FAILED = {"ready": "False", "readyReason": "ModelLoadFailed", "predictorReady": "False",
          "failureReason": "ModelLoadFailed", "failureMessage": "bench: load failed",
          "transitionStatus": "BlockedByFailedLoad"}


def change(
    api: client.ApiClient, mgr: Manager, clusters: list[str], isvcs: list[str],
    values: dict[str, Any], field: str,
) -> list[str]:
    """Report ``values`` on every work; wait until every summary counts N in ``field``."""
    custom = client.CustomObjectsApi(api)
    before = writes(mgr, "patch-status")
    spent_before, count_before = reconciles(mgr)
    jobs = [(cl, name) for name in isvcs for cl in clusters]

    def one(job: tuple[str, str]) -> None:
        cl, name = job
        report_work_status(api, cl, isvc_work_name(name), {**ISVC_META, "name": name}, values)

    start = time.monotonic()
    parallel(one, jobs)
    patched = time.monotonic() - start
    done: Callable[[], bool] = lambda: all(  # noqa: E731
        summary(custom, INTENTS, n).get(field, 0) == len(clusters) for n in isvcs
    )
    wait_for(done, 900, f"all {field}", interval=0.2)
    reflected = time.monotonic() - start
    status_writes = writes(mgr, "patch-status") - before
    spent, count = (a - b for a, b in zip(reconciles(mgr), (spent_before, count_before),
                                          strict=True))
    mean = spent / count if count else 0.0
    log(f"{field}: patches {patched:.1f}s, reflected {reflected:.1f}s, "
        f"{status_writes:.0f} status writes, {count:.0f} reconciles of {mean:.2f}s on average")
    return [
        f"{len(clusters):,}", str(len(isvcs)), f"all {field}", f"{len(jobs):,}",
        f"{patched:.1f}", f"{reflected:.1f}", f"{reflected - patched:.1f}",
        f"{status_writes:.0f}", f"{status_writes / len(isvcs):.1f}", f"{count:.0f}",
        f"{mean:.2f}",
    ]


def reconciles(mgr: Manager) -> tuple[float, float]:
    """(seconds, count) of the manager's MultiClusterInferenceService reconciles so far.

    What the status's delay after the last feedback is made of: at most ``--min-interval``
    (1 s) of the daemon's pause after its last write, then one such reconcile.
    """
    kind = 'kind="MultiClusterInferenceService"'
    return (scrape(mgr, "model_serving_reconcile_duration_seconds_sum", kind),
            scrape(mgr, "model_serving_reconcile_duration_seconds_count", kind))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--intents", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-status-") as tmp, hub() as tb:
        api = api_client(tb)
        log_path = Path(tmp) / "manager.log"
        with settled(tb, api, log_path, args.clusters, args.intents) as (mgr, names, isvcs):
            quiesce(mgr)
            rows = [change(api, mgr, names, isvcs, READY, "ready")]
            quiesce(mgr, quiet=5)
            rows.append(change(api, mgr, names, isvcs, FAILED, "failed"))
    print("\n" + table(
        ["clusters", "intents", "change", "work status patches", "patching s",
         "reflected s (from first patch)", "after last patch s", "status writes",
         "status writes per intent", "reconciles", "mean reconcile s"],
        rows,
    ), flush=True)


if __name__ == "__main__":
    main()
