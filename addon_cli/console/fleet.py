"""What the console's fleet view shows, from what the user may read (pure: no I/O).

The rows are the command line's (:func:`addon_cli.views.rows`: each intent on each cluster,
with its phase, readiness, revision, URL and why not), as JSON; a kind the user may not list
is named with the hub's refusal instead of silently missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

from addon_cli import views

Key = tuple[str, str]
"""(namespace, name) of an intent."""


def key_of(obj: Mapping[str, Any]) -> Key:
    """The (namespace, name) of an object."""
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def snapshot(store: Mapping[str, Mapping[Key, Mapping[str, Any]]],
             refused: Mapping[str, str]) -> dict[str, Any]:
    """The fleet view: every row, sorted as ``status`` sorts them, and the kinds refused.

    ``store`` holds each kind's intents by key; ``refused`` the hub's words for each kind the
    user may not list where they asked.
    """
    intents: Iterable[Mapping[str, Any]] = (
        obj for kind in views.KINDS for obj in (store.get(kind) or {}).values())
    rows = sorted(views.rows(intents), key=views.sort_key)
    return {"rows": [asdict(r) for r in rows],
            "refused": {kind: refused[kind] for kind in views.KINDS if kind in refused}}


def apply_event(objects: dict[Key, Mapping[str, Any]], kind: str, obj: Mapping[str, Any]
                ) -> bool:
    """Fold a watch event into one kind's store; whether it changed (BOOKMARKs do not).

    ``kind`` is the event's type (ADDED, MODIFIED, DELETED, BOOKMARK).
    """
    if kind == "BOOKMARK":
        return False
    key = key_of(obj)
    if kind == "DELETED":
        return objects.pop(key, None) is not None
    objects[key] = obj
    return True


def version_of(obj: Mapping[str, Any]) -> str:
    """An object's resourceVersion ("" when it has none)."""
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
