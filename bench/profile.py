"""Where the manager's fan-out time goes: the fan-out benchmark's ``ours`` run at one size
with the manager under pyinstrument (``.venv/bin/pip install pyinstrument``).

``python -m bench.profile --clusters 1000 --out /tmp/manager.pyisession``, then e.g.
``pyinstrument --load=/tmp/manager.pyisession --show '*/kopf/*'`` (or ``-r html``).

The profile covers the manager's whole life in this run: start-up (initial lists), the
ModelServing fan-out that opens the gate, then the MultiClusterInferenceService's create,
change and delete. pyinstrument samples the main thread (kopf's event loop, where watch
events, indexes, rendering and status live); the API calls run in the writer's thread pool
and show up there as awaits.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from kubernetes import client

from addon_api import constants as c
from addon_manager.kinds import registry
from addon_manager.shell import informers
from bench.common import (
    INTENTS,
    NAMESPACE,
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
    quiesce,
    rendered,
    settled,
    wait_for,
    writes,
)
from bench.fanout import PLACEMENT, run_ours
from testbed import identities
from testbed.processes import free_port
from testbed.support.manager import ROOT, Manager


class ProfiledManager(Manager):
    """The manager started under pyinstrument; stopped with SIGINT so the profile is saved."""

    def __init__(self, kubeconfig: Path, log_path: Path, out: Path) -> None:
        super().__init__(kubeconfig, log_path, "--no-addon-enablement", "--log-format=text")
        self.out = out

    def start(self) -> ProfiledManager:
        """Start the manager under the profiler."""
        self.port = free_port()
        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(
                [
                    str(ROOT / ".venv/bin/pyinstrument"), "-r", "pyisession",
                    "-o", str(self.out),
                    str(ROOT / ".venv/bin/model-serving-addon"), "manager",
                    f"--kubeconfig={self.kubeconfig}", f"--metrics-port={self.port}",
                    f"--namespace={identities.MANAGER_NAMESPACE}",
                    *self.args,
                ],
                stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT,
            )
        return self

    def stop(self) -> None:
        """SIGINT (kopf stops, pyinstrument writes the profile), then the usual stop."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                super().stop()


def restart(clusters: int, intents: int, out: Path) -> None:
    """A manager restarted under the profiler on a settled fleet, one intent changed.

    The fleet is ``bench.restart``'s (``intents - 1`` MultiClusterInferenceServices written
    by a first manager); before the profiled start, the same lists the manager's first pass
    makes are timed bare (the API server's share, no parsing).
    """
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp, hub() as tb:
        api = api_client(tb)
        with settled(tb, api, Path(tmp) / "first.log", clusters, intents - 1) as (
                first, _, isvcs):
            quiesce(first)
        name = isvcs[0]
        owner = (c.KIND_INFERENCE_SERVICE, NAMESPACE, name)
        selectors = [informers.SELECTOR, *informers.prefetch_selectors(
            owner, registry.works_read(c.KIND_INFERENCE_SERVICE))]
        for selector in selectors:
            log(f"bare list of {selector!r}: {_bare_list(api, selector)}")
        with WorkWatch(api, isvc_work_name(name)) as works:
            client.CustomObjectsApi(api).patch_namespaced_custom_object(
                *INTENTS[:2], NAMESPACE, INTENTS[2], name,
                {"spec": {"template": {"predictor": {"minReplicas": 2}}}})
            digest = content(rendered(inference_service(name, PLACEMENT, 2), "x"))
            started = time.monotonic()
            mgr = ProfiledManager(identities.manager_kubeconfig(tb.hub),
                                  Path(tmp) / "manager.log", out).start()
            try:
                wait_for(lambda: _writes(mgr) > 0, 900, "first write", 0.1)
                log(f"first write {time.monotonic() - started:.1f}s after the start")
                works.wait_content(clusters, digest)
                log(f"{clusters} works changed {time.monotonic() - started:.1f}s after it")
                wait_for(lambda: _ready(mgr), 900, "manager ready", interval=0.5)
                log(f"ready {time.monotonic() - started:.1f}s after it")
            finally:
                mgr.stop()
                log("manager log:\n" + (Path(tmp) / "manager.log").read_text()[-6000:])


def _bare_list(api: client.ApiClient, selector: str, page: int = 500) -> str:
    """List the works ``selector`` selects, in pages as the informer does: seconds waiting
    for the API server, seconds decoding the JSON (nothing more), objects and bytes."""
    custom = client.CustomObjectsApi(api)
    waited = decoded = 0.0
    count = size = 0
    cont = ""
    while True:
        started = time.monotonic()
        resp = cast(Any, custom.list_cluster_custom_object(
            "work.open-cluster-management.io", "v1", "manifestworks", label_selector=selector,
            limit=page, _continue=cont or None, _preload_content=False))
        body = resp.data
        got = time.monotonic()
        head = json.loads(body)
        decoded += time.monotonic() - got
        waited += got - started
        size += len(body)
        count += len(head["items"])
        cont = head["metadata"].get("continue", "")
        if not cont:
            break
    return (f"server {waited:.1f}s, JSON {decoded:.1f}s, {count} objects, "
            f"{size / 2**20:.0f} MiB")


def _writes(mgr: Manager) -> float:
    try:
        return writes(mgr)
    except OSError:
        return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=Path("/tmp/manager.pyisession"))
    parser.add_argument("--restart", type=int, metavar="INTENTS", default=0,
                        help="profile a restart on a settled fleet of this many intents "
                             "instead of a fan-out")
    args = parser.parse_args()
    if args.restart:
        restart(args.clusters, args.restart, args.out)
        log(f"profile in {args.out}")
        return
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp, hub() as tb:
        api = api_client(tb)
        clusters = Fleet(api).grow(args.clusters)
        ensure_placement(api, PLACEMENT, args.clusters)
        mgr = ProfiledManager(
            identities.manager_kubeconfig(tb.hub), Path(tmp) / "manager.log", args.out
        ).start()
        try:
            wait_for(lambda: _ready(mgr), 900, "manager ready", interval=0.5)
            log(f"platforms Available after {Platforms(api).ensure(PLACEMENT, clusters):.1f}s")
            time.sleep(2)
            run = run_ours(tb, api, args.clusters)
            log(f"ours under the profiler: {run.seconds}")
        finally:
            mgr.stop()
    log(f"profile in {args.out}")


def _ready(mgr: Manager) -> bool:
    try:
        return mgr.total("model_serving_manager_ready") == 1
    except OSError:
        return False


if __name__ == "__main__":
    main()
