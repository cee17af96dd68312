"""The ServingPlatform reconcile as decisions: what was read goes in, the status comes out.

A reconcile (:meth:`addon_agent.shell.platform.Platforms.reconcile`) reads, asks these
functions, and writes the one status they return (an :class:`Outcome`). In the order a
reconcile meets them:

1. :func:`another_owns`: another ServingPlatform owns the cluster's stack.
2. :func:`route`: ``Removed`` (to :func:`removal_held`, :func:`removing`,
   :func:`removal_waiting`, :func:`removed`), refused by the agent's policy, ``Unmanaged``
   (:func:`unmanaged`) or ``Managed``.
3. Managed: :func:`owned_elsewhere` (another operator's stack), :func:`failed` (a version
   not carried, a bundle error, CRDs not Established, a refused write), :func:`upgrading`
   (a version change waiting for its controllers), else :func:`managed`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from addon_agent.pure import ownership, removal
from addon_agent.pure import status as st
from addon_agent.pure.planning import Plan
from addon_api.reasons import ServingPlatformPhase as Phase
from addon_api.reasons import ServingPlatformReason as Reason
from addon_api.spoke import ServingPlatformSpec, ServingPlatformStatus

Obj = dict[str, Any]
Held = Mapping[str, Sequence[str]]
"""The namespaces the agent keeps and what each holds (:func:`.status.with_kept`)."""


@dataclass(frozen=True)
class Reading:
    """The ServingPlatform as the reconcile found it."""

    name: str
    generation: int | None = None
    previous: list[Obj] = field(default_factory=list)
    """Its status conditions (their transition times are kept when unchanged)."""

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> Reading:
        """The reading of a ServingPlatform object."""
        meta = body.get("metadata") or {}
        return cls(
            name=str(meta["name"]),
            generation=meta.get("generation"),
            previous=list((body.get("status") or {}).get("conditions") or []),
        )


@dataclass(frozen=True)
class Outcome:
    """What a reconcile ends with: the status to write (once), and what follows it."""

    status: ServingPlatformStatus | None = None
    """The status to write; None: nothing is written."""
    retry: str = ""
    """Not "": after the write, the handler fails with this message and kopf retries."""
    done: bool = True
    """False while a removal has not finished (a deletion keeps its finalizer)."""
    again: float = 0.0
    """Seconds after which the reconcile runs again by itself, sooner than the resync:
    something under way ends on its own and nothing the agent watches says when (a removal's
    deletes, a stack's webhook not serving yet). 0: at the next event or resync (also while it
    waits for someone else, such as the objects that hold a removal)."""
    after: Callable[[], None] | None = None
    """Run once the status is written (the metrics of what the status says)."""


@dataclass(frozen=True)
class Upgrade:
    """A version change waiting for its controllers to roll out (nothing more applied)."""

    source: str
    """The version the cluster ran before."""
    target: str
    """The version being installed."""
    message: str


class Route(enum.Enum):
    """Which way a reconcile goes once the platform owns the stack and is not refused."""

    REMOVE = "Removed"
    UNMANAGED = "Unmanaged"
    MANAGED = "Managed"


def another_owns(reading: Reading, owner: str | None) -> ServingPlatformStatus | None:
    """``Degraded``/``AnotherPlatformOwns`` unless ``reading`` is the owning platform.

    ``owner`` is :func:`addon_agent.pure.status.owning_platform` of the cluster's platforms.
    """
    if owner == reading.name:
        return None
    return st.simple_status(
        Phase.DEGRADED, Reason.ANOTHER_PLATFORM_OWNS,
        f"ServingPlatform {owner} manages the serving stack of this cluster",
        reading.generation, reading.previous,
    )


def route(
    reading: Reading, spec: ServingPlatformSpec, denied: tuple[Reason, str] | None
) -> Route | ServingPlatformStatus:
    """The way a reconcile of ``spec`` goes, or the status that ends it at once.

    ``denied`` is the agent's policy refusal (:func:`addon_agent.pure.tenancy.platform_refusal`):
    a removal is never refused; anything else refused is ``Degraded`` with its reason (or
    ``Installing`` while the namespace policy it needs is not there yet).
    """
    if spec.management_state == "Removed":
        return Route.REMOVE
    if denied is not None:  # a policy not there yet is a wait, anything else a refusal
        phase = (Phase.INSTALLING if denied[0] is Reason.WAITING_FOR_NAMESPACE_POLICY
                 else Phase.DEGRADED)
        return st.simple_status(phase, denied[0], denied[1], reading.generation,
                                reading.previous)
    if spec.management_state == "Unmanaged":
        return Route.UNMANAGED
    return Route.MANAGED


# Managed --------------------------------------------------------------------------------------


def owned_elsewhere(
    reading: Reading, found: ownership.Installation
) -> ServingPlatformStatus | None:
    """``Degraded``/``OwnedByAnotherOperator`` when another manager marks the installation."""
    mark = found.owner()
    if mark is None:
        return None
    return ownership.refused_status(found, mark, reading.generation, reading.previous)


class Failure(enum.Enum):
    """Why a Managed install stopped short, as (phase, reason)."""

    VERSION_NOT_CARRIED = (Phase.DEGRADED, Reason.VERSION_NOT_CARRIED)
    """``spec.version`` is not a version the agent carries: nothing applied."""
    BUNDLE_ERROR = (Phase.DEGRADED, Reason.BUNDLE_ERROR)
    """The bundle cannot be loaded: the installed stack is left as it is."""
    NOT_READY = (Phase.INSTALLING, Reason.INSTALLING)
    """The CRDs did not become Established in time: tried again."""
    APPLY_FAILED = (Phase.DEGRADED, Reason.APPLY_FAILED)
    """The API server refused a request: kopf retries."""


def failed(reading: Reading, failure: Failure, message: str) -> ServingPlatformStatus:
    """The status of a Managed install that stopped with ``failure``."""
    phase, reason = failure.value
    return st.simple_status(phase, reason, message, reading.generation, reading.previous)


def apply_failed_message(code: object, reason: object, body: object) -> str:
    """The message of a request the API server refused (its status, reason and body)."""
    return f"apply failed: {code} {reason}: {str(body)[:400]}"


def upgrading(
    reading: Reading, upgrade: Upgrade, deployments: dict[str, Obj | None]
) -> ServingPlatformStatus:
    """``Upgrading``: the new version's controllers are rolling out (``deployments``)."""
    return st.upgrading_status(
        generation=reading.generation, source=upgrade.source, target=upgrade.target,
        message=upgrade.message, deployments=deployments, previous=reading.previous,
    )


def managed(
    reading: Reading,
    the_plan: Plan,
    deployments: dict[str, Obj | None],
    crds: dict[str, Obj | None],
    kept: Held,
) -> ServingPlatformStatus:
    """The status of an applied plan from its Deployments and CRDs as the cluster shows them.

    ``kept``: the namespaces the agent keeps (dropped from ``servingNamespaces`` and holding
    someone's objects), named in the status.
    """
    return st.with_kept(
        st.platform_status(
            generation=reading.generation,
            version=the_plan.stack.version,
            deployments=deployments,
            crds=crds,
            warnings=the_plan.warnings,
            runtime_errors=the_plan.runtime_errors,
            conflicts=the_plan.conflicts,
            runtime_conflicts=the_plan.runtime_conflicts,
            previous=reading.previous,
        ),
        kept,
    )


def refreshed(status: ServingPlatformStatus, current: Mapping[str, Any] | None) -> bool:
    """Whether a status refreshed by a Deployment's event differs from ``current``.

    Conditions are left out of the comparison (only their times would differ); an event
    that changes nothing else writes nothing.
    """
    fields = {k: v for k, v in status.to_patch().items() if k != "conditions"}
    return fields != {k: v for k, v in (current or {}).items() if k != "conditions"}


# Unmanaged ------------------------------------------------------------------------------------


def unmanaged(
    reading: Reading, found: ownership.Installation, kept: Held
) -> ownership.UnmanagedCheck:
    """``Unmanaged``: the stack someone else installed, checked (:mod:`addon_agent.pure.ownership`).

    The check's status names the namespaces the agent keeps; its components go to the metrics.
    """
    check = ownership.unmanaged_status(found, reading.generation, reading.previous)
    return ownership.UnmanagedCheck(st.with_kept(check.status, kept), check.components)


# Removal --------------------------------------------------------------------------------------


def removal_held(reading: Reading, held: removal.Hold) -> ServingPlatformStatus:
    """Nothing is deleted yet (:func:`addon_agent.pure.removal.hold`): its phase and reason."""
    return st.simple_status(held.phase, held.reason, held.message, reading.generation,
                            reading.previous)


def removing(reading: Reading) -> ServingPlatformStatus:
    """``Removing``: written before the uninstall starts, so the hub sees it going."""
    return st.simple_status(Phase.REMOVING, Reason.REMOVING, "uninstalling the stack",
                            reading.generation, reading.previous)


REMAINING_NAMED = 10
"""Objects a ``Removing`` message names while they are still there."""


def removal_waiting(
    reading: Reading, remaining: Sequence[tuple[str, str]]
) -> ServingPlatformStatus:
    """``Removing`` while objects the uninstall deleted (``(kind, name)``) are still there."""
    message = "waiting for removal of " + ", ".join(
        f"{kind} {name}" for kind, name in remaining[:REMAINING_NAMED]
    )
    return st.simple_status(Phase.REMOVING, Reason.REMOVING, message, reading.generation,
                            reading.previous)


def removed(reading: Reading, left: removal.Leftovers) -> ServingPlatformStatus:
    """``Removed``: nothing the agent installed remains but what ``left`` names.

    A forced removal's leftovers (CRDs with instances, namespaces holding others' objects)
    make the reason ``RemovedWithLeftovers``; the kept-namespaces fields are cleared, the
    message naming what is kept now.
    """
    return st.with_kept(st.simple_status(
        Phase.REMOVED,
        removal.REASON_LEFTOVERS if left.message else Reason.REMOVED,
        left.message or "the stack is not installed",
        reading.generation,
        reading.previous,
    ), {})
