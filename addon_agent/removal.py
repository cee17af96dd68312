"""Removal of a stack: what must be gone before the agent deletes anything, what force leaves.

Pure: the objects of the stack's kinds found on the cluster go in, a decision comes out.
The agent never deletes a controller while objects carrying its finalizers exist (nothing
else would ever process them): InferenceServices (and any finalizer-carrying object of the
stack's kinds) that the add-on created are waited for, their ManifestWorks being deleted;
ones it did not create block the removal unless ``force`` is set. A forced removal never
deletes user objects: the CRDs of kinds that still have instances and the agent-created
serving namespaces that still hold them are left in place and named.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from addon_api import constants as c

ISVC_KIND = "InferenceService"
ISVC_CRD = "inferenceservices.serving.kserve.io"
NAMED = 20
"""Objects named in a status message before "and N more"."""
REASON_FOREIGN = "ForeignInferenceServices"
REASON_WAITING = "WaitingForInferenceServices"
REASON_LEFTOVERS = "RemovedWithLeftovers"


@dataclass(frozen=True)
class Instance:
    """One object of a kind the stack's CRDs serve."""

    kind: str
    namespace: str
    name: str
    crd: str
    """Name of the CRD serving its kind."""
    by_addon: bool = False
    """Created by the add-on (an intent's work, or the agent): labelled as the add-on's."""
    own: bool = False
    """In the agent's inventory: part of the stack itself (e.g. a built-in runtime)."""
    finalizers: bool = False
    terminating: bool = False

    @property
    def label(self) -> str:
        """``ns/name`` of an InferenceService, ``Kind ns/name`` of anything else."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return where if self.kind == ISVC_KIND else f"{self.kind} {where}"


def instance_of(obj: Mapping[str, Any], crd: str, own: bool) -> Instance:
    """An :class:`Instance` from a listed object."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    return Instance(
        kind=str(obj.get("kind", "")),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name", "")),
        crd=crd,
        by_addon=labels.get(c.LABEL_MANAGED_BY) == c.FIELD_MANAGER
        or labels.get(c.LABEL_PART_OF) == c.ADDON_NAME,
        own=own,
        finalizers=bool(meta.get("finalizers")),
        terminating=bool(meta.get("deletionTimestamp")),
    )


@dataclass(frozen=True)
class Hold:
    """Why nothing is deleted yet: the ServingPlatform's phase, reason and message."""

    phase: str
    reason: str
    message: str


def _names(items: Sequence[str]) -> str:
    more = len(items) - NAMED
    return ", ".join(items[:NAMED]) + (f" and {more} more" if more > 0 else "")


def _guarded(instances: Iterable[Instance]) -> list[Instance]:
    """Objects the stack's controller must still process.

    InferenceServices, and any object of the stack's kinds carrying finalizers (the stack's
    own objects excepted).
    """
    return [i for i in instances if not i.own and (i.kind == ISVC_KIND or i.finalizers)]


def hold(instances: Iterable[Instance], force: bool) -> Hold | None:
    """What keeps the agent from deleting anything now (None: go ahead).

    Foreign objects block (``RemovalBlocked``) unless ``force``; the add-on's own are waited
    for (``Removing``) while their deletion is under way, with ``force`` only those already
    terminating (the others are left behind, see :func:`leftovers`).
    """
    guarded = _guarded(instances)
    foreign = sorted(i.label for i in guarded if not i.by_addon)
    if foreign and not force:
        return Hold(
            "RemovalBlocked", REASON_FOREIGN,
            f"InferenceServices not created by the add-on still exist: {_names(foreign)}",
        )
    waiting = sorted(i.label for i in guarded if i.by_addon and (i.terminating or not force))
    if waiting:
        return Hold(
            "Removing", REASON_WAITING,
            f"waiting for InferenceServices to be deleted: {_names(waiting)} (the stack's "
            "controller processes their finalizers; nothing is removed before they are gone)",
        )
    return None


@dataclass(frozen=True)
class Leftovers:
    """What a forced removal leaves in place because user objects are still in it."""

    crds: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()
    message: str = ""


def leftovers(
    instances: Iterable[Instance], crds: Iterable[str], namespaces: Iterable[str]
) -> Leftovers:
    """What a forced removal keeps so that no user object is deleted with it.

    CRDs of ``crds`` (the agent's) whose kinds still have instances, and namespaces of
    ``namespaces`` (the ones the agent would delete) that still hold any.
    """
    users = [i for i in instances if not i.own]
    mine_crds, mine_ns = set(crds), set(namespaces)
    kept_crds = sorted({i.crd for i in users if i.crd in mine_crds})
    kept_ns = sorted({i.namespace for i in users if i.namespace in mine_ns})
    if not kept_crds and not kept_ns:
        return Leftovers()
    parts = []
    for crd in kept_crds:
        held = sorted(i.label for i in users if i.crd == crd)
        parts.append(f"CustomResourceDefinition {crd} ({len(held)} left: {_names(held)})")
    for ns in kept_ns:
        held = sorted(i.label for i in users if i.namespace == ns)
        parts.append(f"Namespace {ns} (holds {_names(held)})")
    return Leftovers(
        frozenset(kept_crds), frozenset(kept_ns),
        "the stack is removed (force); left in place because they still hold objects the "
        "agent does not delete: " + "; ".join(parts),
    )
