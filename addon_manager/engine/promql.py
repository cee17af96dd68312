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


def metric_query(gate: MetricGate, namespaces: str, pods: str) -> str:
    """The PromQL of a ``metric`` gate: the largest value (or rate) per cluster.

    Its series on ``$clusters``, in ``namespaces`` and ``pods`` (regexes; "" for no
    matcher), with the gate's own label matchers.
    """
    matchers = ['cluster=~"$clusters"']
    if namespaces:
        matchers.append(f"namespace=~{quoted(namespaces)}")
    if pods:
        matchers.append(f"pod=~{quoted(pods)}")
    matchers += [f"{k}={quoted(v)}" for k, v in sorted(gate.labels.items())]
    selector = f"{gate.metric}{{{','.join(matchers)}}}"
    if gate.rate:
        selector = f"rate({selector}[{gate.rate}])"
    return f"max by (cluster) ({selector})"
