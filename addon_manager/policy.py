"""What the platform admin allows hub tenants.

DevFlags, who may own a cluster's stack, and which spoke namespaces each hub namespace may
target. Pure functions over the manager's configuration (``--allow-dev-flags``,
``--stack-owner-namespaces``, ``--target-namespaces``); :mod:`addon_manager.reconcile` asks
them before writing any work of an intent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from addon_api import constants as c
from addon_api import tenancy
from addon_api.common import Resource
from addon_api.hub import (
    ModelServing,
    MultiClusterInferenceService,
    MultiClusterServingRuntime,
    StorageConnection,
)
from addon_api.reasons import IntentReason

REASON_DEV_FLAGS = IntentReason.DEV_FLAGS_NOT_ALLOWED
REASON_NAMESPACE = tenancy.REASON

NAMESPACE_FIELDS: dict[type[Resource], tuple[str, bool]] = {
    ModelServing: ("servingNamespaces", True),
    StorageConnection: ("targetNamespaces", True),
    MultiClusterServingRuntime: ("targetNamespace", False),
    MultiClusterInferenceService: ("targetNamespace", False),
}
"""Per hub kind, its spec field that names spoke namespaces and whether it is a list.
(``spec.monitoring.prometheusServiceAccount.namespace`` names one too, but only as the subject
of a read-only RoleBinding in the serving namespaces: nothing is written there.)"""


@dataclass(frozen=True)
class Policy:
    """The admin's settings (the chart's ``manager.policy`` values)."""

    allow_dev_flags: bool = False
    """Whether ModelServings may set ``spec.devFlags.images`` / ``spec.devFlags.manifests``."""
    stack_owner_namespaces: frozenset[str] | None = None
    """Hub namespaces whose ModelServings may own a cluster's stack; None: every namespace."""
    namespaces: tenancy.NamespacePolicy = field(default_factory=tenancy.NamespacePolicy)
    """Which spoke namespaces each hub namespace may target (default: its own name)."""

    def may_own_stack(self, namespace: str) -> bool:
        """Whether a ModelServing in ``namespace`` may own a cluster's stack."""
        return self.stack_owner_namespaces is None or namespace in self.stack_owner_namespaces


def parse_namespaces(value: str) -> frozenset[str] | None:
    """``--stack-owner-namespaces``: comma-separated names; empty or ``*`` means all."""
    names = frozenset(n.strip() for n in value.split(",") if n.strip())
    return None if not names or "*" in names else names


def dev_flag_fields(intent: ModelServing) -> list[str]:
    """The devFlags fields a ModelServing sets (by their path), its overrides' patches included."""
    out = []
    flags = intent.spec.dev_flags
    if flags is not None and flags.images:
        out.append("spec.devFlags.images")
    if flags is not None and flags.manifests is not None:
        out.append("spec.devFlags.manifests")
    for i, override in enumerate(intent.spec.overrides):
        patched = override.patch.get("devFlags")
        if not isinstance(patched, dict):
            continue
        out.extend(
            f"spec.overrides[{i}].patch.devFlags.{key}"
            for key in ("images", "manifests") if patched.get(key)
        )
    return out


def _named(value: Any, path: str, many: bool) -> list[tuple[str, str]]:
    if many and isinstance(value, list):
        return [(f"{path}[{i}]", str(v)) for i, v in enumerate(value) if isinstance(v, str)]
    return [(path, value)] if not many and isinstance(value, str) else []


def namespace_fields(intent: Resource) -> list[tuple[str, str]]:
    """(field path, spoke namespace) for every spoke namespace an intent names.

    Its spec's field and the same field in every override's patch (a patch may send the
    intent elsewhere on some clusters).
    """
    found = NAMESPACE_FIELDS.get(type(intent))
    if found is None:
        return []
    name, many = found
    spec = intent.to_dict().get("spec") or {}
    out = _named(spec.get(name), f"spec.{name}", many)
    for i, override in enumerate(spec.get("overrides") or []):
        patch = override.get("patch") if isinstance(override, dict) else None
        if isinstance(patch, dict):
            out += _named(patch.get(name), f"spec.overrides[{i}].patch.{name}", many)
    return out


def namespace_refusals(
    intent: Resource, policy: Policy, agent_namespace: str = c.AGENT_NAMESPACE
) -> list[str]:
    """One line per spoke namespace the intent names and ``policy`` does not allow it."""
    hub = intent.metadata.namespace or ""
    out = []
    for path, spoke in namespace_fields(intent):
        why = policy.namespaces.refusal(hub, spoke, agent_namespace)
        if why:
            out.append(f"{path}: {why}")
    return out


def namespace_message(lines: list[str]) -> str:
    """The condition message of a refusal by the namespace policy."""
    return "; ".join(lines) + "; no work is written"


def refusal(intent: Resource, policy: Policy) -> tuple[str, str] | None:
    """(reason, message) when ``policy`` refuses the intent, None when it may proceed.

    Every kind: a spoke namespace out of the namespace policy (``NamespaceNotAllowed``, the
    message naming the field and the namespace). ModelServings also: a hub namespace that may
    not own a stack, and devFlags the admin does not allow.
    """
    refused = namespace_refusals(intent, policy)
    if refused:
        return REASON_NAMESPACE, namespace_message(refused)
    if not isinstance(intent, ModelServing):
        return None
    namespace = intent.metadata.namespace or ""
    if not policy.may_own_stack(namespace):
        return REASON_NAMESPACE, (
            f"ModelServings in hub namespace {namespace!r} may not own a cluster's stack "
            "(the add-on's manager.policy.stackOwnerNamespaces does not list it); "
            "no work is written"
        )
    fields = dev_flag_fields(intent)
    if fields and not policy.allow_dev_flags:
        return REASON_DEV_FLAGS, (
            f"{' and '.join(fields)} {'is' if len(fields) == 1 else 'are'} not allowed: "
            "the add-on's configuration (manager.policy.allowDevFlags) does not allow devFlags; "
            "no work is written"
        )
    return None
