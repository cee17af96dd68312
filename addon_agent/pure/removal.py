"""Removal of a stack: what must be gone before the agent deletes anything, what it leaves.

Pure: the objects of the stack's kinds found on the cluster go in, a decision comes out.
The agent never deletes a controller while objects carrying its finalizers exist (nothing
else would ever process them): InferenceServices (and any finalizer-carrying object of the
stack's kinds) that the add-on created are waited for, their ManifestWorks being deleted.
Objects the add-on did not create block the removal unless ``force`` is set
(``ForeignObjectsPresent``): InferenceServices and finalizer-carrying objects wherever their
CRD came from, and every object of a kind whose CRD the removal would delete (deleting a CRD
deletes all its objects). A forced removal never deletes user objects either: the CRDs of
kinds that still have instances are left in place and named. A namespace the agent created is
kept, with or without ``force``, while it holds objects the agent did not create
(:func:`user_objects`), and named as a leftover.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from addon_api import constants as c
from addon_api import tenancy
from addon_api.reasons import ServingPlatformPhase as Phase
from addon_api.reasons import ServingPlatformReason as Reason

ISVC_KIND = "InferenceService"
ISVC_CRD = "inferenceservices.serving.kserve.io"
NAMED = 20
"""Objects named in a status message before "and N more"."""
REASON_FOREIGN = Reason.FOREIGN_OBJECTS_PRESENT
REASON_WAITING = Reason.WAITING_FOR_INFERENCE_SERVICES
REASON_LEFTOVERS = Reason.REMOVED_WITH_LEFTOVERS


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
    crd_ours: bool = False
    """Its CRD is the agent's: removing the stack deletes the CRD and with it this object."""

    @property
    def label(self) -> str:
        """``ns/name`` of an InferenceService, ``Kind ns/name`` of anything else."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return where if self.kind == ISVC_KIND else f"{self.kind} {where}"


def by_addon(obj: Mapping[str, Any]) -> bool:
    """Whether the add-on created ``obj`` (the agent, or an intent's ManifestWork).

    That is: labelled ``managed-by: model-serving-addon`` or ``part-of: model-serving``.
    """
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return bool(
        labels.get(c.LABEL_MANAGED_BY) == c.FIELD_MANAGER
        or labels.get(c.LABEL_PART_OF) == c.ADDON_NAME
    )


APPLIED_WORK_KIND = "AppliedManifestWork"
"""Owner OCM's work agent gives what a ManifestWork applied (for its garbage collection)."""


def made_for_another(meta: Mapping[str, Any]) -> bool:
    """Whether a controller made the object for another object (an owner reference).

    OCM's work agent owns what a ManifestWork applied through an AppliedManifestWork; that is
    a placement by someone on the hub, not an object made for another one, so it counts.
    """
    return any(ref.get("kind") != APPLIED_WORK_KIND for ref in meta.get("ownerReferences") or [])


def tenant_access(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is part of a tenant's access grant (applied by the hub's access work)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(c.LABEL_INTENT_KIND) == tenancy.ACCESS_KIND


def instance_of(
    obj: Mapping[str, Any], crd: str, own: bool, crd_ours: bool = False
) -> Instance:
    """An :class:`Instance` from a listed object.

    ``own`` (in the agent's inventory) only counts for an object labelled as the add-on's:
    an inventory entry never makes someone else's object of that name the stack's.
    """
    meta = obj.get("metadata") or {}
    mine = by_addon(obj)
    return Instance(
        kind=str(obj.get("kind", "")),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name", "")),
        crd=crd,
        by_addon=mine,
        own=own and mine,
        finalizers=bool(meta.get("finalizers")),
        terminating=bool(meta.get("deletionTimestamp")),
        crd_ours=crd_ours,
    )


@dataclass(frozen=True)
class Hold:
    """Why nothing is deleted yet: the ServingPlatform's phase, reason and message."""

    phase: Phase
    reason: Reason
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


def foreign(instances: Iterable[Instance]) -> list[Instance]:
    """Objects the add-on did not create that a removal would delete or strand.

    Those of a kind whose CRD the removal deletes, and InferenceServices and finalizer-
    carrying objects of any of the stack's kinds (their controller goes).
    """
    return [
        i for i in instances
        if not i.by_addon and (i.crd_ours or i.kind == ISVC_KIND or i.finalizers)
    ]


def count_kinds(kinds: Iterable[str]) -> str:
    """``"2 ServingRuntime, 1 InferenceGraph"``: how many of each kind, most first."""
    counts: dict[str, int] = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(
        f"{n} {kind}" for kind, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    )


def hold(instances: Iterable[Instance], force: bool) -> Hold | None:
    """What keeps the agent from deleting anything now (None: go ahead).

    Objects the add-on did not create (:func:`foreign`) block (``RemovalBlocked``,
    ``ForeignObjectsPresent``, naming kinds, counts and the objects) unless ``force``; the
    add-on's own are waited for (``Removing``) while their deletion is under way, with
    ``force`` only those already terminating (the others are left behind, see
    :func:`leftovers`).
    """
    instances = list(instances)
    theirs = foreign(instances)
    if theirs and not force:
        return Hold(
            Phase.REMOVAL_BLOCKED, REASON_FOREIGN,
            f"{count_kinds(i.kind for i in theirs)} not created by the add-on remain "
            f"(removing the stack would delete them with their CRDs or strand their "
            f"finalizers): {_names(sorted(i.label for i in theirs))}",
        )
    guarded = _guarded(instances)
    waiting = sorted(i.label for i in guarded if i.by_addon and (i.terminating or not force))
    if waiting:
        return Hold(
            Phase.REMOVING, REASON_WAITING,
            f"waiting for InferenceServices to be deleted: {_names(waiting)} (the stack's "
            "controller processes their finalizers; nothing is removed before they are gone)",
        )
    return None


@dataclass(frozen=True)
class Leftovers:
    """What a removal leaves in place because objects the agent did not create are in it."""

    crds: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()
    message: str = ""


DERIVED_KINDS = frozenset({"Event", "Endpoints", "EndpointSlice", "Lease", "PodMetrics"})
"""Kinds made by the system for other objects (or coordination state): never a reason to
keep a namespace."""
SYSTEM_OBJECTS = frozenset(
    {
        ("ConfigMap", "kube-root-ca.crt"),
        ("ConfigMap", "openshift-service-ca.crt"),
        ("ServiceAccount", "default"),
        ("ServiceAccount", "builder"),
        ("ServiceAccount", "deployer"),
    }
)
"""(kind, name) of what Kubernetes (or OpenShift) puts into every namespace."""
SA_NAME_ANNOTATION = "kubernetes.io/service-account.name"
UNSEEN = "unseen"
"""Key marking the stand-in of a kind the agent could not list in a namespace."""


def unseen(api_version: str, kind: str, namespace: str) -> dict[str, Any]:
    """The stand-in for every object of ``kind`` in ``namespace`` the agent cannot list.

    It counts as an object the agent did not create (:func:`user_objects`), so a namespace
    whose contents the agent cannot fully see is never deleted.
    """
    return {"apiVersion": api_version, "kind": kind, "metadata": {"namespace": namespace},
            UNSEEN: True}


def user_objects(objects: Iterable[Mapping[str, Any]]) -> list[str]:
    """``Kind ns/name`` of the objects of a namespace that the agent did not create.

    Not counted: the add-on's (:func:`by_addon`), objects with an owner (a controller made
    them for another object, which counts itself), :data:`DERIVED_KINDS`,
    :data:`SYSTEM_OBJECTS`, the Secrets Kubernetes makes for ServiceAccounts and
    OpenShift's ``system:*`` RoleBindings. The stand-in of a kind the agent may not list
    (:func:`unseen`) counts: it may hold anything. A tenant's access grant (the Roles and
    RoleBindings of its executor, from the hub's access work) counts although the add-on made
    it: the hub still grants that tenant the namespace, and deleting the namespace would
    silently revoke the grant until OCM's work agent re-applies it.
    """
    out = []
    for obj in objects:
        kind = str(obj.get("kind", ""))
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        if obj.get(UNSEEN):
            out.append(f"{kind} {meta.get('namespace') or ''}/* (the agent may not list them)")
            continue
        if (
            (by_addon(obj) and not tenant_access(obj))
            or made_for_another(meta)
            or kind in DERIVED_KINDS
            or (kind, name) in SYSTEM_OBJECTS
            or (kind == "Secret" and SA_NAME_ANNOTATION in (meta.get("annotations") or {}))
            or (kind == "RoleBinding" and name.startswith("system:"))
        ):
            continue
        out.append(f"{kind} {meta.get('namespace') or ''}/{name}")
    return sorted(out)


def leftovers(
    instances: Iterable[Instance],
    crds: Iterable[str],
    namespaces: Iterable[str],
    contents: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    force: bool = True,
) -> Leftovers:
    """What a removal keeps so that no object the agent did not create is deleted with it.

    ``namespaces`` are the ones the agent would delete (it created them) and ``contents``
    what each of them holds (every kind the agent may list): one holding objects the agent
    did not create (:func:`user_objects`) is kept, with or without ``force``. A forced
    removal also keeps the CRDs of ``crds`` (the agent's) whose kinds still have instances
    and the namespaces holding any of them.
    """
    users = [i for i in instances if not i.own] if force else []
    mine_crds, mine_ns = set(crds), set(namespaces)
    held: dict[str, set[str]] = {}
    for ns, objects in (contents or {}).items():
        if ns in mine_ns:
            theirs = user_objects(objects)
            if theirs:
                held.setdefault(ns, set()).update(theirs)
    for i in users:
        if i.namespace in mine_ns:
            held.setdefault(i.namespace, set()).add(i.label)
    kept_crds = sorted({i.crd for i in users if i.crd in mine_crds})
    if not kept_crds and not held:
        return Leftovers()
    parts = []
    for crd in kept_crds:
        left = sorted(i.label for i in users if i.crd == crd)
        parts.append(f"CustomResourceDefinition {crd} ({len(left)} left: {_names(left)})")
    for ns in sorted(held):
        parts.append(f"Namespace {ns} (holds {_names(sorted(held[ns]))})")
    return Leftovers(
        frozenset(kept_crds), frozenset(held),
        f"the stack is removed{' (force)' if force else ''}; left in place because they still "
        "hold objects the agent does not delete: " + "; ".join(parts),
    )
