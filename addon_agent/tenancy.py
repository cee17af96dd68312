"""The agent's own check of a SealedStorageConnection's targets against the namespace policy.

The manager refuses out-of-policy targets before sealing; the agent checks again, with the
policy it was given (``--target-namespaces``, from the add-on's AddOnDeploymentConfig), before
it writes a credential anywhere: a sealed connection whose hub namespace may not target one of
its namespaces is refused whole. The hub namespace is read from the object's name
(``<hub namespace>.<name>``, the name the manager gives it and binds into the sealed envelope;
``spec.source`` must agree), else from ``spec.source``; a connection naming neither is judged
as hub namespace "" (allowed only by a ``*`` entry). Kept apart from the delivery itself, and
called from one place (:meth:`addon_agent.handlers.Agent.deliver`).
"""

from __future__ import annotations

from collections.abc import Sequence

from addon_api import tenancy


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
