"""Namespace policy: which spoke namespaces the intents of a hub namespace may target.

The platform admin maps hub namespaces to spoke namespaces (chart value
``manager.policy.targetNamespaces``, flag ``--target-namespaces`` of the manager and of the
agent). A hub namespace the mapping does not list may target only the spoke namespace of
the same name (or what the ``*`` entry lists, when there is one). Some namespaces are never
allowed, whatever the mapping says: ``kube-*``, ``openshift-*``, ``open-cluster-management*``
and the agent's own namespace.

Pure and shared: the manager checks every field that names a spoke namespace before it
writes a work, and the agent checks a SealedStorageConnection's targets again before it
writes any credential (:mod:`addon_agent.pure.tenancy`). The per-tenant executor identity that
OCM's work agent applies tenant works with is named here too, so both sides agree.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from addon_api.constants import AGENT_STATE_NAMESPACE, POLICY_KEY_DENIED, POLICY_KEY_TARGETS
from addon_api.reasons import IntentReason

ANY = "*"
"""As a key: the hub namespaces the mapping does not list. As a target: any spoke namespace
that is not always denied (no executor identity then: see :meth:`NamespacePolicy.executor`)."""
ALWAYS_DENIED_PREFIXES = ("kube-", "openshift-", "open-cluster-management")
"""Spoke namespaces with these prefixes are never a tenant's target."""
STACK_NAMESPACES = frozenset({"kserve", "modelmesh-serving"})
"""The namespaces the agent installs the stacks' controllers in (``addon_agent.stacks``):
never a tenant's target, or a model there could run as a controller's ServiceAccount."""
AGENT_NAMESPACES = frozenset({AGENT_STATE_NAMESPACE})
"""The agent's private namespace (its key and seal ledger): never a tenant's target."""
REASON = IntentReason.NAMESPACE_NOT_ALLOWED
"""Condition reason of a refused target on the hub (the intent's Ready condition, a cluster
entry); the agent's is ``SealedReason.NAMESPACE_NOT_ALLOWED``, the same word."""
EXECUTOR_PREFIX = "model-serving-tenant-"
"""Prefix of the per-tenant ServiceAccount (in the agent namespace) and of its Roles."""
ACCESS_KIND = "TenantAccess"
"""Intent-kind label of the per-(tenant, cluster) work holding the executor and its RBAC (and
of the objects it applies: the agent keeps a namespace holding them, see
:func:`addon_agent.pure.removal.user_objects`)."""

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def always_denied(spoke_namespace: str, agent_namespace: str,
                  denied: frozenset[str] = frozenset()) -> bool:
    """Whether no mapping may allow ``spoke_namespace``.

    System namespaces, the stacks' and the agent's, and ``denied`` (what the admin adds).
    """
    return (spoke_namespace == agent_namespace or spoke_namespace in STACK_NAMESPACES
            or spoke_namespace in AGENT_NAMESPACES
            or spoke_namespace in denied or spoke_namespace.startswith(ALWAYS_DENIED_PREFIXES))


def executor_name(hub_namespace: str) -> str:
    """Name of the tenant ServiceAccount of ``hub_namespace`` (in the agent namespace)."""
    return EXECUTOR_PREFIX + hub_namespace


@dataclass(frozen=True)
class NamespacePolicy:
    """Hub namespace -> spoke namespaces its intents may target."""

    mapping: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Explicit entries; key ``*`` for every hub namespace not listed."""
    denied: frozenset[str] = frozenset()
    """Spoke namespaces the admin denies every tenant, besides the built-in ones
    (``--denied-namespaces``; no mapping can allow them)."""

    def targets(self, hub_namespace: str) -> frozenset[str]:
        """The spoke namespaces listed for ``hub_namespace`` (may contain ``*``)."""
        if hub_namespace in self.mapping:
            return self.mapping[hub_namespace]
        return self.mapping.get(ANY, frozenset({hub_namespace}))

    def refusal(self, hub_namespace: str, spoke_namespace: str, agent_namespace: str) -> str:
        """Why ``hub_namespace`` may not target ``spoke_namespace``; "" when it may."""
        if always_denied(spoke_namespace, agent_namespace, self.denied):
            return (f"spoke namespace {spoke_namespace!r} is never a tenant's target "
                    f"(kube-*, openshift-*, open-cluster-management*, the stacks' namespaces "
                    f"{', '.join(sorted(STACK_NAMESPACES))}, the agent's namespaces "
                    f"{agent_namespace!r} and {', '.join(sorted(AGENT_NAMESPACES))} and those "
                    f"the admin denies are always denied)")
        allowed = self.targets(hub_namespace)
        if ANY in allowed or spoke_namespace in allowed:
            return ""
        return (f"spoke namespace {spoke_namespace!r} is not allowed for hub namespace "
                f"{hub_namespace!r}, which may target only "
                f"{', '.join(sorted(allowed)) or 'no spoke namespace'} "
                "(the add-on's manager.policy.targetNamespaces)")

    def executor(self, hub_namespace: str) -> str | None:
        """The tenant ServiceAccount name its works are applied as; None for ``*`` targets.

        A tenant allowed any namespace has no namespace-scoped identity to give: its works are
        applied by the work agent's own identity and only the manager and agent checks apply.
        """
        return None if ANY in self.targets(hub_namespace) else executor_name(hub_namespace)

    def render(self) -> str:
        """The policy as ``--target-namespaces`` takes it (inverse of :func:`parse`)."""
        return ";".join(
            f"{hub}={','.join(sorted(spokes))}" for hub, spokes in sorted(self.mapping.items())
        )


def parse(text: str) -> NamespacePolicy:
    """``hub=spoke1,spoke2;hub2=spoke3;*=spoke4``: the flag's (and chart variable's) form.

    Empty: the default (each hub namespace may target its own name only). Names must be DNS
    labels or ``*``; an entry with no targets allows none. Raises ValueError naming the entry.
    """
    mapping: dict[str, frozenset[str]] = {}
    for entry in (e.strip() for e in text.split(";")):
        if not entry:
            continue
        hub, sep, spokes = entry.partition("=")
        hub = hub.strip()
        names = frozenset(s.strip() for s in spokes.split(",") if s.strip())
        bad = [n for n in (hub, *names) if n != ANY and not _LABEL.fullmatch(n)]
        if not sep or bad or hub in mapping:
            raise ValueError(
                f"--target-namespaces entry {entry!r}: expected hub=spoke,... with DNS labels "
                f"or '*', each hub namespace once" + (f" (not a DNS label: {bad[0]!r})" if bad
                                                      else "")
            )
        mapping[hub] = names
    return NamespacePolicy(mapping)


def from_configmap(data: Mapping[str, str] | None) -> NamespacePolicy:
    """The policy that a namespace policy ConfigMap's ``data`` holds.

    Key ``targetNamespaces`` in :func:`parse`'s form, key ``deniedNamespaces`` comma-separated.
    Raises ValueError naming the key when either is malformed.
    """
    data = data or {}
    try:
        policy = parse(str(data.get(POLICY_KEY_TARGETS) or ""))
    except ValueError as err:
        raise ValueError(f"key {POLICY_KEY_TARGETS}: {err}") from err
    denied = frozenset(n.strip() for n in str(data.get(POLICY_KEY_DENIED) or "").split(",")
                       if n.strip())
    bad = sorted(n for n in denied if not _LABEL.fullmatch(n))
    if bad:
        raise ValueError(f"key {POLICY_KEY_DENIED}: not a DNS label: {bad[0]!r}")
    return NamespacePolicy(policy.mapping, denied)
