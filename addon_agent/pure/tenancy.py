"""The agent's own checks of what the hub sends against the admin's policy.

A ServingPlatform's devFlags and serving namespaces (:func:`platform_refusal`), and a
SealedStorageConnection's targets (:func:`refused_targets`): defence in depth behind the
manager's judge of every work it sends.

The manager refuses out-of-policy targets before sealing; the agent checks again, with the
policy the manager delivers to its namespace (ConfigMap ``model-serving-namespace-policy``, see
:class:`PolicyRead`; ``--target-namespaces`` only when there is none), before it writes a
credential anywhere: a sealed connection whose hub namespace may not target one of
its namespaces is refused whole. The hub namespace is read from the object's name
(``<hub namespace>.<name>``, the name the manager gives it and binds into the sealed envelope;
``spec.source`` must agree), else from ``spec.source``; a connection naming neither is judged
as hub namespace "" (allowed only by a ``*`` entry). Kept apart from the delivery itself, and
called from one place (:meth:`addon_agent.shell.sealed.SealedConnections.deliver`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from addon_api import tenancy
from addon_api.reasons import SealedReason, ServingPlatformReason
from addon_api.spoke import ServingPlatformSpec


@dataclass(frozen=True)
class PolicyRead:
    """The namespace policy the agent found: the manager's ConfigMap, else its flag.

    ``policy`` None: there is none to judge by, and ``problem`` says why (the ConfigMap is not
    there yet, or ``invalid``: it cannot be read).
    """

    policy: tenancy.NamespacePolicy | None
    problem: str = ""
    invalid: bool = False


def without_policy(read: PolicyRead, targets: Sequence[str], *, sealed: bool = False
                   ) -> tuple[ServingPlatformReason | SealedReason, str] | None:
    """(reason, message) when spoke namespaces must be judged and there is no policy.

    None when there is a policy or nothing to judge (a ServingPlatform with no serving
    namespaces). A policy not there yet is a wait (the manager writes it beside the first
    work that needs it, and the agent judges again when it arrives); one that cannot be read
    is a refusal. ``sealed``: the reasons of a SealedStorageConnection.
    """
    if read.policy is not None or not targets:
        return None
    if read.invalid:
        reason: ServingPlatformReason | SealedReason = (
            SealedReason.NAMESPACE_NOT_ALLOWED if sealed
            else ServingPlatformReason.NAMESPACE_NOT_ALLOWED)
        return reason, f"{read.problem}; nothing is changed"
    reason = (SealedReason.WAITING_FOR_NAMESPACE_POLICY if sealed
              else ServingPlatformReason.WAITING_FOR_NAMESPACE_POLICY)
    return reason, read.problem


def platform_refusal(spec: ServingPlatformSpec, policy: tenancy.NamespacePolicy | PolicyRead,
                     allow_dev_flags: bool, agent_namespace: str
                     ) -> tuple[ServingPlatformReason, str] | None:
    """(reason, message) when the agent refuses a ServingPlatform; None when it proceeds.

    devFlags replace what the agent installs with its cluster-wide rights: refused unless the
    agent was started with ``--allow-dev-flags``. Each serving namespace is judged by the
    namespace policy for the ModelServing's hub namespace (``spec.source``), so a hub that
    sends one the policy denies (``kube-system``, a stack's namespace, the agent's own) gets
    nothing enabled. Removal is never refused (the caller does not ask then).
    """
    flags = spec.dev_flags
    if not allow_dev_flags and flags is not None and (flags.images or flags.manifests):
        return ServingPlatformReason.DEV_FLAGS_NOT_ALLOWED, (
            "spec.devFlags is not allowed on this cluster (the agent runs without "
            "--allow-dev-flags, the add-on's manager.policy.allowDevFlags); nothing is changed")
    read = policy if isinstance(policy, PolicyRead) else PolicyRead(policy)
    missing = without_policy(read, spec.serving_namespaces)
    if missing is not None:
        return ServingPlatformReason(missing[0]), missing[1]
    if read.policy is None:
        return None
    hub = spec.source.namespace if spec.source is not None else ""
    refused = [f"spec.servingNamespaces[{i}]: {why}"
               for i, ns in enumerate(spec.serving_namespaces)
               if (why := read.policy.refusal(hub, ns, agent_namespace))]
    if refused:
        return ServingPlatformReason.NAMESPACE_NOT_ALLOWED, (
            "; ".join(refused) + "; nothing is changed")
    return None


def tenant_of(object_name: str) -> str:
    """The hub namespace a SealedStorageConnection was sealed for, from its name ("" if none)."""
    head, dot, _ = object_name.partition(".")
    return head if dot else ""


def refused_targets(
    policy: tenancy.NamespacePolicy, object_name: str, source_namespace: str | None,
    targets: Sequence[str], agent_namespace: str,
) -> str:
    """Why the connection may not be delivered to ``targets``; "" when every one is allowed.

    A connection whose ``source`` names another hub namespace than its name is refused.
    """
    tenant = tenant_of(object_name)
    if not tenant:
        tenant = source_namespace or ""
    elif source_namespace is not None and source_namespace != tenant:
        return (f"the sealed connection {object_name!r} is named for hub namespace {tenant!r} "
                f"but its source says {source_namespace!r}; no tenant's policy allows it")
    refused = [
        f"{target}: {why}" for target in targets
        if (why := policy.refusal(tenant, target, agent_namespace))
    ]
    return "; ".join(refused)
