"""The PromQL of metric gates (pure): cluster regexes, and a ``metric`` gate's scoped query."""

from __future__ import annotations

import re
from collections.abc import Sequence

from addon_api.rollout import MetricGate


def clusters_regex(clusters: Sequence[str]) -> str:
    """A regular expression matching exactly these cluster names (PromQL's ``=~`` anchors)."""
    return "|".join(re.escape(c) for c in clusters)


def literal(name: str) -> str:
    """A regex matching exactly ``name`` (its regex metacharacters escaped, ``-`` kept)."""
    return re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", name)


def quoted(value: str) -> str:
    """``value`` as a PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def metric_query(gate: MetricGate, namespaces: str, pods: str, model: str = "") -> str:
    """The PromQL of a ``metric`` gate: the largest value (or rate) per cluster.

    Its series on ``$clusters``, in ``namespaces`` and ``pods`` (regexes; "" for no
    matcher), with the gate's own label matchers. With ``model`` (an InferenceService's
    name), also the series labelled ``inferenceservice`` with it in those namespaces, which
    have no ``pod``: the per-model aggregates the chart's recording rules keep (e.g.
    ``model_serving:request_predict_seconds:p99``); a cluster's pod series come first.
    """
    def selector(scope: str, value: str) -> str:
        matchers = ['cluster=~"$clusters"']
        if namespaces:
            matchers.append(f"namespace=~{quoted(namespaces)}")
        if value:
            matchers.append(f"{scope}{quoted(value)}")
        matchers += [f"{k}={quoted(v)}" for k, v in sorted(gate.labels.items())]
        found = f"{gate.metric}{{{','.join(matchers)}}}"
        if gate.rate:
            found = f"rate({found}[{gate.rate}])"
        return f"max by (cluster) ({found})"

    by_pod = selector("pod=~", pods)
    if not model:
        return by_pod
    return f"{by_pod} or {selector('inferenceservice=', model)}"
