"""The metric gate of a progressive rollout: one PromQL query against Prometheus or Thanos.

:func:`judge` (pure) turns a query's result into the gate's answer; :class:`PrometheusGate`
runs the query (``--prometheus-url``, with a bearer token file and CA file when the endpoint
needs them, as ACM's Thanos querier does).
"""

from __future__ import annotations

import math
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from addon_api.rollout import MetricGate
from addon_manager.engine.promql import clusters_regex, metric_query
from addon_manager.engine.rollout import MetricAnswer

TIMEOUT = 10.0
"""Seconds a query may take."""


def query_for(gate: MetricGate, clusters: Sequence[str]) -> str:
    """The gate's query with ``$clusters`` replaced.

    The plan scopes a ``metric`` gate first (:func:`addon_manager.engine.policy.scoped_gate`);
    unscoped, it selects only on the clusters.
    """
    query = gate.query if gate.query is not None else metric_query(gate, "", "")
    return query.replace("$clusters", clusters_regex(clusters))


def _samples(result: Sequence[Any]) -> list[tuple[str, float]]:
    """(cluster label, value) of each sample of an instant query's result."""
    if len(result) == 2 and not isinstance(result[0], dict):  # a scalar: [time, "value"]
        return [("", float(result[1]))]
    return [(str((item.get("metric") or {}).get("cluster", "")),
             float((item.get("value") or [0, "NaN"])[1])) for item in result]


def _bounds(gate: MetricGate) -> str:
    bounds = []
    if gate.max_value is not None:
        bounds.append(f"<= {gate.max_value:g}")
    if gate.min_value is not None:
        bounds.append(f">= {gate.min_value:g}")
    return " and ".join(bounds)


def _outside(gate: MetricGate, value: float) -> bool:
    low = gate.min_value is not None and not value >= gate.min_value
    high = gate.max_value is not None and not value <= gate.max_value
    return math.isnan(value) or low or high


def judge(gate: MetricGate, clusters: tuple[str, ...], result: Sequence[Any]) -> MetricAnswer:
    """The answer for an instant query's ``result`` (a vector or a scalar)."""
    samples = _samples(result)
    if not samples:
        return MetricAnswer(clusters, "Pending", "the query returned no sample yet")
    for cluster, value in samples:
        if _outside(gate, value):
            where = f" for cluster {cluster}" if cluster else ""
            return MetricAnswer(clusters, "Failed",
                                f"{value:g}{where} is not {_bounds(gate)}", cluster)
    return MetricAnswer(clusters, "Passed", f"{len(samples)} sample(s), all {_bounds(gate)}")


def judge_each(gate: MetricGate, clusters: Sequence[str], result: Sequence[Any]
               ) -> dict[str, str]:
    """The clusters of ``clusters`` whose sample is out of bounds, with what was found.

    Per cluster, by each sample's ``cluster`` label (a sample without one, or of another
    cluster, judges nobody); a cluster without a sample is within bounds (no evidence).
    """
    out: dict[str, str] = {}
    for cluster, value in _samples(result):
        if cluster in clusters and cluster not in out and _outside(gate, value):
            out[cluster] = f"its metric is {value:g}, not {_bounds(gate)} (spec.endpoint.spillover)"
    return out


class PrometheusGate:
    """Runs metric gate queries against one Prometheus-compatible endpoint."""

    def __init__(self, url: str, token_file: Path | None = None, ca_file: Path | None = None
                 ) -> None:
        self.url = url.rstrip("/")
        self.token_file = token_file
        self.ca_file = ca_file
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()

    async def evaluate(self, gate: MetricGate, clusters: tuple[str, ...]) -> MetricAnswer:
        """Query once; an unreachable endpoint or an error is a Pending answer saying so."""
        result = await self._query(gate, clusters)
        if isinstance(result, str):
            return MetricAnswer(clusters, "Pending", result)
        return judge(gate, clusters, result)

    async def evaluate_each(self, gate: MetricGate, clusters: tuple[str, ...]
                            ) -> dict[str, str] | str:
        """Query once: the clusters out of bounds (:func:`judge_each`), or why no answer."""
        result = await self._query(gate, clusters)
        return result if isinstance(result, str) else judge_each(gate, clusters, result)

    async def _query(self, gate: MetricGate, clusters: tuple[str, ...]) -> list[Any] | str:
        """The instant query's result, or why there is none (an error, said)."""
        if self._session is None:
            context = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file
                                                 else None)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=context),
                timeout=aiohttp.ClientTimeout(total=TIMEOUT))
        headers = {}
        if self.token_file is not None:
            headers["Authorization"] = f"Bearer {self.token_file.read_text().strip()}"
        try:
            async with self._session.get(f"{self.url}/api/v1/query", headers=headers,
                                         params={"query": query_for(gate, clusters)}) as resp:
                body = await resp.json(content_type=None)
                if resp.status != 200 or body.get("status") != "success":
                    error = body.get("error") if isinstance(body, dict) else None
                    return f"query failed: HTTP {resp.status}: {error or ''}"[:500]
        except (aiohttp.ClientError, TimeoutError, ValueError) as err:
            return f"query failed: {err!r}"[:500]
        return list(body["data"]["result"])
