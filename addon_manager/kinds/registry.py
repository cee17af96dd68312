"""The kind registry: every kind of work the manager writes, each from its own module.

One :class:`~addon_manager.kinds.base.KindSpec` per hub kind (its module's ``SPEC``) says
how an intent of that kind is read, how its work for one cluster is prepared (render and
gates), how a cluster's work status maps to its entry, what role it plays on a cluster (the
stack, what holds the stack, a tenant's work, sealed credentials) and what it depends on
(whose works' changes wake it). One :class:`~addon_manager.kinds.base.HelperSpec` per helper
work (the agent's identity, a tenant's access) says what its facts keep and which kinds
read it. The planner, the executor and the kopf handlers read these; none of them branches
on a kind's name. Adding a hub kind means adding its module and one line in :data:`KINDS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from addon_manager.facts.records import WorkDetails, WorkFact, claimed_objects, parse_work
from addon_manager.kinds import (
    agent_identity,
    inference_service,
    model_serving,
    namespace_policy,
    serving_runtime,
    storage_connection,
    tenant_access,
)
from addon_manager.kinds.base import Dependency, HelperSpec, KindSpec

KINDS: dict[str, KindSpec] = {spec.kind: spec for spec in (
    model_serving.SPEC,
    storage_connection.SPEC,
    serving_runtime.SPEC,
    inference_service.SPEC,
)}
"""Every hub kind, by name (registry order: the order status and wake-ups go through)."""

HELPERS: dict[str, HelperSpec] = {spec.kind: spec for spec in (
    agent_identity.SPEC,
    tenant_access.SPEC,
    namespace_policy.SPEC,
)}
"""Every helper work's kind (no hub kind), by owner kind label."""

IDENTITY = agent_identity.KIND
"""Owner kind of the per-cluster identity works (the agent's key), not a hub kind."""
ACCESS = tenant_access.ACCESS_KIND
"""Owner kind of a tenant's access works (executor and RBAC), not a hub kind."""
POLICY = namespace_policy.KIND
"""Owner kind of the per-cluster namespace policy works, not a hub kind."""


def spec_of(kind: str) -> KindSpec:
    """The spec of a hub kind (KeyError for anything else)."""
    return KINDS[kind]


def where(predicate: Callable[[KindSpec], bool]) -> list[KindSpec]:
    """The specs for which ``predicate`` holds, in registry order."""
    return [spec for spec in KINDS.values() if predicate(spec)]


def dependents(work_kind: str, *, gone: bool = False) -> list[tuple[str, Dependency]]:
    """(kind, dependency) of the intents a change of a ``work_kind`` work may wake.

    ``gone``: the work went (else it appeared or changed).
    """
    return [(spec.kind, dep) for spec in KINDS.values()
            for dep in spec.depends_on if dep.kind == work_kind and (gone or not dep.gone_only)]


TENANT_KINDS = tuple(spec.kind for spec in where(lambda s: s.tenant))
"""Kinds applied as their hub namespace's executor (:mod:`addon_manager.kinds.tenant_access`)."""
STACK_HOLDERS = tuple(spec.kind for spec in where(lambda s: s.holds_stack))
"""Kinds whose works hold the stack on their cluster."""
STACK_OWNERS = tuple(spec.kind for spec in where(lambda s: s.owns_stack))
"""Kinds whose works install the stack."""
CLAIMING_KINDS = frozenset(spec.kind for spec in where(lambda s: s.claims))
"""Kinds whose works claim spoke objects other intents' works may not overwrite."""


def works_read(kind: str) -> frozenset[str]:
    """The owner kinds of the works besides its own that planning an intent of ``kind`` reads.

    Those it depends on, the stack's (its gates), the helper works it reads (the identity
    works for what seals, the tenant's access works for a tenant's), and what holds a stack
    (a stack's removal rule).

    An intent's plan is complete once its own works and these are known: what
    :meth:`addon_manager.shell.informers.WorkInformer.prefetch` lists first after a start.
    """
    spec = spec_of(kind)
    read = {dep.kind for dep in spec.depends_on} | set(STACK_OWNERS)
    if spec.owns_stack:
        read |= set(STACK_HOLDERS)
    read |= {helper.kind for helper in HELPERS.values() if helper.read_by(spec)}
    return frozenset(read)


NO_DETAILS = WorkDetails()


def work_details(kind: str, work: Mapping[str, Any]) -> WorkDetails:
    """What the fact of a ``kind`` work keeps beyond the common facts (see ``parse_work``)."""
    helper = HELPERS.get(kind)
    if helper is not None:
        return helper.details(work)
    spec = KINDS.get(kind)
    if spec is not None and spec.claims:
        return WorkDetails(objects=claimed_objects(work.get("spec") or {}))
    return NO_DETAILS


def parse(work: Mapping[str, Any]) -> WorkFact | None:
    """The :class:`WorkFact` of a ManifestWork the add-on owns, with its kind's details."""
    return parse_work(work, work_details)
