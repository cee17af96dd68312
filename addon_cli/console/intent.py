"""The console's page of one intent: where it serves, why not, what to do (reads the hub).

The same reads and judgements as ``explain`` and ``rollout status`` on the command line
(:mod:`addon_cli.explain`), made with the request's user's credentials through the command
line's :class:`~addon_cli.hub.Hub`: per cluster, the chain from the intent to the cluster with
the troubleshooting advice for what breaks it; the rollout; the hub's recent Events about it.
A link the user may not read (a ManagedCluster, for a tenant) says so instead of failing the
page.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from addon_cli import explain, views
from addon_cli.hub import CliError, Hub

EVENTS = 20
"""The most recent hub Events shown."""


def page(hub: Hub, kind: str, namespace: str, name: str) -> dict[str, Any]:
    """Everything the intent page shows; raises CliError when the intent cannot be read."""
    intent = hub.intent(kind, namespace, name)
    status = intent.get("status") or {}
    chains: dict[str, list[dict[str, Any]]] = {}
    for entry in status.get("clusters") or []:
        cluster = str(entry.get("cluster"))
        try:
            links = explain.chain(hub, intent, cluster)
        except CliError as err:
            links = [explain.Link("read", None, f"not readable with your rights: {err}")]
        chains[cluster] = [asdict(link) for link in links]
    spec = intent.get("spec") or {}
    rollout = explain.rollout_text(intent) if (status.get("rollout") or spec.get(
        "rollout")) else ""
    try:
        events = [_event(e) for e in hub.events(namespace, kind, name)][-EVENTS:]
        events_refused = ""
    except CliError as err:
        events, events_refused = [], str(err)
    ready: dict[str, Any] = next(
        (x for x in status.get("conditions") or [] if x.get("type") == "Ready"), {})
    return {
        "kind": kind, "namespace": namespace, "name": name, "spec": spec,
        "phase": str(status.get("phase") or "Pending"),
        "ready": {"status": str(ready.get("status") or "Unknown"),
                  "reason": str(ready.get("reason") or ""),
                  "message": str(ready.get("message") or "")},
        "rows": [asdict(r) for r in views.rows([intent])],
        "chains": chains, "rollout": rollout,
        "events": events, "eventsRefused": events_refused,
    }


def _event(event: dict[str, Any]) -> dict[str, Any]:
    return {"type": str(event.get("type") or ""), "reason": str(event.get("reason") or ""),
            "message": str(event.get("message") or ""), "count": int(event.get("count") or 1),
            "last": str(event.get("lastTimestamp") or event.get("eventTime") or "")}
