"""Fan-out of one MultiClusterInferenceService to N clusters: ours vs OCM's
ManifestWorkReplicaSet vs a tight concurrent client (the limit).

``python -m bench.fanout --sizes 100,300,1000 [--threads 16]``

One testbed hub, one process. For each N (ascending): the fleet grows to N spoke-less
ManagedClusters, one Placement selects them all, the manager starts and the ModelServing
ordering gate is opened (its works report the ServingPlatform Available, as the work agent
would). Then, sequentially, each contender creates, changes (``minReplicas`` 1 -> 2) and
deletes the same ManifestWork content on all N clusters; a phase ends when a watch has seen
all N works with the expected workload (or none left). The manager is stopped after its run
and before the others; the work manager runs only for the ManifestWorkReplicaSet.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from addon_manager.shell.apply import APPLY_CONTENT_TYPE
from bench.common import (
    INTENTS,
    MWRS,
    NAMESPACE,
    WORK,
    Fleet,
    Platforms,
    WorkWatch,
    api_client,
    content,
    ensure_placement,
    hub,
    inference_service,
    isvc_work_name,
    log,
    parallel,
    quiesce,
    rendered,
    start_manager,
    table,
)
from testbed.fleet import Testbed

PLACEMENT = "fleet"
PHASES = ("create", "update", "delete")
CONTENDERS = ("ours", "mwrs", "limit", "limit-ssa")


@dataclass
class Run:
    """Seconds per phase of one contender at one size."""

    contender: str
    size: int
    seconds: dict[str, float] = field(default_factory=dict)


def _digests(name: str) -> tuple[str, str]:
    """Expected workload digests before and after the change."""
    return (
        content(rendered(inference_service(name, PLACEMENT, 1), "x")),
        content(rendered(inference_service(name, PLACEMENT, 2), "x")),
    )


def run_ours(tb: Testbed, api: client.ApiClient, size: int) -> Run:
    """The manager: create, change and delete the intent."""
    custom = client.CustomObjectsApi(api)
    name = f"ours{size}"
    first, second = _digests(name)
    run = Run("ours", size)
    with WorkWatch(api, isvc_work_name(name)) as works:
        start = time.monotonic()
        custom.create_namespaced_custom_object(
            *INTENTS[:2], NAMESPACE, INTENTS[2], inference_service(name, PLACEMENT, 1)
        )
        works.wait_content(size, first)
        run.seconds["create"] = time.monotonic() - start
        start = time.monotonic()
        custom.patch_namespaced_custom_object(
            *INTENTS[:2], NAMESPACE, INTENTS[2], name,
            {"spec": {"template": {"predictor": {"minReplicas": 2}}}},
        )
        works.wait_content(size, second)
        run.seconds["update"] = time.monotonic() - start
        start = time.monotonic()
        custom.delete_namespaced_custom_object(*INTENTS[:2], NAMESPACE, INTENTS[2], name)
        works.wait_gone()
        run.seconds["delete"] = time.monotonic() - start
    return run


def _mwrs(name: str, replicas: int) -> dict[str, Any]:
    spec = rendered(inference_service(name, PLACEMENT, replicas), "x")["spec"]
    return {
        "apiVersion": "work.open-cluster-management.io/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "placementRefs": [{"name": PLACEMENT, "rolloutStrategy": {"type": "All"}}],
            "manifestWorkTemplate": spec,
        },
    }


def run_mwrs(tb: Testbed, api: client.ApiClient, size: int) -> Run:
    """OCM's ManifestWorkReplicaSet with the same template, driven by the work manager."""
    custom = client.CustomObjectsApi(api)
    name = f"mwrs{size}"
    first, second = _digests(name)
    run = Run("mwrs", size)
    proc = tb.ensure_hub_controller("work-manager")
    try:
        time.sleep(3)  # its informers sync
        with WorkWatch(api, name) as works:
            start = time.monotonic()
            custom.create_namespaced_custom_object(*MWRS[:2], NAMESPACE, MWRS[2], _mwrs(name, 1))
            works.wait_content(size, first)
            run.seconds["create"] = time.monotonic() - start
            start = time.monotonic()
            template = _mwrs(name, 2)["spec"]["manifestWorkTemplate"]
            custom.patch_namespaced_custom_object(
                *MWRS[:2], NAMESPACE, MWRS[2], name,
                {"spec": {"manifestWorkTemplate": {"workload": template["workload"]}}},
            )
            works.wait_content(size, second)
            run.seconds["update"] = time.monotonic() - start
            start = time.monotonic()
            custom.delete_namespaced_custom_object(*MWRS[:2], NAMESPACE, MWRS[2], name)
            works.wait_gone()
            run.seconds["delete"] = time.monotonic() - start
    finally:
        proc.stop()
    return run


def run_limit(api: client.ApiClient, clusters: list[str], threads: int, ssa: bool) -> Run:
    """A tight client: POST, merge-PATCH and DELETE the same works, ``threads`` at a time
    (``ssa``: server-side apply for create and update, as the manager writes)."""
    custom = client.CustomObjectsApi(api)
    size = len(clusters)
    name = f"limit{'ssa' if ssa else ''}{size}"
    run = Run("limit-ssa" if ssa else "limit", size)
    first, second = _digests(name)

    def body(cluster: str, replicas: int) -> dict[str, Any]:
        work = rendered(inference_service(name, PLACEMENT, replicas), cluster)
        work["metadata"]["name"] = name
        return work

    def apply(cluster: str, replicas: int) -> None:
        custom.patch_namespaced_custom_object(
            *WORK[:2], cluster, WORK[2], name, body(cluster, replicas),
            field_manager="bench", force=True, _content_type=APPLY_CONTENT_TYPE,
        )

    def create(cluster: str) -> None:
        if ssa:
            apply(cluster, 1)
            return
        custom.create_namespaced_custom_object(*WORK[:2], cluster, WORK[2], body(cluster, 1))

    def update(cluster: str) -> None:
        if ssa:
            apply(cluster, 2)
            return
        work = body(cluster, 2)
        patch = {"metadata": {"annotations": work["metadata"]["annotations"]},
                 "spec": {"workload": work["spec"]["workload"]}}
        custom.patch_namespaced_custom_object(*WORK[:2], cluster, WORK[2], name, patch)

    def delete(cluster: str) -> None:
        custom.delete_namespaced_custom_object(*WORK[:2], cluster, WORK[2], name)

    with WorkWatch(api, name) as works:
        steps: list[tuple[str, Callable[[str], None], Callable[[], float]]] = [
            ("create", create, lambda: works.wait_content(size, first)),
            ("update", update, lambda: works.wait_content(size, second)),
            ("delete", delete, works.wait_gone),
        ]
        for phase, fn, done in steps:
            start = time.monotonic()
            parallel(fn, clusters, threads)
            done()
            run.seconds[phase] = time.monotonic() - start
    return run


def one_size(
    tb: Testbed, api: client.ApiClient, fleet: Fleet, platforms: Platforms, size: int,
    threads: int, logs: Path, repeat: int = 1, with_mwrs: bool = True,
) -> list[Run]:
    """Every contender at one size, ``repeat`` rounds one after the other (each round runs
    each contender once, in the same order), so that the machine's drift hits all alike."""
    t0 = time.monotonic()
    clusters = fleet.grow(size)
    log(f"N={size}: {size} clusters after {time.monotonic() - t0:.1f}s")
    decisions = ensure_placement(api, PLACEMENT, size)
    log(f"N={size}: placement decided {size} in {decisions:.1f}s")
    runs: list[Run] = []
    for round_ in range(1, repeat + 1):
        mgr, ready = start_manager(tb, logs / f"manager-{size}-{round_}.log")
        try:
            log(f"N={size} round {round_}: manager ready after {ready:.1f}s")
            gate = platforms.ensure(PLACEMENT, clusters)
            log(f"N={size}: platforms Available on all clusters after {gate:.1f}s")
            # The manager's own start (its lists) and the platforms' status: done before
            # ours starts, as nothing runs before the other contenders.
            log(f"N={size} round {round_}: manager quiet after {quiesce(mgr, 3):.1f}s")
            runs.append(run_ours(tb, api, size))
            log(f"N={size} round {round_}: ours {_fmt(runs[-1])}")
        finally:
            mgr.stop()
        if with_mwrs:
            runs.append(run_mwrs(tb, api, size))
            log(f"N={size} round {round_}: mwrs {_fmt(runs[-1])}")
        for ssa in (False, True):
            runs.append(run_limit(api, clusters, threads, ssa))
            log(f"N={size} round {round_}: {runs[-1].contender} {_fmt(runs[-1])}")
    return runs


def medians(runs: list[Run]) -> list[Run]:
    """One run per (contender, size): the median of each phase over the rounds."""
    grouped: dict[tuple[str, int], list[Run]] = {}
    for run in runs:
        grouped.setdefault((run.contender, run.size), []).append(run)
    out = []
    for (contender, size), group in grouped.items():
        median = Run(contender, size)
        median.seconds = {p: statistics.median(r.seconds[p] for r in group) for p in PHASES}
        out.append(median)
    return out


def _fmt(run: Run) -> str:
    return ", ".join(f"{p} {run.seconds[p]:.1f}s" for p in PHASES)


def results(runs: list[Run]) -> str:
    """Tables: seconds per phase, ratios, growth with N."""
    by = {(r.contender, r.size): r for r in runs}
    sizes = sorted({r.size for r in runs})
    rows = []
    nan = float("nan")
    for n in sizes:
        for p in PHASES:
            o, m, lim, ssa = (by[(k, n)].seconds[p] if (k, n) in by else nan
                              for k in CONTENDERS)
            rows.append([f"{n:,}", p, f"{o:.1f}", f"{m:.1f}", f"{lim:.1f}", f"{ssa:.1f}",
                         f"{o / lim:.2f}", f"{o / m:.2f}", f"{o / ssa:.2f}"])
    out = table(["N", "phase", "ours s", "MWRS s", "limit s", "limit-ssa s", "ours/limit",
                 "ours/MWRS", "ours/limit-ssa"], rows)
    growth = []
    for a, b in itertools.pairwise(sizes):
        for k in CONTENDERS:
            if (k, a) not in by or (k, b) not in by:
                continue
            exps = [
                math.log(by[(k, b)].seconds[p] / by[(k, a)].seconds[p]) / math.log(b / a)
                for p in PHASES
            ]
            growth.append([f"{a:,} -> {b:,}", k, *(f"{e:.2f}" for e in exps)])
    if growth:
        out += "\n\nGrowth exponent (time ~ N^k) between sizes:\n\n" + table(
            ["sizes", "contender", *PHASES], growth
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,300,1000")
    parser.add_argument("--threads", type=int, default=16, help="the limit client's threads")
    parser.add_argument("--no-mwrs", action="store_true",
                        help="leave out ManifestWorkReplicaSet (its phases take ~20 s each "
                        "at any size); its columns show nan")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds per size; the tables show each phase's median")
    args = parser.parse_args()
    sizes = sorted(int(x) for x in args.sizes.split(",") if x.strip())
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="bench-fanout-") as tmp, hub() as tb:
        api = api_client(tb)
        fleet, platforms = Fleet(api), Platforms(api)
        for size in sizes:
            runs += one_size(tb, api, fleet, platforms, size, args.threads, Path(tmp),
                             args.repeat, with_mwrs=not args.no_mwrs)
    if args.repeat > 1:
        print(f"\nEvery round ({args.repeat} per size):\n\n" + table(
            ["N", "contender", *PHASES],
            [[f"{r.size:,}", r.contender, *(f"{r.seconds[p]:.1f}" for p in PHASES)]
             for r in runs]), flush=True)
        print(f"\nMedians of {args.repeat} rounds:", flush=True)
    print("\n" + results(medians(runs)), flush=True)


if __name__ == "__main__":
    main()
