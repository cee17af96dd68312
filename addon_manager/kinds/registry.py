"""The kind registry: everything the engine knows about each hub kind, in one place.

One :class:`KindSpec` per hub kind says how an intent of that kind is read (its model and,
from the model's ``CrdInfo``, its names), how its work for one cluster is prepared (render
and gates, :mod:`addon_manager.kinds.prepare`), how a cluster's work status maps to its entry
(:mod:`addon_manager.kinds.reports`), what role it plays on a cluster (the stack, what holds the
stack, a tenant's work, sealed credentials) and what it depends on (whose works' changes
wake it). The planner, the executor and the kopf handlers read these; none of them branches
on a kind's name. Adding a hub kind means adding one spec here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from addon_api import constants as c
from addon_api import tenancy as api_tenancy
from addon_api.common import ClusterStatus, Resource
from addon_api.hub import (
    ModelServing,
    MultiClusterInferenceService,
    MultiClusterServingRuntime,
    StorageConnection,
)
from addon_api.platform import MODELMESH_DEPRECATED
from addon_manager.facts import naming
from addon_manager.facts.records import WorkFact
from addon_manager.kinds import prepare, reports

Prepare = Callable[[prepare.Context, Resource, str], prepare.Prepared]
Report = Callable[[WorkFact, bool], tuple[ClusterStatus, reports.Category]]


@dataclass(frozen=True)
class Dependency:
    """A kind of work whose changes on a cluster may open (or close) this kind's gates."""

    kind: str
    same_namespace: bool = False
    """Only intents in the namespace of the work's owner depend on it (a tenant's access)."""
    gone_only: bool = False
    """Only the work's disappearance matters, and only to intents whose removal waits on the
    work's cluster (what holds a stack: its removal waits for the works to go, and nothing
    else about them)."""


@dataclass(frozen=True)
class KindSpec:
    """How the engine handles one hub kind."""

    model: type[Resource]
    """The pydantic model an intent is read with (its ``crd`` gives the names)."""
    prepare: Prepare
    """One cluster's work and gates (see :mod:`addon_manager.kinds.prepare`)."""
    report: Report
    """A cluster's work status as the intent's entry (:mod:`addon_manager.kinds.reports`)."""
    depends_on: tuple[Dependency, ...] = ()
    """Kinds of work whose changes wake this kind's intents (gates, removal rule)."""
    owns_stack: bool = False
    """Its work installs the serving stack: one owner per cluster (conflicts), the add-on is
    enabled where it goes, its removal waits for what holds the stack, its deletion is
    tracked in its status."""
    holds_stack: bool = False
    """Its works use the stack on their cluster: the stack is not removed under them, and
    their entries are not Ready while it goes."""
    tenant: bool = False
    """Applied on the spoke as its hub namespace's executor identity (namespace policy)."""
    seals: bool = False
    """Carries sealed credentials: needs the agent's identity work and key on the cluster,
    reads hub Secrets (see ``secrets_named``)."""
    removed_state: Callable[[Any], bool] = lambda spec: False
    """Whether the spec asks for the stack to be removed (the entry is done when Removed)."""
    deprecation: Callable[[Any], str] = lambda spec: ""
    """Why what the spec asks for is deprecated ("" when it is not): a Deprecated condition."""

    @property
    def kind(self) -> str:
        """The kind's name."""
        return str(self.model.model_fields["kind"].default)

    @property
    def plural(self) -> str:
        """The plural resource name (from the model's CrdInfo)."""
        return self.model.crd.plural


def secrets_named(spec: Mapping[str, Any]) -> set[str]:
    """Secrets a StorageConnection spec reads: its secretRef and any its overrides set."""
    refs = [spec.get("secretRef")]
    refs += [(o.get("patch") or {}).get("secretRef") for o in spec.get("overrides") or []
             if isinstance(o, Mapping)]
    return {str(r["name"]) for r in refs if isinstance(r, Mapping) and r.get("name")}


IDENTITY = naming.KIND_IDENTITY
"""Owner kind of the per-cluster identity works (the agent's key), not a hub kind."""
ACCESS = api_tenancy.ACCESS_KIND
"""Owner kind of a tenant's access works (executor and RBAC), not a hub kind."""

KINDS: dict[str, KindSpec] = {spec.kind: spec for spec in (
    KindSpec(
        ModelServing, prepare.prepare_model_serving, reports.platform_report,
        depends_on=(Dependency(c.KIND_SERVING_RUNTIME, gone_only=True),
                    Dependency(c.KIND_INFERENCE_SERVICE, gone_only=True)),
        owns_stack=True,
        removed_state=lambda spec: spec.management_state == "Removed",
        deprecation=lambda spec: MODELMESH_DEPRECATED if spec.platform == "ModelMesh" else "",
    ),
    KindSpec(
        StorageConnection, prepare.prepare_storage_connection, reports.storage_report,
        depends_on=(Dependency(IDENTITY), Dependency(ACCESS, same_namespace=True)),
        tenant=True, seals=True,
    ),
    KindSpec(
        MultiClusterServingRuntime, prepare.prepare_serving_runtime, reports.runtime_report,
        depends_on=(Dependency(c.KIND_MODEL_SERVING), Dependency(ACCESS, same_namespace=True)),
        holds_stack=True, tenant=True,
    ),
    KindSpec(
        MultiClusterInferenceService, prepare.prepare_inference_service,
        reports.inference_service_report,
        depends_on=(Dependency(c.KIND_MODEL_SERVING), Dependency(c.KIND_STORAGE_CONNECTION),
                    Dependency(ACCESS, same_namespace=True)),
        holds_stack=True, tenant=True,
    ),
)}
"""Every hub kind, by name."""


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
"""Kinds applied as their hub namespace's executor (see :mod:`addon_manager.kinds.tenancy`)."""
STACK_HOLDERS = tuple(spec.kind for spec in where(lambda s: s.holds_stack))
"""Kinds whose works hold the stack on their cluster."""
STACK_OWNERS = tuple(spec.kind for spec in where(lambda s: s.owns_stack))
"""Kinds whose works install the stack."""


def works_read(kind: str) -> frozenset[str]:
    """The owner kinds of the works besides its own that planning an intent of ``kind`` reads.

    Those it depends on, the stack's (its gates), the identity works (what seals), the
    tenant's access works, and what holds a stack (a stack's removal rule).

    An intent's plan is complete once its own works and these are known: what
    :meth:`addon_manager.shell.informers.WorkInformer.prefetch` lists first after a start.
    """
    spec = spec_of(kind)
    read = {dep.kind for dep in spec.depends_on} | set(STACK_OWNERS)
    if spec.owns_stack:
        read |= set(STACK_HOLDERS)
    if spec.seals:
        read.add(IDENTITY)
    if spec.tenant:
        read.add(ACCESS)
    return frozenset(read)
