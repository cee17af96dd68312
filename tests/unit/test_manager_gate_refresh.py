"""How long the manager uses a metric gate's or a spillover's answer before asking Prometheus
again (``--gate-refresh``): the same question inside the interval is answered from what was
asked last; after it, or for other clusters, the query runs again."""

from __future__ import annotations

import asyncio
import time

import pytest

from addon_api.common import EndpointMember, EndpointStatus
from addon_api.rollout import MetricGate
from addon_manager.engine.rollout import MetricAnswer
from addon_manager.shell import main
from addon_manager.shell.reconcile import GATE_REFRESH, Reconciler
from testbed.support.fake_hub import FakeHub
from testbed.support.sealing import memory_sealer

GATE = MetricGate.model_validate({"metric": "request_error_ratio", "maxValue": 0.1})
KEY = ("MultiClusterInferenceService", "ns", "iris")


class CountingGate:
    """A Prometheus stand-in that counts its queries."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, ...]] = []

    async def evaluate(self, gate: MetricGate, clusters: tuple[str, ...]) -> MetricAnswer:
        self.asked.append(clusters)
        return MetricAnswer(clusters, "Passed", "within bounds")

    async def evaluate_each(self, gate: MetricGate, clusters: tuple[str, ...]
                            ) -> dict[str, str] | str:
        self.asked.append(clusters)
        return {}


def reconciler(gate: CountingGate, gate_refresh: float = GATE_REFRESH) -> Reconciler:
    hub = FakeHub()
    return Reconciler(hub, hub, memory_sealer(), gate=gate, gate_refresh=gate_refresh)


def served(*clusters: str) -> EndpointStatus:
    return EndpointStatus(members=[EndpointMember(cluster=c) for c in clusters])


def test_an_answer_is_reused_within_the_refresh_and_asked_again_after_it() -> None:
    gate = CountingGate()
    rec = reconciler(gate, gate_refresh=0.2)
    ask = rec._ask_gate
    assert asyncio.run(ask(*KEY, GATE, ("cluster1",))) is True
    assert asyncio.run(ask(*KEY, GATE, ("cluster1",))) is False  # fresh: no query
    assert gate.asked == [("cluster1",)]
    assert asyncio.run(ask(*KEY, GATE, ("cluster1", "cluster2"))) is True  # other clusters
    time.sleep(0.25)
    assert asyncio.run(ask(*KEY, GATE, ("cluster1", "cluster2"))) is True  # stale: again
    assert len(gate.asked) == 3
    assert KEY in rec.snapshot().gates
    time.sleep(0.25)
    assert KEY not in rec.snapshot().gates  # a plan never judges on a stale answer


def test_spillover_is_asked_again_after_the_refresh_only() -> None:
    gate = CountingGate()
    rec = reconciler(gate, gate_refresh=0.2)
    spill = rec._ask_spillover
    asyncio.run(spill(KEY, GATE, served("cluster1", "cluster2"), {}))
    asyncio.run(spill(KEY, GATE, served("cluster1", "cluster2"), {}))
    assert gate.asked == [("cluster1", "cluster2")]
    time.sleep(0.25)
    asyncio.run(spill(KEY, GATE, served("cluster1", "cluster2"), {}))
    assert len(gate.asked) == 2


def test_the_default_refresh_is_fifteen_seconds_and_the_flag_sets_it() -> None:
    gate = CountingGate()
    rec = reconciler(gate)
    assert rec.gate_refresh == GATE_REFRESH == 15.0
    asyncio.run(rec._ask_gate(*KEY, GATE, ("cluster1",)))
    time.sleep(0.25)
    assert asyncio.run(rec._ask_gate(*KEY, GATE, ("cluster1",))) is False
    assert main.parse_args(["--gate-refresh", "2.5"]).gate_refresh == 2.5
    assert main.parse_args([]).gate_refresh == GATE_REFRESH


def test_a_refresh_of_zero_is_refused() -> None:
    with pytest.raises(SystemExit, match="--gate-refresh must be more than 0"):
        main.main(["--gate-refresh", "0"])
