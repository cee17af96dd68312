"""``predict``: send one JSON input to a model on each cluster that serves it, print the answers.

Where to send comes from the hub: each cluster's entry of the MultiClusterInferenceService
carries the model's URL there (``externalUrl`` when it is exposed outside the cluster, else
``url``, the cluster-internal address KServe reports). A caller outside the cluster reaches it
through an ingress: ``--via CLUSTER=BASE`` sends that cluster's request to ``BASE`` with the
model's host in the ``Host`` header, the way KServe's docs test a model through an ingress
gateway. ``--endpoint BASE`` sends one request through the fleet endpoint instead
(``endpoint serve``, with the model's fleet host), which names the cluster that answered. The
path follows the protocol: V1 ``/v1/models/NAME:predict`` (an ``instances``
body), V2 ``/v2/models/NAME/infer`` (an ``inputs`` body).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from addon_cli.endpoint import CLUSTER_HEADER
from addon_cli.hub import EXIT_USAGE, CliError

MAX_SHOWN = 120
"""Characters of an answer the table shows (``-o json`` has it whole)."""


@dataclass(frozen=True)
class Target:
    """Where one cluster's request goes."""

    cluster: str
    url: str
    """The full request URL (the ingress's base, or the model's own URL, plus the path)."""
    host: str
    """The ``Host`` header: the model's host on that cluster."""


@dataclass(frozen=True)
class Answer:
    """One cluster's answer."""

    cluster: str
    status: int | None
    """HTTP status; None when no answer came (the error says why)."""
    seconds: float
    body: Any = None
    error: str = ""

    @property
    def ok(self) -> bool:
        """Whether the model answered with a 2xx."""
        return self.status is not None and 200 <= self.status < 300


def protocol_of(body: Mapping[str, Any], asked: str | None) -> str:
    """``v1`` or ``v2``: ``asked``, else what the body's shape says."""
    if asked:
        return asked
    if "instances" in body:
        return "v1"
    if "inputs" in body:
        return "v2"
    raise CliError(EXIT_USAGE, "the input is neither V1 ({\"instances\": ...}) nor V2 "
                   "({\"inputs\": ...}); say which with --protocol")


def path_of(protocol: str, model: str) -> str:
    """The request path of ``protocol`` for ``model``."""
    return f"/v1/models/{model}:predict" if protocol == "v1" else f"/v2/models/{model}/infer"


def parse_via(values: Iterable[str]) -> dict[str, str]:
    """``--via CLUSTER=BASE`` values as cluster -> base URL (no trailing slash)."""
    out = {}
    for value in values:
        cluster, sep, base = value.partition("=")
        if not sep or not cluster or not base.startswith(("http://", "https://")):
            raise CliError(EXIT_USAGE, f"--via {value!r}: give CLUSTER=http(s)://HOST[:PORT]")
        out[cluster] = base.rstrip("/")
    return out


def targets(intent: Mapping[str, Any], path: str, clusters: Sequence[str],
            via: Mapping[str, str]) -> list[Target]:
    """Each selected cluster's request (all clusters with a URL when ``clusters`` is empty).

    A cluster asked for that has no URL on the hub yet is an error naming it.
    """
    entries = {str(e.get("cluster")): e
               for e in (intent.get("status") or {}).get("clusters") or []}
    wanted = list(clusters) or sorted(c for c, e in entries.items()
                                      if e.get("externalUrl") or e.get("url"))
    out = []
    for cluster in wanted:
        entry = entries.get(cluster) or {}
        url = str(entry.get("externalUrl") or entry.get("url") or "")
        if not url:
            raise CliError(EXIT_USAGE, f"cluster {cluster} has no URL for this model on the "
                           f"hub (phase {entry.get('phase') or 'unknown'}): nothing to send to")
        parts = urlsplit(url)
        base = via.get(cluster) or f"{parts.scheme}://{parts.netloc}"
        out.append(Target(cluster, base + parts.path.rstrip("/") + path,
                          str(parts.hostname or "")))
    if not out:
        raise CliError(EXIT_USAGE, "no cluster has a URL for this model on the hub yet")
    return out


FLEET = "fleet endpoint"
"""The cluster column of a request sent through the fleet endpoint before it answers."""


def fleet_target(name: str, namespace: str, path: str, base: str, domain: str) -> Target:
    """The one request through the fleet endpoint at ``base`` (``endpoint serve``).

    Its host is the model's fleet host, ``NAME.NAMESPACE.DOMAIN``; the endpoint picks the
    cluster and names it in its answer (:data:`addon_cli.endpoint.CLUSTER_HEADER`).
    """
    if not base.startswith(("http://", "https://")):
        raise CliError(EXIT_USAGE, f"--endpoint {base!r}: give http(s)://HOST[:PORT]")
    return Target(FLEET, base.rstrip("/") + path, f"{name}.{namespace}.{domain}")


def send(target: Target, body: Mapping[str, Any], timeout: float) -> Answer:
    """POST ``body`` to one cluster; its answer, HTTP errors included.

    Through the fleet endpoint, the answer's cluster is the one the endpoint names.
    """
    request = urllib.request.Request(
        target.url, json.dumps(body).encode(),
        {"Content-Type": "application/json", "Host": target.host})
    started = time.monotonic()
    cluster = target.cluster
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            status = int(response.status)
            named = response.headers.get(CLUSTER_HEADER)
    except urllib.error.HTTPError as err:
        raw, status, named = err.read(), int(err.code), err.headers.get(CLUSTER_HEADER)
    except (urllib.error.URLError, OSError) as err:
        return Answer(cluster, None, time.monotonic() - started,
                      error=str(getattr(err, "reason", err)))
    seconds = time.monotonic() - started
    if cluster == FLEET and named:
        cluster = f"{named} (fleet endpoint)"
    try:
        decoded: Any = json.loads(raw)
    except ValueError:
        decoded = raw.decode(errors="replace")
    return Answer(cluster, status, seconds, decoded)


def summary(body: Any) -> str:
    """What the table shows of an answer, as compact JSON.

    V1: its ``predictions``; V2: each output's ``data`` (``{"outputs":[...]}``); anything
    else whole.
    """
    if isinstance(body, dict) and "predictions" in body:
        body = {"predictions": body["predictions"]}
    elif isinstance(body, dict) and isinstance(body.get("outputs"), list):
        body = {"outputs": [o.get("data") if isinstance(o, dict) else o
                            for o in body["outputs"]]}
    return json.dumps(body, separators=(",", ":"))


def table(answers: Sequence[Answer]) -> str:
    """The answers as aligned text: cluster, HTTP status, latency, answer (:func:`summary`)."""
    rows = [("CLUSTER", "STATUS", "LATENCY", "ANSWER")]
    for a in answers:
        shown = a.error or summary(a.body)
        if len(shown) > MAX_SHOWN:
            shown = shown[:MAX_SHOWN - 3] + "..."
        rows.append((a.cluster, str(a.status or "-"), f"{a.seconds * 1000:.0f}ms", shown))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join("  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3]
                     for r in rows)
