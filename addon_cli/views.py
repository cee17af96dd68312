"""What the fleet command line shows, computed from what it read (pure: no I/O).

Rows are built from the intents' own status (the manager's word on each cluster), the
ManagedClusters, the add-on's ManagedClusterAddOns and the works' feedback; :func:`table`
lays rows out for a person, coloured only when asked (a terminal).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from addon_api import constants as c
from addon_api.constants import GROUP
from addon_api.hub import (
    ModelServing,
    MultiClusterInferenceService,
    MultiClusterServingRuntime,
    StorageConnection,
)

MODELS = {m.__name__: m for m in (
    ModelServing, StorageConnection, MultiClusterServingRuntime, MultiClusterInferenceService)}
"""Every hub kind's model, by kind."""
KINDS = {kind: model.crd for kind, model in MODELS.items()}
"""Every hub kind's CRD names, by kind."""

GOOD = {"Ready", "Available", "Delivered", "Complete", "True", "OK"}
BAD = {"Failed", "FAIL", "Degraded", "Invalid", "RolledBack", "Halted", "Conflict", "False",
       "DeletionBlocked", "Unknown"}

COLOURS = {"good": "\033[32m", "bad": "\033[31m", "other": "\033[33m"}
RESET = "\033[0m"


def kind_of(word: str) -> str:
    """The hub kind a plural, short name or kind (any case) names; ValueError otherwise."""
    low = word.lower()
    for kind, crd in KINDS.items():
        if low in {kind.lower(), crd.plural, crd.plural.rstrip("s"), *crd.short_names}:
            return kind
    names = ", ".join(sorted(crd.short_names[0] for crd in KINDS.values()))
    raise ValueError(f"unknown kind {word!r}: one of {names} (or their plurals)")


def short(kind: str) -> str:
    """The short name of a hub kind (``mcisvc``)."""
    return KINDS[kind].short_names[0]


@dataclass(frozen=True)
class Row:
    """One intent on one cluster (or the intent alone, when no cluster has an entry)."""

    kind: str
    namespace: str
    name: str
    cluster: str
    phase: str
    ready: bool
    revision: str = ""
    url: str = ""
    detail: str = ""
    """What it waits for, or the reason and message of a cluster that is not ready."""
    reason: str = ""
    """The entry's reason, also when ready (``ReplicasNotReady`` on fewer replicas)."""
    external_url: str = ""
    """Where callers outside the cluster reach the model (its Route), when exposed."""


def _status(intent: Mapping[str, Any]) -> Mapping[str, Any]:
    return intent.get("status") or {}


def _condition(intent: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    return next((x for x in _status(intent).get("conditions") or [] if x.get("type") == kind),
                {})


def _detail(entry: Mapping[str, Any]) -> str:
    if entry.get("ready"):
        return ""
    waiting = entry.get("waitingFor") or []
    if waiting:
        return "waiting for " + ", ".join(str(w) for w in waiting)
    reason, message = str(entry.get("reason") or ""), str(entry.get("message") or "")
    text = f"{reason}: {message}" if reason and message else reason or message
    return ("stale; " + text) if entry.get("stale") else text


def rows(intents: Iterable[Mapping[str, Any]], cluster: str | None = None) -> list[Row]:
    """The fleet as rows: each intent on each cluster its status has an entry for.

    An intent without any cluster entry gets one row (cluster ``-``) saying why (its Ready
    condition). ``cluster`` keeps only that cluster's rows.
    """
    out: list[Row] = []
    for intent in intents:
        meta = intent.get("metadata") or {}
        kind, ns, name = str(intent.get("kind")), str(meta.get("namespace", "")), str(
            meta.get("name", ""))
        status = _status(intent)
        roll = status.get("rollout") or {}
        entries = status.get("clusters") or []
        for entry in entries:
            if cluster is not None and entry.get("cluster") != cluster:
                continue
            revision = entry.get("revision") or ""
            if roll and revision and roll.get("targetRevision") not in (None, revision):
                revision = f"{revision} (target {roll['targetRevision']})"
            out.append(Row(kind, ns, name, str(entry.get("cluster")), str(entry.get("phase")),
                           bool(entry.get("ready")), str(revision), str(entry.get("url") or ""),
                           _detail(entry), str(entry.get("reason") or ""),
                           str(entry.get("externalUrl") or "")))
        if not entries and cluster is None:
            ready = _condition(intent, "Ready")
            out.append(Row(kind, ns, name, "-", str(status.get("phase") or "Pending"), False,
                           detail=str(ready.get("message") or ready.get("reason") or
                                      "no status yet: is the manager running?")))
    return out


def not_ready(intents: Iterable[Mapping[str, Any]]) -> list[str]:
    """Why each intent that is not Ready everywhere is not (empty: all Ready).

    Ready means the manager has seen the current spec (observedGeneration), the phase is
    Ready and every selected cluster reports ready.
    """
    out: list[str] = []
    for intent in intents:
        meta = intent.get("metadata") or {}
        status = _status(intent)
        what = f"{short(str(intent.get('kind')))}/{meta.get('name')} in {meta.get('namespace')}"
        summary = status.get("summary") or {}
        if status.get("observedGeneration") != meta.get("generation"):
            out.append(f"{what}: the manager has not seen generation {meta.get('generation')}")
        elif status.get("phase") != "Ready":
            ready = _condition(intent, "Ready")
            out.append(f"{what}: {status.get('phase') or 'Pending'} "
                       f"({ready.get('reason', '')}: {ready.get('message', '')})")
        elif summary.get("ready", 0) < summary.get("desired", 0):
            out.append(f"{what}: ready on {summary.get('ready')} of {summary.get('desired')}")
    return out


def status_table(found: Sequence[Row], colour: bool = False, wide: bool = False) -> str:
    """The fleet table: intent, cluster, phase, ready, revision, URL, what it waits for.

    ``wide`` (``-o wide``) adds the entry's reason and the external URL before the detail.
    """
    headers = ["KIND", "NAMESPACE", "NAME", "CLUSTER", "PHASE", "READY", "REVISION", "URL"]
    if wide:
        headers += ["REASON", "EXTERNAL-URL"]
    body = []
    for r in found:
        cells = [short(r.kind), r.namespace, r.name, r.cluster, r.phase,
                 "yes" if r.ready else "no", r.revision, r.url]
        if wide:
            cells += [r.reason, r.external_url]
        body.append([*cells, r.detail])
    return table([*headers, "DETAIL"], body, colour, coloured=(4, 5))


def object_names(found: Iterable[Row]) -> list[str]:
    """``-o name``: each intent once, as kubectl names objects (``kind.group/name``)."""
    names = {f"{r.kind.lower()}.{GROUP}/{r.name}": None for r in found}
    return list(names)


@dataclass(frozen=True)
class ClusterRow:
    """One managed cluster as the hub sees it."""

    name: str
    available: str
    """The ManagedCluster's ManagedClusterConditionAvailable status."""
    addon: str
    """The add-on's health on it (its ManagedClusterAddOn's Available), "-" when not enabled."""
    platform: str
    """The serving platform and its phase (from the ModelServing's work feedback)."""
    version: str
    """The stack version the agent reports."""
    intents: int
    """Intents with an entry for the cluster."""
    stale: bool
    """Whether any of those entries is stale (the cluster stopped reporting)."""


def _cond_status(obj: Mapping[str, Any], kind: str) -> str:
    found = next((x for x in (obj.get("status") or {}).get("conditions") or []
                  if x.get("type") == kind), None)
    return str(found.get("status", "Unknown")) if found else "Unknown"


def cluster_rows(clusters: Iterable[Mapping[str, Any]], addons: Mapping[str, Mapping[str, Any]],
                 platforms: Mapping[str, tuple[str, str, str]],
                 intents: Iterable[Mapping[str, Any]]) -> list[ClusterRow]:
    """Each ManagedCluster with the add-on's health, its platform and the intents on it.

    ``addons``: the add-on's ManagedClusterAddOn by cluster; ``platforms``: (platform,
    phase, stack version) by cluster, from the ModelServing works' feedback.
    """
    on: dict[str, list[Mapping[str, Any]]] = {}
    for intent in intents:
        for entry in _status(intent).get("clusters") or []:
            on.setdefault(str(entry.get("cluster")), []).append(entry)
    out = []
    for mc in sorted(clusters, key=lambda m: str((m.get("metadata") or {}).get("name"))):
        name = str((mc.get("metadata") or {}).get("name"))
        addon = addons.get(name)
        platform, phase, version = platforms.get(name, ("", "", ""))
        out.append(ClusterRow(
            name, _cond_status(mc, "ManagedClusterConditionAvailable"),
            _cond_status(addon, "Available") if addon is not None else "-",
            f"{platform} {phase}".strip() or "-", version or "-", len(on.get(name, [])),
            any(e.get("stale") for e in on.get(name, []))))
    return out


def clusters_table(found: Sequence[ClusterRow], colour: bool = False) -> str:
    """The clusters table."""
    return table(
        ["CLUSTER", "AVAILABLE", "ADD-ON", "PLATFORM", "VERSION", "INTENTS", "STALE"],
        [[r.name, r.available, r.addon, r.platform, r.version, str(r.intents),
          "yes" if r.stale else "no"] for r in found],
        colour, coloured=(1, 2, 3))


def _tone(cell: str) -> str:
    first = cell.split(" ")[-1] if cell else ""
    if cell in GOOD or first in GOOD or cell == "yes":
        return "good"
    if cell in BAD or first in BAD or cell == "no":
        return "bad"
    return "other"


def table(headers: Sequence[str], body: Sequence[Sequence[str]], colour: bool = False,
          coloured: Sequence[int] = ()) -> str:
    """Aligned columns; the ``coloured`` columns green/red/yellow when ``colour``."""
    widths = [max([len(h), *(len(r[i]) for r in body)]) for i, h in enumerate(headers)]
    lines: list[str] = []
    for cells in [list(headers), *[list(r) for r in body]]:
        out = []
        for i, cell in enumerate(cells):
            text = cell.ljust(widths[i]) if i < len(cells) - 1 else cell
            if colour and i in coloured and cells is not None and lines:
                text = COLOURS[_tone(cell)] + text + RESET
            out.append(text)
        lines.append("  ".join(out).rstrip())
    return "\n".join(lines)


def sort_key(row: Row) -> tuple[int, str, str, str]:
    """Rows by kind (stack first), namespace, name and cluster."""
    return (list(KINDS).index(row.kind) if row.kind in KINDS else len(KINDS),
            row.namespace, row.name, row.cluster)



ROLLOUT_ACTIONS = ("pause", "resume", "undo", "approve")
"""The manual actions on a progressive rollout (``rollout ACTION``, the console's buttons)."""


def rollout_action(action: str, what: str, roll: Mapping[str, Any],
                   to_revision: int | None = None) -> tuple[dict[str, str | None], str]:
    """The annotations that ask the manager for ``action`` on a rollout, and what they do.

    ``what`` names the intent (``mcisvc/canary``), ``roll`` is its ``status.rollout``.
    Raises ValueError saying why when the rollout is in no state for it (nothing to undo, no
    approval awaited).
    """
    if action == "pause":
        return {c.ANNOTATION_ROLLOUT_PAUSE: "true"}, f"{what}: paused (no further step starts)"
    if action == "resume":
        return {c.ANNOTATION_ROLLOUT_PAUSE: None}, f"{what}: resumed"
    if action == "undo":
        target = roll.get("targetRevision")
        back = to_revision or roll.get("stableRevision")
        if not target or not back:
            raise ValueError(f"{what} has no rollout to undo (status.rollout: target {target}, "
                             f"stable {roll.get('stableRevision')})")
        return ({c.ANNOTATION_ROLLOUT_UNDO: f"{target}:{back}"},
                f"{what}: every cluster returns to revision {back} (target was {target})")
    if action == "approve":
        target, step = roll.get("targetRevision"), roll.get("step")
        if roll.get("phase") != "WaitingForApproval":
            raise ValueError(f"{what} waits for no approval (phase "
                             f"{roll.get('phase') or 'none'})")
        return ({c.ANNOTATION_ROLLOUT_APPROVE: f"{target}/{int(step or 0) + 1}"},
                f"{what}: step {int(step or 0) + 1} of revision {target} approved")
    raise ValueError(f"unknown rollout action {action!r}: one of {', '.join(ROLLOUT_ACTIONS)}")
