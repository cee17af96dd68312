"""Types shared by several kinds: placement, overrides, conditions and intent status."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field

from addon_api import constants as c
from addon_api.base import (
    ApiModel,
    Cel,
    ConditionMessage,
    ConditionReason,
    DnsSubdomain,
    OpenModel,
    StatusReason,
    StatusText,
    StatusUrl,
    StatusWord,
    Timestamp,
    UniqueList,
    map_list,
    set_list,
    unique_by,
)
from addon_api.rollout import RolloutStatus

# Kind metadata (read by the CRD generator) ------------------------------------------------------


@dataclass(frozen=True)
class PrinterColumn:
    """One ``additionalPrinterColumns`` entry (a column of ``kubectl get``)."""

    name: str
    type: Literal["string", "integer", "number", "boolean", "date"]
    json_path: str
    description: str
    priority: int = 0


AGE_COLUMN = PrinterColumn(
    "Age",
    "date",
    ".metadata.creationTimestamp",
    "Time since the object was created.",
)


@dataclass(frozen=True)
class CrdInfo:
    """How a kind is served: names, scope and ``kubectl get`` columns."""

    plural: str
    short_names: tuple[str, ...]
    scope: Literal["Namespaced", "Cluster"]
    hub: bool
    """Served by the hub (an intent) rather than by the managed clusters."""
    columns: tuple[PrinterColumn, ...] = ()
    categories: tuple[str, ...] = field(default=())


class ObjectMeta(OpenModel):
    """The part of Kubernetes object metadata the add-on reads; the rest is kept as is."""

    name: str | None = None
    """Name of the object."""
    namespace: str | None = None
    """Namespace of the object (unset for cluster-scoped kinds)."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels of the object."""
    annotations: dict[str, str] = Field(default_factory=dict)
    """Annotations of the object."""
    uid: str | None = None
    """Unique id assigned by the API server."""
    generation: int | None = None
    """Generation of the spec, incremented by the API server on every spec change."""
    resource_version: str | None = None
    """Opaque version of the whole object, for optimistic concurrency."""


class Resource(ApiModel):
    """Base of every top-level kind: apiVersion, kind and metadata."""

    crd: ClassVar[CrdInfo]
    """How the kind is served (used to generate its CRD)."""
    metadata_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    """Schema of metadata in the CRD (only name and generateName may be restricted)."""

    api_version: Literal["modelserving.opendatahub.io/v1alpha1"] = (
        "modelserving.opendatahub.io/v1alpha1"
    )
    """API version of the object: modelserving.opendatahub.io/v1alpha1."""
    kind: str
    """Kind of the object."""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata."""


# Placement and overrides -------------------------------------------------------------------------


class PlacementRef(ApiModel):
    """A reference to an OCM Placement in the same namespace as the intent."""

    name: DnsSubdomain
    """Name of the Placement (cluster.open-cluster-management.io/v1beta1) whose decisions
    select the managed clusters. It must be in the intent's namespace, which needs a
    ManagedClusterSetBinding for the Placement to select any cluster."""


class LabelSelectorRequirement(ApiModel):
    """A label selector requirement: a key, an operator and values."""

    cel_rules = (
        Cel(
            "self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0)"
            " : (!has(self.values) || size(self.values) == 0)",
            "values must be non-empty when operator is In or NotIn,"
            " and empty when operator is Exists or DoesNotExist",
            lambda r: bool(r.values) == (r.operator in ("In", "NotIn")),
            field_path=".values",
        ),
    )

    key: Annotated[str, Field(min_length=1, max_length=317)]
    """The label key the selector applies to."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the key relates to the values."""
    values: list[Annotated[str, Field(max_length=63)]] = Field(
        default_factory=list, max_length=c.MAX_SELECTOR_TERMS
    )
    """Label values; non-empty for In and NotIn, empty for Exists and DoesNotExist."""


class LabelSelector(ApiModel):
    """Selects ManagedClusters by their labels (all terms must match).

    An empty selector matches every cluster of the Placement.
    """

    match_labels: dict[str, Annotated[str, Field(max_length=63)]] = Field(
        default_factory=dict, max_length=c.MAX_SELECTOR_TERMS
    )
    """Labels a cluster must carry, with these exact values."""
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list, max_length=c.MAX_SELECTOR_TERMS
    )
    """Requirements a cluster's labels must all meet."""

    def matches(self, labels: dict[str, str]) -> bool:
        """Whether a cluster with ``labels`` is selected."""
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        for req in self.match_expressions:
            present = req.key in labels
            if req.operator == "Exists" and not present:
                return False
            if req.operator == "DoesNotExist" and present:
                return False
            if req.operator == "In" and labels.get(req.key) not in req.values:
                return False
            if req.operator == "NotIn" and present and labels[req.key] in req.values:
                return False
        return True


_ROUTING = ("placementRef", "overrides")


def _check_patch(patch: dict[str, Any]) -> dict[str, Any]:
    # A null is ignored, as the API server prunes it (these properties are not nullable).
    for key in _ROUTING:
        if patch.get(key) is not None:
            raise ValueError(f"an override patch cannot change {key}")
    return patch


_PATCH_SCHEMA: dict[str, Any] = {
    "properties": {
        key: {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "description": f"Not allowed: an override cannot change {key}.",
        }
        for key in _ROUTING
    },
    "x-kubernetes-validations": [
        {
            "rule": "!has(self.placementRef) && !has(self.overrides)",
            "message": "an override patch cannot change placementRef or overrides",
        }
    ],
}
"""The two routing fields are declared so that the rule can see them (CEL cannot read
fields a schema only preserves)."""


class Override(ApiModel):
    """Changes what is sent to some of the clusters of the Placement.

    The patch applies to clusters named in clusterNames and to clusters matched by
    clusterSelector (either is enough). Overrides apply in order, later ones on top.
    """

    cel_rules = (
        Cel(
            "has(self.clusterNames) || has(self.clusterSelector)",
            "an override must select clusters: set clusterNames, clusterSelector or both",
            lambda o: o.cluster_names is not None or o.cluster_selector is not None,
        ),
    )

    cluster_names: (
        Annotated[list[DnsSubdomain], set_list(c.MAX_CLUSTER_NAMES, min_items=1), UniqueList]
        | None
    ) = None
    """Names of ManagedClusters the patch applies to."""
    cluster_selector: LabelSelector | None = None
    """Labels of ManagedClusters the patch applies to."""
    patch: Annotated[
        dict[str, Any], AfterValidator(_check_patch), Field(json_schema_extra=_PATCH_SCHEMA)
    ]
    """JSON merge patch (RFC 7386) applied to this intent's spec, as sent to the selected
    clusters. placementRef and overrides cannot be patched; a null value removes a field."""

    def selects(self, cluster: str, labels: dict[str, str]) -> bool:
        """Whether this override applies to the cluster named ``cluster``."""
        if self.cluster_names is not None and cluster in self.cluster_names:
            return True
        return self.cluster_selector is not None and self.cluster_selector.matches(labels)


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply a JSON merge patch (RFC 7386) to ``target``; neither argument is modified."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


Overrides = Annotated[list[Override], Field(max_length=c.MAX_OVERRIDES)]


# Status ------------------------------------------------------------------------------------------


class Condition(ApiModel):
    """A standard Kubernetes condition (same fields as metav1.Condition)."""

    type: Annotated[str, Field(min_length=1, max_length=316)]
    """Type of the condition, e.g. Ready, Progressing, Degraded or PlacementResolved."""
    status: Literal["True", "False", "Unknown"]
    """Whether the condition holds."""
    observed_generation: Annotated[int, Field(ge=0)] | None = None
    """The metadata.generation the condition was computed from."""
    last_transition_time: Timestamp | None = None
    """When the status of the condition last changed."""
    reason: ConditionReason = ""
    """A CamelCase word saying why the condition is in this status."""
    message: ConditionMessage = ""
    """Human-readable details."""


Conditions = Annotated[
    list[Condition], map_list("type", c.MAX_CONDITIONS), AfterValidator(unique_by("type"))
]


class StatusSummary(ApiModel):
    """Counts of the selected clusters by state."""

    desired: Annotated[int, Field(ge=0)] = 0
    """Clusters the intent should be on (the Placement's decisions)."""
    ready: Annotated[int, Field(ge=0)] = 0
    """Clusters where the intent is fully in effect."""
    progressing: Annotated[int, Field(ge=0)] = 0
    """Clusters still being brought to the desired state."""
    failed: Annotated[int, Field(ge=0)] = 0
    """Clusters that report a failure."""
    stale: Annotated[int, Field(ge=0)] = 0
    """Clusters whose report is out of date (their ManagedCluster is not Available, or the
    work agent has not picked up the latest ManifestWork in time); counted in none of
    ready, progressing and failed."""
    ready_text: Annotated[str, Field(max_length=32)] = "0/0"
    """ready/desired, for kubectl get."""

    @classmethod
    def of(
        cls, desired: int, ready: int, progressing: int, failed: int, stale: int = 0
    ) -> StatusSummary:
        """A summary with readyText filled in."""
        return cls(
            desired=desired,
            ready=ready,
            progressing=progressing,
            failed=failed,
            stale=stale,
            ready_text=f"{ready}/{desired}",
        )


class ClusterStatus(ApiModel):
    """What one managed cluster reports about an intent."""

    cluster: DnsSubdomain
    """Name of the ManagedCluster."""
    phase: StatusWord = ""
    """Short state of the intent on that cluster (e.g. Waiting, Applied, Available, Failed,
    or Stale when the cluster's report is out of date)."""
    ready: bool = False
    """Whether the intent is fully in effect on that cluster."""
    reason: StatusReason = ""
    """A CamelCase word saying why the cluster is in this phase."""
    message: StatusText = ""
    """Human-readable details."""
    url: StatusUrl = ""
    """Where the model is served on that cluster (InferenceServices only)."""
    external_url: StatusUrl = ""
    """Where callers outside the cluster reach the model (InferenceServices with
    spec.exposure, once the cluster's router admitted the Route)."""
    model_state: StatusWord = ""
    """Active model state reported by KServe (InferenceServices only), e.g. Loaded."""
    version: StatusWord = ""
    """The serving stack's version on that cluster (ModelServings only); while the phase
    is Upgrading, the version it ran before (the message names the target)."""
    target_version: StatusWord = ""
    """While the stack's version changes on that cluster (ModelServings only), the version it
    goes to; empty otherwise."""
    leftovers: StatusText = ""
    """What the agent left on that cluster for an admin to clean up (ModelServings only):
    namespaces dropped from servingNamespaces that it kept because they hold objects it did
    not create, e.g. namespace team-a kept: holds PersistentVolumeClaim team-a/data (1 more).
    The cluster stays ready; delete what the namespace holds (the agent then deletes it) or
    the namespace, or put it back in servingNamespaces."""
    waiting_for: Annotated[list[StatusReason], Field(max_length=16)] = (
        Field(default_factory=list)
    )
    """What must happen on that cluster before the intent is sent there
    (e.g. ServingPlatform Available, StorageConnection delivered)."""
    stale: bool = False
    """True when what the cluster reported may be out of date: its ManagedCluster is not
    Available (reason ClusterUnavailable), or the OCM work agent has not picked up the
    latest ManifestWork for longer than the manager's --stale-after (reason WorkNotObserved).
    The message then says what is stale, since when, and the last reported phase; url and
    modelState keep their last reported values."""
    stale_since: Timestamp | None = None
    """Since when the report is out of date (only set while stale)."""
    revision: Annotated[int, Field(ge=1)] | None = None
    """The intent revision this cluster's ManifestWork renders (progressive rollouts only;
    see status.rollout for the stable and target revisions)."""
    last_update_time: Timestamp | None = None
    """When this entry last changed (any field but this one)."""


class EndpointMember(ApiModel):
    """A cluster in a model's serving set: it may take the fleet endpoint's traffic."""

    cluster: DnsSubdomain
    """Name of the ManagedCluster."""
    weight: Annotated[int, Field(ge=0, le=1000)] = 0
    """Its share of the traffic, relative to the other members' (0: a Failover standby)."""
    url: StatusUrl = ""
    """Where the model answers on that cluster (its external URL when exposed, else its
    URL)."""
    revision: Annotated[int, Field(ge=1)] | None = None
    """The intent revision the cluster serves (progressive rollouts only)."""


class EndpointExclusion(ApiModel):
    """A selected cluster left out of a model's serving set, and why."""

    cluster: DnsSubdomain
    """Name of the ManagedCluster."""
    reason: StatusReason = ""
    """NotReady, Stale, Cordoned, OutsideSelector, NotSelected, NoURL, ZeroWeight,
    RevisionRolledBack (it still serves a revision being rolled back), RevisionHalted (it
    serves the revision whose step failed), OtherRevision (neither the stable nor the
    target revision of the rollout) or MetricOutOfBounds (spec.endpoint.spillover)."""
    message: StatusText = ""
    """Human-readable details."""


class EndpointStatus(ApiModel):
    """A model's serving set: the clusters its fleet endpoint sends traffic to (issue 34)."""

    policy: StatusWord = ""
    """Spread or Failover (spec.endpoint.policy)."""
    members: Annotated[
        list[EndpointMember],
        map_list("cluster", c.MAX_CLUSTER_STATUSES),
        AfterValidator(unique_by("cluster")),
    ] = Field(default_factory=list)
    """Clusters that may take traffic, in the policy's order (Failover: the active one
    first, then the standbys by priority)."""
    excluded: Annotated[
        list[EndpointExclusion],
        map_list("cluster", c.MAX_CLUSTER_STATUSES),
        AfterValidator(unique_by("cluster")),
    ] = Field(default_factory=list)
    """Selected clusters that take no traffic, with the reason."""
    omitted: Annotated[int, Field(ge=0)] = 0
    """Clusters left out of members and excluded because of the size bound."""
    serving: Annotated[int, Field(ge=0)] = 0
    """Members whose weight is above 0."""
    last_change_time: Timestamp | None = None
    """When the members or their weights last changed."""
    pool_import: StatusWord = ""
    """Name of the InferencePoolImport (inference.networking.x-k8s.io) the manager keeps
    for the model in its hub namespace (spec.endpoint.inferencePoolImport; "" for none, or
    while the hub does not serve that API)."""


IntentPhase = Literal["Pending", "Progressing", "Ready", "Degraded", "Invalid"]


class ShardStatus(ApiModel):
    """Which manager replica writes an intent (sharded managers, ``--shards``)."""

    index: Annotated[int, Field(ge=0)]
    """The intent's shard: a hash of its namespace and name."""
    replica: Annotated[str, Field(max_length=253)]
    """The manager replica holding the shard's Lease: the only one that writes this intent's
    works and status."""
    epoch: Annotated[int, Field(ge=0)]
    """The shard Lease's leaseTransitions when that replica took it; every ManifestWork it
    writes carries it (annotation ``modelserving.opendatahub.io/shard-epoch``)."""


class IntentStatus(ApiModel):
    """Observed state of a hub intent, aggregated over the selected clusters."""

    observed_generation: Annotated[int, Field(ge=0)] | None = None
    """The metadata.generation this status was computed from."""
    phase: IntentPhase = "Pending"
    """Pending (not yet on any cluster), Progressing, Ready (ready on every selected cluster),
    Degraded (failed on some cluster, or some cluster's report is stale) or Invalid (the
    manager rejected the spec; see the Ready condition)."""
    conditions: Conditions = Field(default_factory=list)
    """Ready, Progressing, Degraded and PlacementResolved."""
    summary: StatusSummary = Field(default_factory=StatusSummary)
    """Counts of the selected clusters by state."""
    clusters: Annotated[
        list[ClusterStatus],
        map_list("cluster", c.MAX_CLUSTER_STATUSES),
        AfterValidator(unique_by("cluster")),
    ] = Field(default_factory=list)
    """Per-cluster entries, non-ready clusters first, at most 100."""
    clusters_omitted: Annotated[int, Field(ge=0)] = 0
    """Selected clusters left out of clusters because of the size bound."""
    rollout: RolloutStatus | None = None
    """Where the rollout of the last spec change stands (Progressive strategies only)."""
    endpoint: EndpointStatus | None = None
    """The clusters the model's fleet endpoint sends traffic to, and those it leaves out
    (MultiClusterInferenceServices only)."""
    shard: ShardStatus | None = None
    """The manager replica that writes this intent (only when the managers are sharded)."""
