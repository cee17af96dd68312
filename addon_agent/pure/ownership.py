"""Whose serving stack a cluster runs: the agent's, or another operator's (Open Data Hub's, say).

An installation is the stack's key CRD, its controller Deployments (of the stack's controller
name, in any namespace: another operator may run it elsewhere) and its configuration ConfigMap
(in a controller's namespace). Another manager's mark on any of them (:func:`mark_of`: an
owner reference, a ``managed-by`` label that is not the agent's, an OLM label, or a field
manager named as an operator's) makes the installation someone else's: under
``managementState: Managed`` the agent refuses to install over it and changes nothing; under
``Unmanaged`` it serves with it (:func:`unmanaged_status`). Everything here is pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from addon_agent import labels as lb
from addon_agent.pure import status as st
from addon_agent.stacks import KSERVE, Stack, release
from addon_api import constants as c
from addon_api.common import Condition
from addon_api.conditions import condition
from addon_api.reasons import ServingPlatformConditionType as PlatformCondition
from addon_api.reasons import ServingPlatformPhase as Phase
from addon_api.reasons import ServingPlatformReason as Reason
from addon_api.spoke import ServingPlatformStatus

Obj = dict[str, Any]

KEY_CRDS: Final = {"KServe": "inferenceservices.serving.kserve.io",
                   "ModelMesh": "predictors.serving.kserve.io"}
"""The CRD whose presence says a stack is installed, per platform."""
CONFIGS: Final = {"KServe": "inferenceservice-config", "ModelMesh": "model-serving-config"}
"""The stack's configuration ConfigMap, per platform (in its controller's namespace)."""
OLM_LABELS: Final = ("operators.coreos.com/", "olm.owner")
"""Labels Operator Lifecycle Manager puts on what an operator it installed owns."""


@dataclass(frozen=True)
class Mark:
    """Another manager's mark on an object of the installation."""

    owner: str
    """Who manages it (an operator, a Helm release, an owner object)."""
    evidence: str
    """What says so, naming the object."""


@dataclass(frozen=True)
class Installation:
    """What of a stack the cluster runs, whoever installed it."""

    stack: Stack
    crd: Obj | None = None
    controllers: tuple[Obj, ...] = ()
    config: Obj | None = None

    def objects(self) -> list[Obj]:
        """The installation's objects that exist."""
        return [o for o in (self.crd, *self.controllers, self.config) if o is not None]

    def owner(self) -> Mark | None:
        """The first mark of another manager on the installation (None: none)."""
        return next((m for o in self.objects() if (m := mark_of(o)) is not None), None)

    def version(self) -> str:
        """The stack's version, from its controller's image tag or version label ("" unknown)."""
        for dep in self.controllers:
            found = controller_version(dep)
            if found:
                return found
        return ""


def _named(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    where = f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else meta.get("name")
    return f"{obj.get('kind', 'object')} {where}"


def mark_of(obj: Obj) -> Mark | None:
    """Another manager's mark on ``obj`` (None: the agent's own object, or nobody's mark).

    In order: an owner reference; a ``app.kubernetes.io/managed-by`` label that is not the
    agent's; an OLM label; a field manager whose name says it is an operator (writes of the
    status subresource are not counted: controllers and the API server write those).
    """
    if lb.is_ours(obj):
        return None
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        owner = f"{ref.get('kind')} {ref.get('name')}"
        return Mark(owner, f"{_named(obj)} is owned by {owner}")
    labels = meta.get("labels") or {}
    managed_by = labels.get(c.LABEL_MANAGED_BY)
    if managed_by:
        return Mark(str(managed_by),
                    f"{_named(obj)} has label {c.LABEL_MANAGED_BY}={managed_by}")
    for key, value in labels.items():
        if key.startswith(OLM_LABELS):
            owner = key.split("/", 1)[1].split(".", 1)[0] if "/" in key else str(value)
            return Mark(owner, f"{_named(obj)} has OLM label {key}")
    for entry in meta.get("managedFields") or []:
        manager = str(entry.get("manager") or "")
        if entry.get("subresource") != "status" and re.search(r"operator", manager, re.I):
            return Mark(manager, f"{_named(obj)} has fields managed by {manager}")
    return None


_TAG = re.compile(r":(v?\d+\.\d+\.\d+)(?:[-+@].*)?$")


def controller_version(deployment: Obj) -> str:
    """The release a controller Deployment runs.

    Its ``app.kubernetes.io/version`` label, else its first image tag that is a release (""
    when neither is).
    """
    meta = deployment.get("metadata") or {}
    label = str((meta.get("labels") or {}).get("app.kubernetes.io/version") or "")
    if release(label):
        return label if label.startswith("v") else f"v{label}"
    containers = (((deployment.get("spec") or {}).get("template") or {}).get("spec")
                  or {}).get("containers") or []
    for container in containers:
        match = _TAG.search(str(container.get("image") or ""))
        if match:
            tag = match.group(1)
            return tag if tag.startswith("v") else f"v{tag}"
    return ""


def refused_status(found: Installation, mark: Mark, generation: int | None,
                   previous: Sequence[Obj | Condition]) -> ServingPlatformStatus:
    """Managed asked for where another operator manages the stack: nothing is changed."""
    platform = found.stack.platform
    message = (f"{platform} on this cluster is managed by {mark.owner} ({mark.evidence}); the "
               f"agent changes nothing of it. Set spec.managementState: Unmanaged to serve "
               f"with that {platform}, or remove it from {mark.owner} first.")
    return st.simple_status(Phase.DEGRADED, Reason.OWNED_BY_ANOTHER_OPERATOR, message,
                            generation, previous)


MINIMUM_UNMANAGED: Final = {KSERVE.platform: KSERVE.versions[0]}
"""The oldest release of another operator's stack the add-on serves with (the oldest it
carries: what its renderings are tested against)."""


@dataclass(frozen=True)
class UnmanagedCheck:
    """What :func:`unmanaged_status` found, for the status and the metrics."""

    status: ServingPlatformStatus
    components: dict[str, bool] = field(default_factory=dict)


def unmanaged_status(found: Installation, generation: int | None,
                     previous: Sequence[Obj | Condition]) -> UnmanagedCheck:
    """``managementState: Unmanaged``: the stack someone else installed, checked, not changed.

    Degraded when it is missing (``StackNotFound``) or older than the add-on supports
    (``UnsupportedVersion``); Installing until its controllers are available; then Available
    with the version found.
    """
    stack, platform = found.stack, found.stack.platform
    crd_name = KEY_CRDS[platform]
    if found.crd is None or not found.controllers:
        missing = (f"CRD {crd_name}" if found.crd is None
                   else f"a Deployment {stack.controller} in any namespace")
        return UnmanagedCheck(st.simple_status(
            Phase.DEGRADED, Reason.STACK_NOT_FOUND,
            f"spec.managementState is Unmanaged but no {platform} is installed on the cluster "
            f"({missing} not found); install it, or set Managed to have the agent install it",
            generation, previous))
    version = found.version()
    oldest = MINIMUM_UNMANAGED.get(platform, "")
    mark = found.owner()
    by = f" installed by {mark.owner}" if mark else ""
    if oldest and (not release(version) or release(version) < release(oldest)):
        return UnmanagedCheck(st.simple_status(
            Phase.DEGRADED, Reason.UNSUPPORTED_VERSION,
            f"{platform} {version or '(version unknown)'}{by} is older than the add-on "
            f"supports ({oldest} or newer)", generation, previous))
    components = {_named(d): st.deployment_available(d) for d in found.controllers}
    ready = sum(components.values())
    where = ", ".join(sorted(components))
    if not ready:
        message = f"waiting for {platform} {version}{by} to be available ({where})"
        phase, reason, ok = Phase.INSTALLING, Reason.WAITING_FOR_EXISTING_STACK, False
    else:
        message = (f"serving with {platform} {version}{by} ({where}); the agent installs "
                   "and changes nothing of the stack here")
        phase, reason, ok = Phase.AVAILABLE, Reason.USING_EXISTING_STACK, True
    kept: dict[str, Any] = {"previous": previous, "max_message": st.MAX_MESSAGE}
    return UnmanagedCheck(ServingPlatformStatus(
        phase=phase, message=message[:st.MAX_MESSAGE], observed_generation=generation,
        ready_components=ready, total_components=len(components), stack_version=version,
        conditions=[
            condition(PlatformCondition.AVAILABLE, ok, reason, message, **kept),
            condition(PlatformCondition.PROGRESSING, not ok, reason, message, **kept),
            condition(PlatformCondition.DEGRADED, False, reason, message, **kept),
        ],
    ), components)


def installation(stack: Stack, crds: Iterable[Obj], deployments: Iterable[Obj],
                 configmaps: Iterable[Obj]) -> Installation:
    """The installation of ``stack`` among the live objects given (any namespace)."""
    crd = next((o for o in crds if o["metadata"]["name"] == KEY_CRDS[stack.platform]), None)
    controllers = tuple(d for d in deployments if d["metadata"]["name"] == stack.controller)
    namespaces = {d["metadata"].get("namespace") for d in controllers}
    config = next((m for m in configmaps if m["metadata"]["name"] == CONFIGS[stack.platform]
                   and m["metadata"].get("namespace") in namespaces), None)
    return Installation(stack, crd, controllers, config)
