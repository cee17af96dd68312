"""The agent's own check of a SealedStorageConnection's targets against the namespace policy.

The manager refuses out-of-policy targets before sealing; the agent checks again, with the
policy it was given (``--target-namespaces``, from the add-on's AddOnDeploymentConfig), before
it writes a credential anywhere: a sealed connection whose hub namespace may not target one of
its namespaces is refused whole. The hub namespace is read from the object's name
(``<hub namespace>.<name>``, the name the manager gives it and binds into the sealed envelope),
and ``spec.source`` must agree. Kept apart from the delivery itself, and called from one place
(:meth:`addon_agent.handlers.Agent.deliver`).
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

    A connection whose name names no hub namespace, or whose ``source`` names another one,
    has no tenant whose policy could allow it, and is refused.
    """
    tenant = tenant_of(object_name)
    if not tenant or (source_namespace is not None and source_namespace != tenant):
        return (f"the sealed connection {object_name!r} does not name its hub namespace as "
                f"<hub namespace>.<name> (source: {source_namespace!r}), so no tenant's policy "
                "allows it")
    refused = [
        f"{target}: {why}" for target in targets
        if (why := policy.refusal(tenant, target, agent_namespace))
    ]
    return "; ".join(refused)
