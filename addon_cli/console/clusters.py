"""The console's cluster pages: each managed cluster, and what runs on one (reads the hub).

What ``model-serving-addon clusters`` shows (:func:`addon_cli.views.cluster_rows`: the
cluster's availability, the add-on's health, the stack and its version, the intents on it),
read with the request's user's credentials through the command line's
:class:`~addon_cli.hub.Hub`; a cluster's page adds its labels and every intent's row on it
(models, runtimes, storage connections, the stack). Reading clusters takes the chart's viewer
role (or more): a tenant gets the hub's refusal.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from addon_api import constants as c
from addon_cli import explain, views
from addon_cli.hub import Hub


def _intents(hub: Hub) -> list[dict[str, Any]]:
    return [dict(i, kind=kind) for kind in views.KINDS for i in hub.intents(kind, None)]


def _rows(hub: Hub, intents: list[dict[str, Any]]) -> list[views.ClusterRow]:
    addons = {str((a.get("metadata") or {}).get("namespace")): a for a in hub.addons()}
    platforms = explain.platforms(i for i in intents if i.get("kind") == c.KIND_MODEL_SERVING)
    return views.cluster_rows(hub.clusters(), addons, platforms, intents)


def clusters(hub: Hub) -> dict[str, Any]:
    """Every managed cluster's row; raises CliError when the user may not read them."""
    return {"clusters": [asdict(r) for r in _rows(hub, _intents(hub))]}


def cluster(hub: Hub, name: str) -> dict[str, Any]:
    """One cluster: its row, its labels and every intent's row on it."""
    found = hub.cluster(name)
    intents = _intents(hub)
    row = next((r for r in _rows(hub, intents) if r.name == name), None)
    rows = sorted(views.rows(intents, cluster=name), key=views.sort_key)
    return {"cluster": asdict(row) if row else {"name": name},
            "labels": dict((found.get("metadata") or {}).get("labels") or {}),
            "rows": [asdict(r) for r in rows]}
