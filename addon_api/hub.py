"""Hub intents: what the hub admin declares once for a set of managed clusters.

All four kinds are namespaced; an intent may only use a Placement in its own
namespace.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from addon_api import constants as c
from addon_api.base import (
    ApiModel,
    Cel,
    DnsLabel,
    DnsSubdomain,
    SecretKey,
    UniqueList,
    map_list,
    set_list,
    unique_by,
)
from addon_api.common import (
    AGE_COLUMN,
    CrdInfo,
    IntentStatus,
    LabelSelector,
    Overrides,
    PlacementRef,
    PrinterColumn,
    Resource,
)
from addon_api.kserve import (
    KSERVE_ONLY_PREDICTOR_FIELDS,
    InferenceServiceTemplate,
    ServingRuntimeTemplate,
)
from addon_api.platform import PlatformSettings
from addon_api.rollout import MetricGate, Rollout

_READY = PrinterColumn(
    "Ready", "string", ".status.summary.readyText", "Clusters ready / clusters selected."
)
_PHASE = PrinterColumn("Phase", "string", ".status.phase", "Aggregated state.")
_REVISION = PrinterColumn("Revision", "integer", ".status.rollout.targetRevision",
                          "Revision of the spec being rolled out.", priority=1)
_ROLLOUT = PrinterColumn("Rollout", "string", ".status.rollout.phase",
                         "Where the rollout of the last change stands.", priority=1)


MAX_INTENT_NAME = 63
"""Longest name of a hub intent: the name is a label value on the ManifestWorks it creates
and on what they carry (a label value has at most 63 characters)."""

SHORT_NAME = Cel(
    f"size(self.metadata.name) <= {MAX_INTENT_NAME}",
    f"metadata.name must be at most {MAX_INTENT_NAME} characters (it becomes a label value"
    " on the ManifestWorks of the intent)",
    lambda o: o.metadata.name is None or len(o.metadata.name) <= MAX_INTENT_NAME,
    field_path=".metadata.name",
)
"""Rule of every hub kind but MultiClusterInferenceService, which has a stricter one. A rule
rather than a ``maxLength`` in the metadata schema, so the API server reports it like pydantic
does (a schema error would keep the API server from checking the rules at all)."""


NAMED_METADATA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 253},
        "generateName": {"type": "string", "maxLength": 253},
    },
}
"""Metadata schema that lets CEL rules read ``self.metadata.name`` (bounded like any name,
so that the rules, not the schema, report a name that is too long)."""


class IntentSpec(ApiModel):
    """Fields every hub intent has: where it goes, and per-cluster changes."""

    placement_ref: PlacementRef
    """The OCM Placement (in this namespace) whose decisions select the managed clusters."""
    overrides: Overrides = Field(default_factory=list)
    """Per-cluster changes, applied in order to what is sent to the clusters they select."""


# ModelServing ------------------------------------------------------------------------------------


class ModelServingSpec(PlatformSettings, IntentSpec):
    """Which serving platform runs on the clusters of a Placement, and how."""

    rollout: Rollout | None = None
    """How a change (a new spec.version, say) reaches the clusters (default: all at once).
    A step passes once its clusters have the stack Available and every model on them
    Ready; a step that fails rolls every cluster back to the stable revision."""


class ModelServing(Resource):
    """A model serving platform (KServe or ModelMesh) for the clusters of a Placement.

    The add-on installs, configures and removes the platform on every managed cluster
    the Placement selects.
    """

    cel_rules = (SHORT_NAME,)
    metadata_schema = NAMED_METADATA_SCHEMA

    crd = CrdInfo(
        plural="modelservings",
        short_names=("msv",),
        scope="Namespaced",
        hub=True,
        categories=(c.CATEGORY,),
        columns=(
            PrinterColumn("Platform", "string", ".spec.platform", "Serving platform."),
            PrinterColumn(
                "State", "string", ".spec.managementState", "Managed or Removed.", priority=1
            ),
            _READY,
            _PHASE,
            _REVISION,
            _ROLLOUT,
            AGE_COLUMN,
        ),
    )

    kind: Literal["ModelServing"] = "ModelServing"
    """Kind of the object."""
    spec: ModelServingSpec
    """Desired state of the serving platform on the selected clusters."""
    status: IntentStatus | None = None
    """Observed state, aggregated over the selected clusters."""


# StorageConnection -------------------------------------------------------------------------------

StorageType = Literal["s3", "gcs", "azure", "pvc", "uri"]
STORAGE_TYPES: tuple[StorageType, ...] = ("s3", "gcs", "azure", "pvc", "uri")
SECRET_STORAGE_TYPES: tuple[StorageType, ...] = ("s3", "gcs", "azure")
"""Storage types whose credentials come from a Secret."""

_CREDENTIAL_FIELD_RE = "^[a-z][a-z0-9_]*$"


class StorageSecretRef(ApiModel):
    """The hub Secret (same namespace) holding the credentials of a storage connection."""

    name: DnsSubdomain
    """Name of the Secret."""
    keys: Annotated[
        dict[str, SecretKey],
        Field(max_length=16),
        Cel(
            f"self.all(k, size(k) <= 63 && k.matches('{_CREDENTIAL_FIELD_RE}'))",
            "keys of secretRef.keys must be storage-config field names"
            " (lowercase letters, digits and '_'), e.g. access_key_id",
            lambda m: all(
                len(k) <= 63 and re.fullmatch(_CREDENTIAL_FIELD_RE, k) is not None for k in m
            ),
        ),
    ] = Field(default_factory=dict)
    """Which Secret data key fills which field of the storage-config entry
    (e.g. access_key_id: AWS_ACCESS_KEY_ID). When empty, every data key of the Secret
    becomes a field of the entry under its own name."""


class S3Storage(ApiModel):
    """An S3-compatible object store."""

    endpoint: Annotated[str, Field(max_length=2048, pattern="^https?://[^ ]+$")] | None = None
    """Endpoint URL (e.g. https://s3.eu-west-1.amazonaws.com or a MinIO URL)."""
    region: Annotated[str, Field(max_length=64)] | None = None
    """Region of the bucket."""
    bucket: Annotated[str, Field(min_length=1, max_length=255)] | None = None
    """Default bucket."""


class GcsStorage(ApiModel):
    """Google Cloud Storage."""

    bucket: Annotated[str, Field(min_length=1, max_length=255)] | None = None
    """Default bucket."""


class AzureStorage(ApiModel):
    """Azure Blob Storage."""

    storage_account: Annotated[str, Field(min_length=3, max_length=24, pattern="^[a-z0-9]+$")]
    """Storage account name."""
    container: Annotated[str, Field(min_length=3, max_length=63)] | None = None
    """Default blob container."""


class PvcStorage(ApiModel):
    """A PersistentVolumeClaim that already exists in each target namespace."""

    claim_name: DnsSubdomain
    """Name of the PersistentVolumeClaim."""


class UriStorage(ApiModel):
    """A plain http(s) location that needs no credentials."""

    uri: Annotated[str, Field(min_length=1, max_length=2048, pattern="^https?://[^ ]+$")]
    """Base URI of the models."""


def _section_rule(kind: StorageType) -> Cel:
    return Cel(
        f"has(self.{kind}) == (self.type == '{kind}')",
        f"spec.{kind} must be set when spec.type is {kind}, and only then",
        lambda s: (getattr(s, kind) is not None) == (s.type == kind),
        field_path=f".{kind}",
    )


class StorageConnectionSpec(IntentSpec):
    """A storage backend and the spoke namespaces its credentials are delivered to."""

    cel_rules = (
        Cel(
            "!(self.type in ['s3', 'gcs', 'azure']) || has(self.secretRef)",
            "spec.secretRef is required when spec.type is s3, gcs or azure",
            lambda s: s.type not in SECRET_STORAGE_TYPES or s.secret_ref is not None,
            field_path=".secretRef",
            reason="FieldValueRequired",
        ),
        Cel(
            "!(self.type in ['pvc', 'uri']) || !has(self.secretRef)",
            "spec.secretRef must not be set when spec.type is pvc or uri",
            lambda s: s.type in SECRET_STORAGE_TYPES or s.secret_ref is None,
            field_path=".secretRef",
            reason="FieldValueForbidden",
        ),
        *(_section_rule(kind) for kind in STORAGE_TYPES),
    )

    type: StorageType
    """Kind of storage: s3, gcs, azure, pvc or uri. Exactly the section of that name must
    be set."""
    secret_ref: StorageSecretRef | None = None
    """Credentials (required for s3, gcs and azure; not allowed for pvc and uri)."""
    s3: S3Storage | None = None
    """S3 settings (type s3)."""
    gcs: GcsStorage | None = None
    """Google Cloud Storage settings (type gcs)."""
    azure: AzureStorage | None = None
    """Azure Blob Storage settings (type azure)."""
    pvc: PvcStorage | None = None
    """PersistentVolumeClaim settings (type pvc)."""
    uri: UriStorage | None = None
    """Plain URI settings (type uri)."""
    target_namespaces: Annotated[
        list[DnsLabel], set_list(c.MAX_NAMESPACES, min_items=1), UniqueList
    ]
    """Namespaces on the managed clusters whose storage-config Secret gets this entry."""
    entry_name: SecretKey | None = None
    """Key of the entry in the storage-config Secret (default: the name of this object)."""

    def entry_key(self, object_name: str) -> str:
        """The storage-config key this connection is delivered under."""
        return self.entry_name or object_name


class StorageConnection(Resource):
    """A storage backend that models are read from, for the clusters of a Placement.

    Its credentials, sealed per cluster, become an entry of the storage-config Secret in
    the target namespaces of the selected managed clusters.
    """

    cel_rules = (SHORT_NAME,)
    metadata_schema = NAMED_METADATA_SCHEMA

    crd = CrdInfo(
        plural="storageconnections",
        short_names=("sconn",),
        scope="Namespaced",
        hub=True,
        categories=(c.CATEGORY,),
        columns=(
            PrinterColumn("Type", "string", ".spec.type", "Storage type."),
            _READY,
            _PHASE,
            AGE_COLUMN,
        ),
    )

    kind: Literal["StorageConnection"] = "StorageConnection"
    """Kind of the object."""
    spec: StorageConnectionSpec
    """The storage backend and where it is delivered."""
    status: IntentStatus | None = None
    """Observed state, aggregated over the selected clusters."""


# MultiClusterServingRuntime ----------------------------------------------------------------------


class MultiClusterServingRuntimeSpec(IntentSpec):
    """A KServe ServingRuntime to create on the selected clusters."""

    target_namespace: DnsLabel
    """Namespace of the ServingRuntime on the managed clusters."""
    template: ServingRuntimeTemplate
    """Spec of the ServingRuntime, named like this object on every cluster."""
    rollout: Rollout | None = None
    """How a change reaches the clusters (default: all at once)."""


class MultiClusterServingRuntime(Resource):
    """A KServe ServingRuntime created on every managed cluster selected by a Placement."""

    cel_rules = (SHORT_NAME,)
    metadata_schema = NAMED_METADATA_SCHEMA

    crd = CrdInfo(
        plural="multiclusterservingruntimes",
        short_names=("mcsr",),
        scope="Namespaced",
        hub=True,
        categories=(c.CATEGORY,),
        columns=(
            PrinterColumn(
                "Target", "string", ".spec.targetNamespace", "Namespace on the clusters."
            ),
            _READY,
            _PHASE,
            _REVISION,
            _ROLLOUT,
            AGE_COLUMN,
        ),
    )

    kind: Literal["MultiClusterServingRuntime"] = "MultiClusterServingRuntime"
    """Kind of the object."""
    spec: MultiClusterServingRuntimeSpec
    """The runtime and where it goes."""
    status: IntentStatus | None = None
    """Observed state, aggregated over the selected clusters."""


# MultiClusterInferenceService --------------------------------------------------------------------


DeploymentMode = Literal["Standard", "RawDeployment", "ModelMesh"]

_ISVC_NAME_RE = "^[a-z]([-a-z0-9]*[a-z0-9])?$"


def _isvc_name_ok(name: str | None) -> bool:
    return name is None or (len(name) <= 63 and re.fullmatch(_ISVC_NAME_RE, name) is not None)


def _modelmesh_field_rule(name: str) -> Cel:
    """Refuse a KServe-only predictor field when the model is served by ModelMesh."""
    return Cel(
        f"self.deploymentMode != 'ModelMesh' || !has(self.template.predictor.{name})",
        f"spec.template.predictor.{name} is not a field of ModelMesh Serving's"
        " InferenceService (deploymentMode ModelMesh)",
        lambda s: s.deployment_mode != "ModelMesh"
        or not s.template.predictor.has(name),
        field_path=f".template.predictor.{name}",
        reason="FieldValueForbidden",
    )


RouteTermination = Literal["Edge", "None"]


class Exposure(ApiModel):
    """How callers outside a cluster reach the model (its InferenceService is internal)."""

    type: Literal["Route", "None"] = "Route"
    """Route: an OpenShift Route (route.openshift.io/v1) next to the InferenceService, to its
    predictor Service; on a cluster without the Route API it falls back to none (the
    cluster's entry says so). None: no
    exposure (for an override to turn it off on some clusters: host and tls are then
    ignored, so the override need not remove them)."""
    host: DnsSubdomain | None = None
    """Host name of the Route; default: the one the cluster's router assigns. Setting it
    needs the right to create routes/custom-host, which the add-on's identities have."""
    tls: RouteTermination | None = None
    """Edge (the default): the router terminates TLS and redirects plain HTTP; None: plain
    HTTP."""


class ClusterWeight(ApiModel):
    """A cluster's share of a Spread endpoint's traffic."""

    cluster: DnsSubdomain
    """Name of the ManagedCluster."""
    weight: Annotated[int, Field(ge=0, le=1000)]
    """Relative weight (the others' default is 100; 0 keeps it out of the traffic)."""


class FleetEndpoint(ApiModel):
    """One address for the model across its clusters: which clusters take its traffic.

    The manager publishes the result in status.endpoint (the serving set); routers read it
    (``model-serving-addon endpoint``).
    """

    cluster_selector: LabelSelector | None = None
    """Only clusters with these labels take traffic (the model still runs on the others)."""
    policy: Literal["Spread", "Failover"] = "Spread"
    """Spread: every serving cluster takes traffic, by weight. Failover: all of it goes to the
    first serving cluster in priority order; the others are standbys (weight 0) until it
    cannot serve."""
    priority: Annotated[list[DnsSubdomain], set_list(c.MAX_CLUSTER_NAMES), UniqueList] = (
        Field(default_factory=list))
    """Failover order by cluster name; clusters not named follow, ordered by priorityLabel,
    then by name."""
    priority_label: Annotated[str, Field(min_length=1, max_length=317)] | None = None
    """Failover: a ManagedCluster label whose value orders the clusters not named in priority
    (lowest first: numerically when both values are numbers; clusters without it last)."""
    weights: Annotated[
        list[ClusterWeight], map_list("cluster", c.MAX_CLUSTER_NAMES),
        AfterValidator(unique_by("cluster")),
    ] = Field(default_factory=list)
    """Spread: per-cluster weights (100 for a cluster not listed)."""
    spillover: MetricGate | None = None
    """Move a member's traffic to the others while its model's metric is out of bounds (the
    rollout's metric gate, judged per cluster): with ``metric``, the manager selects only this
    model's own series on each member (``query``, free PromQL keeping the ``cluster`` label,
    only in the hub namespaces trusted with the stack). A member outside the bounds takes no
    traffic (MetricOutOfBounds) and comes back once within them; judged again every
    --gate-refresh seconds (default 15) against the manager's --prometheus-url; never every
    member at once (when all are out of bounds, all keep serving). Use ``rate`` for a
    window."""
    inference_pool_import: bool = False
    """Publish the serving set on the hub as a Gateway API Inference Extension
    InferencePoolImport (inference.networking.x-k8s.io/v1alpha1) named like this object, in
    its namespace, where the hub serves that API: its status lists, under controller
    modelserving.opendatahub.io/fleet-endpoint, the clusters taking the model's traffic as
    exportingClusters. API shape only: no upstream controller consumes it yet; a
    multi-cluster gateway would read exportingClusters."""
    service_export: bool = False
    """Export the model's predictor Service (KServe's NAME-predictor) with a Multi-Cluster
    Services ServiceExport (multicluster.x-k8s.io/v1alpha1) on every member of the serving
    set that takes traffic (weight above 0: under Failover the active cluster only), and
    remove it from a cluster that stops taking traffic. Needs the MCS API on the clusters
    (ACM's Submariner add-on, Cilium ClusterMesh); MCS has no weights, so the exporting
    clusters share the imported Service's traffic equally."""


class MultiClusterInferenceServiceSpec(IntentSpec):
    """A KServe InferenceService to create on the selected clusters."""

    cel_rules = tuple(_modelmesh_field_rule(name) for name in KSERVE_ONLY_PREDICTOR_FIELDS)

    target_namespace: DnsLabel
    """Namespace of the InferenceService on the managed clusters."""
    template: InferenceServiceTemplate
    """Spec of the InferenceService, named like this object on every cluster."""
    storage_connections: Annotated[list[DnsSubdomain], set_list(16), UniqueList] = Field(
        default_factory=list
    )
    """StorageConnections (in this namespace) the model is read through; the
    InferenceService is sent to a cluster only once they are delivered there."""
    deployment_mode: DeploymentMode = "Standard"
    """Standard (RawDeployment is its older name) needs platform KServe on the cluster,
    ModelMesh needs platform ModelMesh."""
    rollout: Rollout | None = None
    """How a change reaches the clusters (default: all at once)."""
    exposure: Exposure | None = None
    """Expose the model outside each cluster (default: not exposed); the external URL is
    reported per cluster beside the internal one."""
    endpoint: FleetEndpoint | None = None
    """Which clusters the model's fleet endpoint sends traffic to, and how (default: Spread
    over every serving cluster, equal weights)."""


class MultiClusterInferenceService(Resource):
    """A KServe InferenceService created on every managed cluster selected by a Placement."""

    cel_rules = (
        Cel(
            f"size(self.metadata.name) <= 63 && self.metadata.name.matches('{_ISVC_NAME_RE}')",
            "metadata.name must be a DNS-1035 label (a lowercase letter first, then lowercase"
            " letters, digits and '-', at most 63 characters), as KServe requires",
            lambda o: _isvc_name_ok(o.metadata.name),
            field_path=".metadata.name",
        ),
    )
    metadata_schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 63},
            "generateName": {"type": "string", "maxLength": 58},
        },
    }

    crd = CrdInfo(
        plural="multiclusterinferenceservices",
        short_names=("mcisvc",),
        scope="Namespaced",
        hub=True,
        categories=(c.CATEGORY,),
        columns=(
            PrinterColumn(
                "Target", "string", ".spec.targetNamespace", "Namespace on the clusters."
            ),
            PrinterColumn("Mode", "string", ".spec.deploymentMode", "Deployment mode."),
            _READY,
            _PHASE,
            _REVISION,
            _ROLLOUT,
            AGE_COLUMN,
        ),
    )

    kind: Literal["MultiClusterInferenceService"] = "MultiClusterInferenceService"
    """Kind of the object."""
    spec: MultiClusterInferenceServiceSpec
    """The model service and where it goes."""
    status: IntentStatus | None = None
    """Observed state, aggregated over the selected clusters."""


HUB_RESOURCES: tuple[type[Resource], ...] = (
    ModelServing,
    StorageConnection,
    MultiClusterServingRuntime,
    MultiClusterInferenceService,
)
"""Every hub kind, in documentation order."""
