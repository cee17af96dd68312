"""Pure status computation for ServingPlatform and SealedStorageConnection."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from addon_api.base import sanitized
from addon_api.common import Condition
from addon_api.conditions import condition
from addon_api.reasons import SealedConditionType as SealedCondition
from addon_api.reasons import SealedReason, sealed_phase
from addon_api.reasons import ServingPlatformConditionType as PlatformCondition
from addon_api.reasons import ServingPlatformPhase as Phase
from addon_api.reasons import ServingPlatformReason as Reason
from addon_api.spoke import (
    KEPT_OBJECTS_NAMED,
    MAX_KEPT_NAMESPACES,
    KeptNamespace,
    SealedStorageConnectionStatus,
    ServingPlatformStatus,
)

Obj = dict[str, Any]


MAX_MESSAGE = 1024
"""Longest status or condition message the agent writes."""
REASON_CONFLICT = Reason.FOREIGN_OBJECT_CONFLICT
"""Objects of the stack exist with the bundle's names and are someone else's."""
NAMED = 10
"""Conflicting objects named in a message before "and N more"."""


def not_taken_over(labels: Sequence[str]) -> str:
    """The message part naming objects of the stack that are someone else's."""
    items = sorted(labels)
    more = len(items) - NAMED
    names = ", ".join(items[:NAMED]) + (f" and {more} more" if more > 0 else "")
    return (
        f"not taken over (exist and are not the add-on's; the agent neither changes nor "
        f"deletes them): {names}"
    )


MAX_LEFTOVERS = 512
"""Longest leftovers line (it is fed back to the hub: short)."""
LEFTOVERS_NAMESPACES = 3
"""Kept namespaces the leftovers line names before "N more namespaces kept"."""
LEFTOVERS_OBJECTS = 1
"""Objects of each kept namespace the leftovers line names before "(N more)"."""


def kept_namespaces(held: Mapping[str, Sequence[str]]) -> tuple[list[KeptNamespace], str]:
    """The status entries and the leftovers line of the namespaces the agent kept.

    ``held`` is what each kept namespace holds that the agent did not create (``Kind
    ns/name``, from :func:`addon_agent.pure.removal.user_objects`); one that holds nothing is left
    out. Bounded: at most :data:`~addon_api.spoke.MAX_KEPT_NAMESPACES` entries naming the
    first few objects each, and a line of at most :data:`MAX_LEFTOVERS` characters, e.g.
    ``namespace team-a kept: holds PersistentVolumeClaim team-a/data (1 more)``, sanitised
    (the names are the cluster's users').
    """
    kept = sorted((name, sorted(objects)) for name, objects in held.items() if objects)
    entries = [KeptNamespace(name=name, objects=len(objects),
                             holds=objects[:KEPT_OBJECTS_NAMED])
               for name, objects in kept[:MAX_KEPT_NAMESPACES]]
    parts = []
    for name, objects in kept[:LEFTOVERS_NAMESPACES]:
        more = len(objects) - LEFTOVERS_OBJECTS
        parts.append(f"namespace {name} kept: holds {', '.join(objects[:LEFTOVERS_OBJECTS])}"
                     + (f" ({more} more)" if more > 0 else ""))
    if len(kept) > LEFTOVERS_NAMESPACES:
        parts.append(f"{len(kept) - LEFTOVERS_NAMESPACES} more namespaces kept")
    return entries, sanitized("; ".join(parts), MAX_LEFTOVERS)


def with_kept(
    status: ServingPlatformStatus, held: Mapping[str, Sequence[str]]
) -> ServingPlatformStatus:
    """``status`` naming the namespaces the agent kept (:func:`kept_namespaces`).

    Both fields are set even when none are kept, so that a merge patch of
    :meth:`~ServingPlatformStatus.to_patch` clears what an earlier status named.
    """
    entries, line = kept_namespaces(held)
    return status.model_copy(update={"kept_namespaces": entries, "leftovers": line})


def condition_true(obj: Obj | None, kind: str) -> bool:
    """Whether ``obj.status.conditions`` has ``kind`` with status True."""
    if not obj:
        return False
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return bool(cond.get("status") == "True")
    return False


def deployment_available(deployment: Obj | None) -> bool:
    """Available condition True for the current generation."""
    if not deployment:
        return False
    status = deployment.get("status") or {}
    generation = deployment.get("metadata", {}).get("generation", 0)
    if status.get("observedGeneration", 0) < generation:
        return False
    return condition_true(deployment, "Available")


def deployment_rolled_out(deployment: Obj | None) -> bool:
    """Available for its current generation with every replica updated and no old one left."""
    if not deployment_available(deployment):
        return False
    assert deployment is not None
    want = (deployment.get("spec") or {}).get("replicas", 1)
    status = deployment.get("status") or {}
    return bool(status.get("updatedReplicas", 0) >= want
                and status.get("replicas", 0) == status.get("updatedReplicas", 0))


def deployment_rolling_out(deployment: Obj | None) -> bool:
    """Whether a Deployment is still rolling out (not yet failed: no progress deadline hit)."""
    if not deployment:
        return True
    status = deployment.get("status") or {}
    if status.get("observedGeneration", 0) < deployment.get("metadata", {}).get("generation", 0):
        return True
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Progressing":
            return bool(
                cond.get("status") == "True" and cond.get("reason") != "NewReplicaSetAvailable"
            )
    return True  # no Progressing condition yet: just created


def platform_status(
    *,
    generation: int | None,
    version: str,
    deployments: dict[str, Obj | None],
    crds: dict[str, Obj | None],
    warnings: Sequence[str],
    previous: Sequence[Obj] = (),
    runtime_errors: Sequence[str] = (),
    conflicts: Sequence[str] = (),
    runtime_conflicts: Sequence[str] = (),
) -> ServingPlatformStatus:
    """Status of a Managed platform from its Deployments and CRDs as read from the cluster.

    ``warnings`` (replica counts) and ``runtime_errors`` (serving runtimes not applied) leave
    the phase as it is and set the Degraded condition. ``conflicts`` (objects of the stack
    that exist and are someone else's, ``Kind ns/name``) make the phase ``Degraded``, reason
    ``ForeignObjectConflict``: the stack is not the agent's to vouch for. ``runtime_conflicts``
    (the same for built-in serving runtimes, which are optional: one of that name serves)
    only set the Degraded condition with that reason.
    """
    ready = sorted(n for n, d in deployments.items() if deployment_available(d))
    waiting = sorted(set(deployments) - set(ready))
    not_established = sorted(n for n, crd in crds.items() if not condition_true(crd, "Established"))
    available = not waiting and not not_established
    missing = [n for n, d in deployments.items() if d is None]
    phase: Phase
    reason: Reason
    if available:
        phase, reason = Phase.AVAILABLE, Reason.ALL_COMPONENTS_AVAILABLE
        message = f"{version}: all components available"
    elif missing or not_established or any(deployment_rolling_out(deployments[n]) for n in waiting):
        phase, reason = Phase.INSTALLING, Reason.INSTALLING
        message = "waiting for " + ", ".join(
            [f"CRD {n}" for n in not_established] + [f"Deployment {n}" for n in waiting]
        )
    else:
        phase, reason = Phase.DEGRADED, Reason.COMPONENTS_UNAVAILABLE
        message = "not available: " + ", ".join(waiting)
    if conflicts:
        available = False
        phase, reason = Phase.DEGRADED, REASON_CONFLICT
        message = f"{not_taken_over(conflicts)}; {message}"
    if runtime_conflicts:
        message = f"{message}; {not_taken_over(runtime_conflicts)}"
    if warnings:
        message = f"{message}; warning: {'; '.join(warnings)}"
    if runtime_errors:
        message = f"{message}; runtimes not applied: {'; '.join(runtime_errors)}"
    progressing = phase is Phase.INSTALLING
    degraded_reason = (
        reason
        if phase is Phase.DEGRADED
        else Reason.RUNTIMES_NOT_APPLIED
        if runtime_errors
        else REASON_CONFLICT
        if runtime_conflicts
        else Reason.REPLICAS_WARNING
        if warnings
        else reason
    )
    kept: dict[str, Any] = {"previous": previous, "max_message": MAX_MESSAGE}
    return ServingPlatformStatus(
        phase=phase,
        message=message[:MAX_MESSAGE],
        observed_generation=generation,
        ready_components=len(ready),
        total_components=len(deployments),
        stack_version=version,
        target_version="",
        conditions=[
            condition(PlatformCondition.AVAILABLE, available, reason, message, **kept),
            condition(PlatformCondition.PROGRESSING, progressing, reason, message, **kept),
            condition(
                PlatformCondition.DEGRADED,
                phase is Phase.DEGRADED
                or bool(warnings)
                or bool(runtime_errors)
                or bool(runtime_conflicts),
                degraded_reason,
                message,
                **kept,
            ),
        ],
    )


def upgrading_status(
    *,
    generation: int | None,
    source: str,
    target: str,
    message: str,
    deployments: dict[str, Obj | None],
    previous: Sequence[Obj] = (),
) -> ServingPlatformStatus:
    """Status while a version change waits for the controllers to roll out at ``target``.

    ``stackVersion`` stays ``source`` (what the cluster ran) and ``targetVersion`` says where
    it is going; Available says whether the controllers serve meanwhile.
    """
    ready = sorted(n for n, d in deployments.items() if deployment_available(d))
    kept: dict[str, Any] = {"previous": previous, "max_message": MAX_MESSAGE}
    reason = Reason.UPGRADING_CONTROLLERS
    return ServingPlatformStatus(
        phase=Phase.UPGRADING,
        message=message[:MAX_MESSAGE],
        observed_generation=generation,
        ready_components=len(ready),
        total_components=len(deployments),
        stack_version=source,
        target_version=target,
        conditions=[
            condition(PlatformCondition.AVAILABLE, len(ready) == len(deployments), reason,
                      message, **kept),
            condition(PlatformCondition.PROGRESSING, True, reason, message, **kept),
            condition(PlatformCondition.DEGRADED, False, reason, message, **kept),
        ],
    )


def simple_status(
    phase: Phase,
    reason: Reason,
    message: str,
    generation: int | None,
    previous: Sequence[Obj | Condition] = (),
) -> ServingPlatformStatus:
    """Status of a platform being removed, removed, blocked or failing before install.

    ``stackVersion`` is left unset: a merge patch of :meth:`~ServingPlatformStatus.to_patch`
    keeps the version last reported.
    """
    kept: dict[str, Any] = {"previous": previous, "max_message": MAX_MESSAGE}
    progressing = phase in (Phase.REMOVING, Phase.INSTALLING)
    degraded = phase in (Phase.REMOVAL_BLOCKED, Phase.DEGRADED)
    return ServingPlatformStatus(
        phase=phase,
        message=message[:MAX_MESSAGE],
        observed_generation=generation,
        ready_components=0,
        total_components=0,
        conditions=[
            condition(PlatformCondition.AVAILABLE, False, reason, message, **kept),
            condition(PlatformCondition.PROGRESSING, progressing, reason, message, **kept),
            condition(PlatformCondition.DEGRADED, degraded, reason, message, **kept),
        ],
    )


def sealed_status(
    reason: SealedReason,
    message: str,
    generation: int | None,
    previous: Sequence[Obj | Condition] = (),
) -> SealedStorageConnectionStatus:
    """Status of a SealedStorageConnection whose delivery ended with ``reason``.

    The phase follows from the reason (:func:`addon_api.reasons.sealed_phase`): Delivered,
    Pending while a target namespace is missing or terminating, Failed otherwise.
    """
    kept: dict[str, Any] = {"previous": previous, "max_message": MAX_MESSAGE}
    delivered = reason is SealedReason.DELIVERED
    return SealedStorageConnectionStatus(
        phase=sealed_phase(reason),
        message=message[:MAX_MESSAGE],
        observed_generation=generation,
        conditions=[
            condition(SealedCondition.DELIVERED, delivered, reason, message, **kept),
            condition(SealedCondition.DEGRADED, not delivered, reason, message, **kept),
        ],
    )


def owning_platform(platforms: Sequence[Obj]) -> str | None:
    """The ServingPlatform that owns the cluster's stack: the oldest one (name breaks ties).

    A cluster has one serving stack; any other ServingPlatform only reports the conflict.
    """
    if not platforms:
        return None
    oldest = min(
        platforms,
        key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]),
    )
    return str(oldest["metadata"]["name"])
