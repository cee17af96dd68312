"""Progressive rollout: how long a change takes to reach every cluster in steps, against All.

``python -m bench.rollout --clusters 1000 --steps 10``

A settled fleet (the ModelServing gate open on every cluster). A responder plays each
cluster's work agent and KServe: whenever a work of the measured intents gets a new
generation, it reports the InferenceService Ready, with the revision annotation the work's
object carries (as the work agent feeds it back). Two MultiClusterInferenceServices on all
clusters: one with ``rollout.strategy: All``, one ``Progressive`` with ``maxConcurrency`` of
clusters / steps and ``minSuccessTime: 0s``. For each, after it settled, one spec change is
timed until it is in effect everywhere (All: every cluster reports Ready on the new content;
Progressive: ``status.rollout`` Complete on the new revision), with the manager's
ManifestWork applies and status writes it took.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

from kubernetes import client, watch

from addon_api import constants as c
from bench.common import (
    INTENTS,
    ISVC_META,
    NAMESPACE,
    WORK,
    api_client,
    hub,
    inference_service,
    isvc_work_name,
    log,
    quiesce,
    settled,
    table,
    wait_for,
    writes,
)
from testbed.support.manager import Manager, report_work_status

READY = {"ready": "True", "readyReason": "Ready", "predictorReady": "True",
         "url": "http://isvc.example", "activeModelState": "Loaded",
         "transitionStatus": "UpToDate"}


class Responder:
    """Reports every new generation of the named works Ready (a thread and a pool)."""

    def __init__(self, api: client.ApiClient, names: list[str]) -> None:
        self.api = api
        self.works = {isvc_work_name(n): n for n in names}
        self.reported: dict[tuple[str, str], int] = {}
        self.pool = ThreadPoolExecutor(16)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Responder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.pool.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        custom = client.CustomObjectsApi(self.api)
        selector = f"{c.LABEL_INTENT_KIND}={c.KIND_INFERENCE_SERVICE}"
        while not self._stop.is_set():
            try:
                found = cast(dict[str, Any], custom.list_cluster_custom_object(
                    *WORK, label_selector=selector))
                for item in found["items"]:
                    self._seen(item)
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    custom.list_cluster_custom_object, *WORK, label_selector=selector,
                    resource_version=found["metadata"]["resourceVersion"], timeout_seconds=300)
                for event in stream:
                    if self._stop.is_set():
                        return
                    if event["type"] in ("ADDED", "MODIFIED") and isinstance(
                            event["object"], dict):
                        self._seen(event["object"])
            except Exception:  # relist after any watch failure
                time.sleep(0.5)

    def _seen(self, work: dict[str, Any]) -> None:
        meta = work["metadata"]
        intent = self.works.get(meta["name"])
        key = (meta["namespace"], meta["name"])
        if intent is None or self.reported.get(key) == meta["generation"]:
            return
        self.reported[key] = meta["generation"]
        revision = (meta.get("annotations") or {}).get(c.ANNOTATION_REVISION)
        values = {**READY, **({"revision": revision} if revision else {})}
        self.pool.submit(report_work_status, self.api, key[0], key[1],
                         {**ISVC_META, "name": intent}, values)


def _intent(name: str, strategy: str, per_step: int, replicas: int) -> dict[str, Any]:
    body = inference_service(name, "fleet", replicas)
    body["spec"]["rollout"] = {"strategy": strategy, "maxConcurrency": per_step,
                               "minSuccessTime": "0s", "progressDeadline": "30m"}
    return body


def _status(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    obj = cast(dict[str, Any], custom.get_namespaced_custom_object(
        *INTENTS[:2], NAMESPACE, INTENTS[2], name))
    return dict(obj.get("status") or {})


def _in_effect(custom: client.CustomObjectsApi, name: str, strategy: str, clusters: int,
               generation: int) -> Callable[[], bool]:
    def check() -> bool:
        status = _status(custom, name)
        if status.get("observedGeneration") != generation:
            return False
        if strategy == "All":
            return int((status.get("summary") or {}).get("ready", 0)) == clusters
        roll = status.get("rollout") or {}
        return bool(roll.get("phase") == "Complete"
                    and roll.get("stableRevision") == roll.get("targetRevision"))
    return check


def measure(api: client.ApiClient, mgr: Manager, clusters: int, steps: int,
            strategy: str) -> list[str]:
    """Create, settle, then time one change of an intent with ``strategy``."""
    custom = client.CustomObjectsApi(api)
    name = f"roll-{strategy.lower()}"
    per_step = max(1, clusters // steps)
    custom.create_namespaced_custom_object(*INTENTS[:2], NAMESPACE, INTENTS[2],
                                           _intent(name, strategy, per_step, 1))
    created = wait_for(_in_effect(custom, name, strategy, clusters, 1), 1800,
                       f"{name} settled", 0.2)
    log(f"{name}: first revision in effect on {clusters} clusters after {created:.1f}s")
    quiesce(mgr, quiet=5)
    applies, statuses = writes(mgr, "apply"), writes(mgr, "patch-status")
    custom.patch_namespaced_custom_object(
        *INTENTS[:2], NAMESPACE, INTENTS[2], name,
        {"spec": {"template": {"predictor": {"minReplicas": 2}}}})
    took = wait_for(_in_effect(custom, name, strategy, clusters, 2), 1800,
                    f"{name} change in effect", 0.2)
    applied = writes(mgr, "apply") - applies
    status_writes = writes(mgr, "patch-status") - statuses
    log(f"{name}: change in effect after {took:.1f}s, {applied:.0f} applies, "
        f"{status_writes:.0f} status writes")
    steps_taken = int(((_status(custom, name).get("rollout") or {}).get("step")) or 1)
    return [f"{clusters:,}", strategy, str(steps_taken), f"{took:.1f}", f"{applied:.0f}",
            f"{applied / clusters:.2f}", f"{status_writes:.0f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    names = ["roll-all", "roll-progressive"]
    with tempfile.TemporaryDirectory(prefix="bench-rollout-") as tmp, hub() as tb:
        api = api_client(tb)
        with settled(tb, api, Path(tmp) / "manager.log", args.clusters, 0) as (mgr, _, _), \
                Responder(api, names):
            quiesce(mgr)
            rows = [measure(api, mgr, args.clusters, args.steps, s)
                    for s in ("All", "Progressive")]
    print("\n" + table(
        ["clusters", "strategy", "steps", "change in effect s", "ManifestWork applies",
         "applies per cluster", "status writes"], rows), flush=True)


if __name__ == "__main__":
    main()
