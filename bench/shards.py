"""Sharded managers: many intents fanned out by 1 replica and by several (issue 35).

``TESTBED_GOGC=100 python -m bench.shards --clusters 3000 --intents 30 --replicas 1,3``

At that size, 90,000 works changed at once, the hub API server needs Go's default GOGC: with
the testbed's GOGC=400 it grew past 20 GiB and the kernel killed it mid update.

One testbed hub and one fleet of spoke-less clusters, the ModelServing's ordering gate open
(its works report the ServingPlatform Available). For each replica count, in the same
process one after the other: that many managers start with ``--shards``, then ``--intents``
MultiClusterInferenceServices are created at once, changed at once (``minReplicas`` 1 -> 2)
and deleted at once; a phase ends when every intent's works carry the expected content on
every cluster (or none is left). Each phase's row: seconds, works per second, and the CPU
seconds the managers and the hub's API server used per work written (on 2 cores the API
server is the limit, so throughput alone says little). After the update, once every replica
made no write for 10 s, their API writes over :data:`AT_REST` seconds are logged (expected:
none).
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kubernetes import client

from bench.common import (
    INTENTS,
    NAMESPACE,
    Fleet,
    Platforms,
    WorkWatch,
    api_client,
    content,
    cpu_seconds,
    ensure_placement,
    hub,
    inference_service,
    isvc_work_name,
    log,
    memory_mib,
    quiesce,
    rendered,
    table,
    wait_for,
)
from bench.common import writes as api_writes
from testbed import identities
from testbed.fleet import Testbed
from testbed.support.manager import Manager

PLACEMENT = "fleet"
AT_REST = 30.0
"""Seconds the replicas are watched for writes once the update settled (expected: none)."""


def _replicas(tb: Testbed, logs: Path, count: int, shards: int, tag: str) -> list[Manager]:
    """``count`` sharded managers, started and holding every shard between them."""
    out = [Manager(
        identities.manager_kubeconfig(tb.hub), logs / f"{tag}-{i}.log", "--no-addon-enablement",
        "--log-format=text", f"--shards={shards}",
        f"--leader-election-namespace={identities.MANAGER_NAMESPACE}",
        f"--leader-election-identity={tag}-{i}").start() for i in range(count)]

    def held() -> float:
        try:
            return sum(m.total("model_serving_manager_shards_held") for m in out)
        except OSError:
            return 0.0

    wait_for(lambda: held() == shards, 300, "every shard held", interval=0.5)
    return out


def _apiserver_cpu(tb: Testbed) -> float:
    pid = tb.hub.processes["kube-apiserver"].pid
    assert pid is not None
    return cpu_seconds(pid)


def run(tb: Testbed, api: client.ApiClient, names: list[str], intents: int, count: int,
        shards: int, logs: Path) -> list[list[str]]:
    """Create, change and delete ``intents`` intents with ``count`` replicas; the rows."""
    custom = client.CustomObjectsApi(api)
    size = len(names)
    tag = f"r{count}"
    isvcs = [f"{tag}m{i}" for i in range(intents)]
    digests = {
        n: (content(rendered(inference_service(n, PLACEMENT, 1), "x")),
            content(rendered(inference_service(n, PLACEMENT, 2), "x")))
        for n in isvcs
    }
    mgrs = _replicas(tb, logs, count, shards, tag)
    rows: list[list[str]] = []
    try:
        with contextlib.ExitStack() as stack:
            watches = [stack.enter_context(WorkWatch(api, isvc_work_name(n))) for n in isvcs]

            def phase(what: str, act: Callable[[], None], done: Callable[[], None]) -> None:
                pids = [m.proc.pid for m in mgrs if m.proc is not None]
                cpu0 = sum(cpu_seconds(p) for p in pids)
                api0 = _apiserver_cpu(tb)
                w0 = sum(api_writes(m) for m in mgrs)
                start = time.monotonic()
                act()
                done()
                took = time.monotonic() - start
                cpu = sum(cpu_seconds(p) for p in pids) - cpu0
                apiserver = _apiserver_cpu(tb) - api0
                written = sum(api_writes(m) for m in mgrs) - w0
                works = intents * size
                log(f"{count} replica(s), {what}: {took:.1f}s, {written:.0f} writes")
                rows.append([
                    f"{size:,}", str(intents), str(count), what, f"{took:.1f}",
                    f"{works / took:.0f}", f"{1000 * cpu / max(written, 1):.2f}",
                    f"{1000 * apiserver / max(written, 1):.2f}",
                ])

            def create() -> None:
                for n in isvcs:
                    custom.create_namespaced_custom_object(
                        *INTENTS[:2], NAMESPACE, INTENTS[2], inference_service(n, PLACEMENT, 1))

            def update() -> None:
                for n in isvcs:
                    custom.patch_namespaced_custom_object(
                        *INTENTS[:2], NAMESPACE, INTENTS[2], n,
                        {"spec": {"template": {"predictor": {"minReplicas": 2}}}})

            def delete() -> None:
                for n in isvcs:
                    custom.delete_namespaced_custom_object(*INTENTS[:2], NAMESPACE, INTENTS[2], n)

            def content_everywhere(which: int) -> None:
                for n, w in zip(isvcs, watches, strict=True):
                    w.wait_content(size, digests[n][which], timeout=1800)

            def gone() -> None:
                for w in watches:
                    w.wait_gone(timeout=1800)

            phase("create", create, lambda: content_everywhere(0))
            phase("update", update, lambda: content_everywhere(1))
            for m in mgrs:  # every status written: then the replicas must stay quiet
                quiesce(m)
            w0 = sum(api_writes(m) for m in mgrs)
            time.sleep(AT_REST)
            idle = sum(api_writes(m) for m in mgrs) - w0
            log(f"{count} replica(s) at rest: {idle:.0f} API writes in {AT_REST:.0f}s")
            phase("delete", delete, gone)
        peaks = [memory_mib(m.proc.pid) for m in mgrs if m.proc is not None]
        log(f"{count} replica(s): peak RSS {', '.join(f'{p:.0f}' for p in peaks)} MiB")
    finally:
        for m in mgrs:
            m.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=3000)
    parser.add_argument("--intents", type=int, default=30)
    parser.add_argument("--replicas", default="1,3", help="comma-separated replica counts")
    parser.add_argument("--shards", type=int, default=12)
    args = parser.parse_args()
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-shards-") as tmp, hub() as tb:
        api = api_client(tb)
        t0 = time.monotonic()
        names = Fleet(api).grow(args.clusters)
        log(f"{args.clusters} clusters in {time.monotonic() - t0:.1f}s")
        log(f"placement decided in {ensure_placement(api, PLACEMENT, args.clusters):.1f}s")
        gate = _replicas(tb, Path(tmp), 1, args.shards, "gate")
        try:
            log(f"platforms Available after {Platforms(api).ensure(PLACEMENT, names):.1f}s")
        finally:
            for m in gate:
                m.stop()
        for count in (int(r) for r in args.replicas.split(",") if r.strip()):
            rows += run(tb, api, names, args.intents, count, args.shards, Path(tmp))
    print("\n" + table(
        ["clusters", "intents", "replicas", "phase", "s", "works/s",
         "manager CPU ms/write", "API server CPU ms/write"], rows))


if __name__ == "__main__":
    main()
