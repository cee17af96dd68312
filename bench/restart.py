"""Start and takeover at scale: a manager (re)started on a settled fleet, and a standby
taking over from a leader that was killed.

``python -m bench.restart --clusters 3000 --intents 10 [--lease-duration 6]``
(at 10,000 clusters with ``TESTBED_GOGC=100``: the hub API server outgrows the machine at the
testbed's GOGC=400)

One settled fleet (``--clusters`` clusters, the ModelServing Available everywhere and
``--intents - 1`` MultiClusterInferenceServices, every work written by a first manager),
then:

- **restart**: the manager is stopped, one intent's ``minReplicas`` changes, and a new
  manager starts. Measured from its start: seconds until it reports ready, until its first
  API write, until all N works of the changed intent carry the change; its peak RSS once
  settled (every work and intent of the fleet in memory), then its API writes in a minute at
  rest (expected: none).
- **takeover**: two managers with ``--leader-elect`` (the restarted one leads, a second one
  waits, warm: its three informers synced). The leader is SIGKILLed and, at the same
  moment, another intent changes. Measured from the kill: seconds until the standby's first
  API write and until all N works carry the change. A killed leader does not release its
  Lease: the standby acquires it once the Lease expires (``--lease-duration``), so that
  duration is part of the figure.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kubernetes import client

from bench.common import (
    INTENTS,
    NAMESPACE,
    WorkWatch,
    api_client,
    content,
    hub,
    inference_service,
    isvc_work_name,
    log,
    memory_mib,
    quiesce,
    rendered,
    settled,
    table,
    wait_for,
)
from bench.common import writes as api_writes
from testbed import identities
from testbed.fleet import Testbed
from testbed.support.manager import Manager

AT_REST = 60.0
"""Seconds the restarted manager is watched for writes once it has settled (expected: 0)."""


def _change(api: client.ApiClient, name: str, replicas: int) -> str:
    """Set ``minReplicas`` of intent ``name``; the digest its works carry afterwards."""
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        *INTENTS[:2], NAMESPACE, INTENTS[2], name,
        {"spec": {"template": {"predictor": {"minReplicas": replicas}}}},
    )
    return content(rendered(inference_service(name, "fleet", replicas), "x"))


def _elected(tb: Testbed, log_path: Path, identity: str, lease: int) -> Manager:
    return Manager(
        identities.manager_kubeconfig(tb.hub),
        log_path, "--no-addon-enablement", "--log-format=text", "--leader-elect",
        f"--leader-election-namespace={identities.MANAGER_NAMESPACE}",
        f"--leader-election-identity={identity}", f"--lease-duration={lease}",
    ).start()


def measure(clusters: int, intents: int, lease: int, logs: Path | None = None
            ) -> list[list[str]]:
    """The restart and takeover rows for one fleet size (managers' logs kept in ``logs``)."""
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-restart-") as scratch, hub() as tb:
        tmp = str(logs / str(clusters)) if logs is not None else scratch
        Path(tmp).mkdir(parents=True, exist_ok=True)
        api = api_client(tb)
        with settled(tb, api, Path(tmp) / "first.log", clusters, intents - 1) as (
                first, _, isvcs):
            quiesce(first)
        # restart ------------------------------------------------------------------------
        name = isvcs[0]
        with WorkWatch(api, isvc_work_name(name)) as works:
            digest = _change(api, name, 2)
            started = time.monotonic()
            mgr = _elected(tb, Path(tmp) / "leader.log", "leader", lease)
            try:
                # Each figure counts from the start, independently: a changed intent may
                # write before the manager is ready (it plans from a prefetch of its works).
                marks = first_times({
                    "ready": lambda: _metric(mgr, "model_serving_manager_ready") == 1,
                    "write": lambda: _writes_or_zero(mgr) > 0,
                }, started, 900)
                ready_s, write_s = marks["ready"], marks["write"]
                works.wait_content(clusters, digest)
                done_s = time.monotonic() - started
                quiesce(mgr)
                peak = memory_mib(mgr.proc.pid) if mgr.proc else 0.0
                before = api_writes(mgr)
                time.sleep(AT_REST)
                at_rest = api_writes(mgr) - before
                rows.append([f"{clusters:,}", str(intents), "restart", f"{ready_s:.1f}",
                             f"{write_s:.1f}", f"{done_s:.1f}", f"{peak:.0f}",
                             f"{at_rest:.0f}"])
                log(f"restart: ready {ready_s:.1f}s, first write {write_s:.1f}s, "
                    f"{clusters} works changed {done_s:.1f}s, peak RSS {peak:.0f} MiB, "
                    f"{at_rest:.0f} writes in {AT_REST:.0f}s at rest")
                # takeover ---------------------------------------------------------------
                standby = _elected(tb, Path(tmp) / "standby.log", "standby", lease)
                try:
                    warm = time.monotonic()  # the standby is up, has listed, and waits
                    wait_for(lambda: _metric(standby, "model_serving_manager_informer_synced")
                             == 3, 900, "standby's informers synced", 0.5)
                    log(f"standby warm after {time.monotonic() - warm:.1f}s")
                    other = isvcs[1] if len(isvcs) > 1 else isvcs[0]
                    with WorkWatch(api, isvc_work_name(other)) as others:
                        mgr.kill()
                        killed = time.monotonic()
                        digest = _change(api, other, 3)
                        wait_for(lambda: _writes_or_zero(standby) > 0, 900, "standby write",
                                 0.1)
                        write_s = time.monotonic() - killed
                        others.wait_content(clusters, digest)
                        done_s = time.monotonic() - killed
                    peak = memory_mib(standby.proc.pid) if standby.proc else 0.0
                    rows.append([f"{clusters:,}", str(intents), f"takeover (lease {lease}s)",
                                 "", f"{write_s:.1f}", f"{done_s:.1f}", f"{peak:.0f}", ""])
                    log(f"takeover: first write {write_s:.1f}s after the kill, "
                        f"{clusters} works changed {done_s:.1f}s")
                finally:
                    standby.stop()
            finally:
                mgr.stop()
    return rows


def first_times(checks: dict[str, Callable[[], bool]], since: float, timeout: float
                ) -> dict[str, float]:
    """Poll every check until each held once; the seconds from ``since`` to its first hold."""
    out: dict[str, float] = {}
    while len(out) < len(checks):
        now = time.monotonic()
        if now - since > timeout:
            raise TimeoutError(f"{sorted(set(checks) - set(out))}: not after {timeout:.0f}s")
        for name, check in checks.items():
            if name not in out and check():
                out[name] = time.monotonic() - since
        time.sleep(0.1)
    return out


def _metric(mgr: Manager, prefix: str) -> float:
    """A metric's total; 0 while the manager's metrics endpoint is not up."""
    try:
        return mgr.total(prefix)
    except OSError:
        return 0.0


def _writes_or_zero(mgr: Manager) -> float:
    """The manager's API writes; 0 while its metrics endpoint is not up."""
    try:
        return api_writes(mgr)
    except OSError:
        return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", default="3000", help="comma-separated sizes")
    parser.add_argument("--intents", type=int, default=10)
    parser.add_argument("--lease-duration", type=int, default=6)
    parser.add_argument("--keep-logs", type=Path, default=None,
                        help="directory to keep the managers' logs in (<dir>/<clusters>/)")
    args = parser.parse_args()
    rows = [row for n in args.clusters.split(",") if n.strip()
            for row in measure(int(n), args.intents, args.lease_duration, args.keep_logs)]
    print("\n" + table(
        ["clusters", "intents", "what", "ready s", "first write s", "change on all s",
         "peak RSS MiB", f"writes in {AT_REST:.0f} s at rest"], rows,
    ), flush=True)


if __name__ == "__main__":
    main()
