"""The chart's uninstall guard: may the add-on be uninstalled now? Pure.

Every intent (ModelServing, StorageConnection, MultiClusterServingRuntime,
MultiClusterInferenceService) carries the manager's finalizer, and its ManifestWorks keep
models and credentials on the clusters. Uninstalling the chart stops the manager: intents left
then hang when deleted (nobody removes the finalizer) and their works stay. So the chart's
pre-delete hook asks this before Helm removes anything (``model-serving-addon
uninstall-guard``):

- no intent: the uninstall proceeds;
- only intents being deleted (a deletion timestamp): the manager, still running during the
  hook, is removing them; the guard waits for them to go (up to its timeout), then proceeds;
- any other intent: refused, naming them, with what to do. Nothing is deleted by the guard:
  deleting the intents removes models from clusters, which is the admin's decision.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from addon_cli import views

Obj = dict[str, Any]

SHOWN = 10
"""How many intents a refusal names (the rest are counted)."""


@dataclass(frozen=True)
class Verdict:
    """What the guard decides about the intents it read."""

    proceed: bool
    """True when no intent is left: Helm may remove the chart."""
    wait: bool
    """True when every intent left is being deleted: read again before deciding."""
    message: str


def _ref(intent: Obj) -> str:
    meta = intent.get("metadata") or {}
    kind = str(intent.get("kind", ""))
    return (f"{views.short(kind) if kind in views.KINDS else kind} "
            f"{meta.get('namespace')}/{meta.get('name')}")


def _listed(intents: list[Obj]) -> str:
    names = ", ".join(_ref(i) for i in intents[:SHOWN])
    more = len(intents) - SHOWN
    return names + (f" and {more} more" if more > 0 else "")


def verdict(intents: Iterable[Obj]) -> Verdict:
    """Decide from every intent on the hub (of the four kinds, all namespaces)."""
    found = sorted(intents, key=_ref)
    live = [i for i in found if not (i.get("metadata") or {}).get("deletionTimestamp")]
    if live:
        return Verdict(False, False, (
            f"refusing to uninstall: {len(live)} intent(s) still exist ({_listed(live)}). "
            "Their ManifestWorks keep models and credentials on the clusters, and without the "
            "manager nothing removes their finalizer. Delete them first and wait until "
            "`kubectl get mlfleet -A` lists nothing (docs/operations.md, Uninstall), then run "
            "helm uninstall again; `helm uninstall --no-hooks` skips this guard and strands "
            "them."))
    if found:
        return Verdict(False, True, (
            f"waiting for {len(found)} intent(s) being deleted ({_listed(found)}): the "
            "manager removes their works, then their finalizer"))
    return Verdict(True, False, "no intents on the hub: the uninstall may proceed")
