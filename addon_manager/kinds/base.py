"""What every kind module provides and the engine reads: the specs and their parts.

A hub kind's module defines a :class:`KindSpec` (``SPEC``) from its model, its
``prepare`` (render and gates for one cluster, a :class:`Prepared`) and its ``report``
(a work's feedback as the intent's cluster entry and its :class:`Category`); a helper
work's module (the agent identity, a tenant's access) defines a :class:`HelperSpec`.
The registry (:mod:`addon_manager.kinds.registry`) lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, TypeVar

from addon_api.common import ClusterStatus, Resource
from addon_api.hub import FleetEndpoint
from addon_api.reasons import ClusterReason
from addon_manager.facts.records import FeedbackValue, WorkDetails, WorkFact
from addon_manager.facts.sealing import AgentKey, SealingView
from addon_manager.facts.world import World
from addon_manager.kinds.render import RenderedWork, SpecMemo


@dataclass(frozen=True)
class Wait:
    """One thing an intent waits for on one cluster: a closed gate.

    OCM orders manifests only inside one work, so the manager holds a work back until the
    works it depends on report success through their feedback (each kind module's gates). A
    gate only holds back a work that was never sent: once a work exists it is kept up to
    date, whatever happens later.
    """

    reason: ClusterReason
    what: str
    """Human-readable: e.g. ``ServingPlatform Available``."""


Category = Literal["ready", "progressing", "failed", "stale"]
"""How a cluster's entry counts in the intent's status (the report's verdict)."""


E = TypeVar("E", bound=StrEnum)


def text(value: object) -> str:
    """A fed-back value as text ("" for none)."""
    return "" if value is None else str(value)


def spoke_phase(enum: type[E], value: FeedbackValue | None) -> E | None:
    """The member of ``enum`` a fed-back phase is (None: no phase, or one ``enum`` lacks)."""
    try:
        return enum(value) if isinstance(value, str) else None
    except ValueError:
        return None


@dataclass(frozen=True)
class Context:
    """What preparing an intent's work may read."""

    world: World
    sealer: SealingView
    """Pins, approvals and the hash key (read only: a new pin is returned, not recorded)."""
    namespace: str
    name: str
    specs: SpecMemo = field(default_factory=SpecMemo)
    """The intent's cluster specs, by the overrides that select a cluster (this plan's)."""
    serving: frozenset[str] = frozenset()
    """Clusters taking the intent's fleet-endpoint traffic as its status last published them
    (members of status.endpoint with a weight above 0)."""


@dataclass(frozen=True)
class Prepared:
    """One cluster's work (None: nothing to send yet), its closed gates, or its problem."""

    work: RenderedWork | None = None
    waits: tuple[Wait, ...] = ()
    problem: tuple[str, str] | None = None
    """(reason, message): the intent cannot go to this cluster as it is."""
    pin: AgentKey | None = None
    """An agent key to pin for this cluster before anything is sealed to it."""


Prepare = Callable[[Context, Resource, str], Prepared]
"""One cluster's work and gates: (context, intent, cluster) -> :class:`Prepared`."""
Report = Callable[[WorkFact, bool], tuple[ClusterStatus, Category]]
"""A cluster's applied work (and whether the stack is to be removed) -> its entry."""
Details = Callable[[Mapping[str, Any]], WorkDetails]
"""What a work's fact keeps of the ManifestWork beyond the common facts (per kind)."""


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
    """One cluster's work and gates (the kind module's ``prepare``)."""
    report: Report
    """A cluster's work status as the intent's entry (the kind module's ``report``)."""
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
    reads hub Secrets (see :func:`addon_manager.kinds.storage_connection.secrets_named`)."""
    spoke_namespaces: tuple[str, bool] | None = None
    """Its spec field that names spoke namespaces, and whether it is a list (what the
    namespace policy judges; None: it names none)."""
    claims: bool = False
    """Its works claim spoke objects that another intent's works may not overwrite: their
    facts keep the objects (:func:`addon_manager.facts.records.claimed_objects`)."""
    removed_state: Callable[[Any], bool] = lambda spec: False
    """Whether the spec asks for the stack to be removed (the entry is done when Removed)."""
    deprecation: Callable[[Any], str] = lambda spec: ""
    """Why what the spec asks for is deprecated ("" when it is not): a Deprecated condition."""
    endpoint: Callable[[Any], FleetEndpoint | None] = lambda spec: None
    """The spec's fleet endpoint, whose serving set the status carries (None: the kind serves
    no traffic)."""

    @property
    def kind(self) -> str:
        """The kind's name."""
        return str(self.model.model_fields["kind"].default)

    @property
    def plural(self) -> str:
        """The plural resource name (from the model's CrdInfo)."""
        return self.model.crd.plural


@dataclass(frozen=True)
class HelperSpec:
    """A kind of work the manager writes for hub kinds on a cluster; no hub kind itself.

    The agent's identity work (what seals needs) and a tenant's access work (what tenant
    works need): hub kinds name them in their ``depends_on``, and planning an intent reads
    them when ``read_by`` holds for its kind.
    """

    kind: str
    """Owner kind label of its works."""
    details: Details
    """What a work's fact keeps of the work (:func:`addon_manager.facts.records.parse_work`)."""
    read_by: Callable[[KindSpec], bool]
    """Whether planning an intent of a hub kind reads these works."""
    needed_on: Callable[[World, Collection[str]], frozenset[str]] | None = None
    """Those of some clusters where its work is needed (one call judges a whole burst of
    work events: the answer reads every intent's selection). A work that appears where it is
    not (left over from before a restart) is collected (:attr:`unused`); None: its works go
    with the intents that need them (their cleanup)."""
    unused: Callable[[World, tuple[str, str] | None], list[WorkFact]] | None = None
    """Its works nothing needs any more; the argument is an intent being deleted, (namespace,
    name), whose need no longer counts."""
