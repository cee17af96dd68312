"""What the platform admin allows hub tenants: devFlags, and who may own a cluster's stack.

Pure functions over the manager's configuration (``--allow-dev-flags``,
``--stack-owner-namespaces``); :mod:`addon_manager.reconcile` asks them before writing any
work of a ModelServing.
"""

from __future__ import annotations

from dataclasses import dataclass

from addon_api.hub import ModelServing

REASON_DEV_FLAGS = "DevFlagsNotAllowed"
REASON_NAMESPACE = "NamespaceNotAllowed"


@dataclass(frozen=True)
class Policy:
    """The admin's settings (the chart's ``manager.policy`` values)."""

    allow_dev_flags: bool = False
    """Whether ModelServings may set ``spec.devFlags.images`` / ``spec.devFlags.manifests``."""
    stack_owner_namespaces: frozenset[str] | None = None
    """Hub namespaces whose ModelServings may own a cluster's stack; None: every namespace."""

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


def refusal(intent: ModelServing, policy: Policy) -> tuple[str, str] | None:
    """(reason, message) when ``policy`` refuses the ModelServing, None when it may proceed."""
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
