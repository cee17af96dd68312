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


def judge(gate: MetricGate, clusters: tuple[str, ...], result: Sequence[Any]) -> MetricAnswer:
    """The answer for an instant query's ``result`` (a vector or a scalar)."""
    samples: list[tuple[str, float]] = []
    if len(result) == 2 and not isinstance(result[0], dict):  # a scalar: [time, "value"]
        samples.append(("", float(result[1])))
    else:
        for item in result:
            value = item.get("value") or [0, "NaN"]
            samples.append((str((item.get("metric") or {}).get("cluster", "")), float(value[1])))
    if not samples:
        return MetricAnswer(clusters, "Pending", "the query returned no sample yet")
    bounds = []
    if gate.max_value is not None:
        bounds.append(f"<= {gate.max_value:g}")
    if gate.min_value is not None:
        bounds.append(f">= {gate.min_value:g}")
    for cluster, value in samples:
        low = gate.min_value is not None and not value >= gate.min_value
        high = gate.max_value is not None and not value <= gate.max_value
        if math.isnan(value) or low or high:
            where = f" for cluster {cluster}" if cluster else ""
            return MetricAnswer(clusters, "Failed",
                                f"{value:g}{where} is not {' and '.join(bounds)}", cluster)
    return MetricAnswer(clusters, "Passed",
                        f"{len(samples)} sample(s), all {' and '.join(bounds)}")


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
                    return MetricAnswer(clusters, "Pending",
                                        f"query failed: HTTP {resp.status}: {error or ''}"[:500])
        except (aiohttp.ClientError, TimeoutError, ValueError) as err:
            return MetricAnswer(clusters, "Pending", f"query failed: {err!r}"[:500])
        return judge(gate, clusters, body["data"]["result"])
