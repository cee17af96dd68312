"""What judging every rendered work costs a fan-out: the plan of one intent to N clusters with
the policy's judge (``addon_manager.engine.policy.judge_work``) and, in the same process, with the
judge replaced by a no-op, alternating.

``python -m bench.policy --clusters 1000 --rounds 7``

The plan is the manager's whole CPU work of a fan-out (placement, render, gates, status
inputs); the writes it leads to cost far more wall time on a real hub, so the ratio here is an
upper bound of what the judge adds to a fan-out. Two intents are measured: a
MultiClusterInferenceService with a predictor template that uses every container and pod
field the judge reads, and the same with an override selecting half the clusters (two
templates to judge).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from addon_api import constants as c
from addon_manager.engine import policy
from addon_manager.engine.plan import plan
from addon_manager.facts.records import WorkFact
from addon_manager.kinds.registry import spec_of
from addon_manager.shell.reconcile import Reconciler
from testbed.support.fake_hub import OPEN_POLICY, FakeHub
from testbed.support.sealing import memory_sealer

TEMPLATE = {"predictor": {
    "minReplicas": 2, "serviceAccountName": "default",
    "volumes": [{"name": "cache", "emptyDir": {}}],
    "containers": [{"name": "sidecar", "image": "busybox:1",
                    "securityContext": {"allowPrivilegeEscalation": False,
                                        "capabilities": {"drop": ["ALL"]}}}],
    "model": {"modelFormat": {"name": "sklearn"}, "storageUri": "s3://models/iris",
              "resources": {"requests": {"cpu": "100m"}},
              "securityContext": {"runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}},
}}


def platform_ready(hub: FakeHub, *clusters: str) -> None:
    """Every cluster's stack Available (the ModelServing gate open)."""
    for cl in clusters:
        hub.works[(cl, "sp")] = WorkFact(
            name="sp", cluster=cl, kind=c.KIND_MODEL_SERVING, intent_namespace="ns",
            intent_name="kserve", render_hash="x", applied="True",
            feedback=(("phase", "Available"),))


def intent(overrides: bool) -> dict[str, Any]:
    """The bench's MultiClusterInferenceService body."""
    spec: dict[str, Any] = {"placementRef": {"name": "p"}, "targetNamespace": "models",
                            "template": TEMPLATE}
    if overrides:
        spec["overrides"] = [{"clusterSelector": {"matchLabels": {"half": "a"}},
                              "patch": {"template": {"predictor": {"minReplicas": 3}}}}]
    return {"apiVersion": c.API_VERSION, "kind": c.KIND_INFERENCE_SERVICE,
            "metadata": {"name": "iris", "namespace": "ns", "generation": 1, "uid": "u",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": spec}


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(clusters: int, rounds: int, overrides: bool) -> tuple[float, float, int]:
    """(median seconds with the judge, without it, works planned)."""
    names = [f"cluster{i:05d}" for i in range(clusters)]
    hub = FakeHub(placements={("ns", "p"): frozenset(names)},
                  labels={n: {"half": "a" if i % 2 else "b"} for i, n in enumerate(names)})
    platform_ready(hub, *names)
    snap = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY).snapshot()
    spec, body = spec_of(c.KIND_INFERENCE_SERVICE), intent(overrides)
    works = len(plan(spec, body, snap).applies)
    real = policy.judge_work
    on, off = [], []
    for _ in range(rounds):
        on.append(timed(lambda: plan(spec, body, snap)))
        policy.judge_work = lambda *a, **k: None  # type: ignore[assignment]
        try:
            off.append(timed(lambda: plan(spec, body, snap)))
        finally:
            policy.judge_work = real  # type: ignore[assignment]
    return statistics.median(on), statistics.median(off), works


def main() -> None:
    """Print one row per intent shape."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print("| intent | clusters | works | plan with judge (s) | without (s) | ratio |")
    print("|---|---|---|---|---|---|")
    for label, overrides in (("one template", False), ("override on half", True)):
        on, off, works = measure(args.clusters, args.rounds, overrides)
        print(f"| {label} | {args.clusters} | {works} | {on:.3f} | {off:.3f} | "
              f"{on / off:.3f} |")


if __name__ == "__main__":
    main()
