"""The upstream KServe specs a hub template carries, down to the levels this API checks.

A MultiClusterInferenceService's ``spec.template`` is the spec of a KServe
InferenceService (``serving.kserve.io/v1beta1``), a MultiClusterServingRuntime's the spec
of a ServingRuntime (``serving.kserve.io/v1alpha1``). The spokes' API servers validate
what the add-on sends against KServe's CRDs, so a field those CRDs do not declare would be
refused there, after the hub admitted it. The models below declare the field names (and
JSON types) that the CRDs of the pinned release (``addon_agent.stacks.KSERVE_VERSION``)
declare at these levels, and nothing else, so the hub refuses an unknown field at admission
(and pydantic refuses the same), naming it:

- the InferenceService spec (``predictor``, ``explainer``, ``transformer``);
- the InferenceService predictor (its KServe fields and the pod fields it embeds);
- the ServingRuntime spec.

Below those levels (a predictor's ``model``, a container, ...) the objects stay open and
are passed through as they are. ``tests/integration/test_kserve_schema_drift.py`` compares
these declarations with the upstream CRDs, so an upgrade that adds or drops a field fails
there, naming the field.

ModelMesh Serving (``addon_agent.stacks.MODELMESH_VERSION``) installs its own CRDs of the
same group. Its ServingRuntime and InferenceService schemas declare a subset of KServe's
fields: the ServingRuntime template accepts the union (KServe's fields; which platform a
cluster runs is not known at admission), the InferenceService template refuses the
KServe-only predictor fields when ``deploymentMode`` is ModelMesh (see
:data:`KSERVE_ONLY_PREDICTOR_FIELDS`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from addon_api.base import ApiModel, DnsLabel, OpenModel, ShortText

Object = dict[str, Any]
"""An upstream object passed through as is (``x-kubernetes-preserve-unknown-fields``)."""

ObjectList = Annotated[list[Object], Field(max_length=256)]
"""A list of upstream objects (containers, volumes, tolerations, ...), passed through."""

StringMap = Annotated[
    dict[str, Annotated[str, Field(max_length=65536)]], Field(max_length=256)
]
"""A map of strings (labels, annotations, a node selector)."""


# InferenceService (serving.kserve.io/v1beta1) ----------------------------------------------------


class PredictorTemplate(ApiModel):
    """The predictor of a KServe InferenceService: its model, or its own containers.

    Besides KServe's own fields it has those of a core/v1 PodSpec, for the pods serving
    the model. Unknown fields are refused, as the InferenceService CRD would.
    """

    # KServe's own fields
    model: Object | None = None
    """The model to serve: its format (modelFormat), storageUri, runtime, resources, ..."""
    min_replicas: int | None = None
    """Fewest replicas of the predictor."""
    max_replicas: int | None = None
    """Most replicas of the predictor."""
    scale_target: int | None = None
    """Target value of the scaling metric at which replicas are added."""
    scale_metric: ShortText | None = None
    """Metric the autoscaler follows (cpu, memory, concurrency, rps)."""
    scale_metric_type: ShortText | None = None
    """How the scale target is read (Utilization, Value, AverageValue)."""
    auto_scaling: Object | None = None
    """Autoscaler settings (KServe's AutoScalingSpec)."""
    container_concurrency: int | None = None
    """Most requests a replica handles at once."""
    timeout: int | None = None
    """Request timeout, in seconds."""
    canary_traffic_percent: int | None = None
    """Share of traffic sent to the latest revision (serverless mode)."""
    logger: Object | None = None
    """Request/response logging."""
    batcher: Object | None = None
    """Request batching."""
    labels: StringMap | None = None
    """Labels added to the predictor's pods and services."""
    annotations: StringMap | None = None
    """Annotations added to the predictor's pods and services."""
    deployment_strategy: Object | None = None
    """Rollout strategy of the predictor's Deployment (Standard mode)."""
    worker_spec: Object | None = None
    """Worker pods of a multi-node predictor."""
    storage_uris: ObjectList | None = None
    """Further storage locations mounted into the predictor."""
    name: ShortText | None = None
    """Name of the predictor component (KServe v0.20.0 and later)."""
    storage_container_name: ShortText | None = None
    """ClusterStorageContainer that downloads the model (KServe v0.20.0 and later)."""
    sklearn: Object | None = None
    """Older form of model with format sklearn."""
    xgboost: Object | None = None
    """Older form of model with format xgboost."""
    tensorflow: Object | None = None
    """Older form of model with format tensorflow."""
    pytorch: Object | None = None
    """Older form of model with format pytorch."""
    triton: Object | None = None
    """Older form of model served by Triton."""
    onnx: Object | None = None
    """Older form of model with format onnx."""
    huggingface: Object | None = None
    """Older form of model with format huggingface."""
    pmml: Object | None = None
    """Older form of model with format pmml."""
    lightgbm: Object | None = None
    """Older form of model with format lightgbm."""
    paddle: Object | None = None
    """Older form of model with format paddle."""

    # Pod fields
    containers: ObjectList | None = None
    """Containers of a custom predictor (core/v1 Container)."""
    resources: Object | None = None
    """Compute resources of a custom predictor's container (KServe only)."""
    init_containers: ObjectList | None = None
    """Init containers of the predictor's pods."""
    volumes: ObjectList | None = None
    """Volumes of the predictor's pods."""
    service_account_name: ShortText | None = None
    """ServiceAccount the predictor's pods run as."""
    service_account: ShortText | None = None
    """Deprecated form of serviceAccountName."""
    automount_service_account_token: bool | None = None
    """Whether the ServiceAccount's token is mounted."""
    node_selector: StringMap | None = None
    """Node labels the pods must run on."""
    node_name: ShortText | None = None
    """Node the pods must run on."""
    affinity: Object | None = None
    """Scheduling affinity of the pods."""
    tolerations: ObjectList | None = None
    """Taints the pods tolerate."""
    topology_spread_constraints: ObjectList | None = None
    """How the pods spread over topology domains."""
    scheduler_name: ShortText | None = None
    """Scheduler of the pods."""
    scheduling_gates: ObjectList | None = None
    """Gates that hold the pods back from scheduling."""
    priority_class_name: ShortText | None = None
    """PriorityClass of the pods."""
    priority: int | None = None
    """Priority of the pods."""
    preemption_policy: ShortText | None = None
    """Whether the pods may preempt lower-priority pods."""
    runtime_class_name: ShortText | None = None
    """RuntimeClass of the pods."""
    security_context: Object | None = None
    """Pod-level security settings."""
    image_pull_secrets: ObjectList | None = None
    """Secrets used to pull the images."""
    resource_claims: ObjectList | None = None
    """Dynamic resources the pods claim."""
    overhead: Object | None = None
    """Resource overhead of the pods' RuntimeClass."""
    restart_policy: ShortText | None = None
    """Restart policy of the pods' containers."""
    termination_grace_period_seconds: int | None = None
    """Seconds a pod has to stop gracefully."""
    active_deadline_seconds: int | None = None
    """Seconds a pod may run before it is stopped."""
    readiness_gates: ObjectList | None = None
    """Extra conditions a pod must meet to be ready."""
    dns_policy: ShortText | None = None
    """DNS policy of the pods."""
    dns_config: Object | None = None
    """DNS settings of the pods."""
    host_aliases: ObjectList | None = None
    """Extra /etc/hosts entries."""
    hostname: ShortText | None = None
    """Host name of the pods."""
    hostname_override: ShortText | None = None
    """Host name that replaces the pod's own."""
    subdomain: ShortText | None = None
    """Subdomain of the pods' host names."""
    set_hostname_as_fqdn: bool | None = Field(default=None, alias="setHostnameAsFQDN")
    """Whether the host name is the fully qualified domain name."""
    host_network: bool | None = None
    """Whether the pods use the node's network."""
    host_pid: bool | None = Field(default=None, alias="hostPID")
    """Whether the pods share the node's process IDs."""
    host_ipc: bool | None = Field(default=None, alias="hostIPC")
    """Whether the pods share the node's IPC namespace."""
    host_users: bool | None = None
    """Whether the pods use the node's user namespace."""
    share_process_namespace: bool | None = None
    """Whether the pod's containers share one process namespace."""
    enable_service_links: bool | None = None
    """Whether Services are exposed to the pods as environment variables."""
    os: Object | None = None
    """Operating system of the pods."""

    def has(self, api_name: str) -> bool:
        """Whether the field called ``api_name`` in the API (e.g. ``workerSpec``) is set."""
        for attr, info in type(self).model_fields.items():
            if info.alias == api_name:
                return getattr(self, attr) is not None
        raise KeyError(api_name)


KSERVE_ONLY_PREDICTOR_FIELDS: tuple[str, ...] = (
    "autoScaling",
    "deploymentStrategy",
    "hostnameOverride",
    "name",
    "resources",
    "scaleMetricType",
    "storageContainerName",
    "storageUris",
    "workerSpec",
)
"""Predictor fields of KServe's InferenceService CRD that ModelMesh Serving's does not have
(``resources`` sits in the predictor's ``model`` for both, only KServe's CRD also has it at
the predictor level)."""


class InferenceServiceTemplate(ApiModel):
    """A KServe InferenceService spec (serving.kserve.io/v1beta1).

    Its fields, and the predictor's, are those of KServe's CRD; deeper levels are passed
    through as they are.
    """

    predictor: PredictorTemplate
    """The predictor: the model (format, storageUri, runtime, ...) or custom containers."""
    explainer: Object | None = None
    """An explainer of the predictor's predictions."""
    transformer: Object | None = None
    """A transformer run before and after the predictor."""
    canary: ObjectList | None = None
    """Canary predictors of a Standard-mode canary (KServe v0.20.0 and later): each a
    ``predictor`` and its ``trafficPercent``. A cluster still on an older KServe release
    drops the field (its CRD does not declare it)."""


# ServingRuntime (serving.kserve.io/v1alpha1) -----------------------------------------------------


class RuntimeContainer(OpenModel):
    """A container of the ServingRuntime (a core/v1 Container)."""

    name: DnsLabel
    """Name of the container."""


class SupportedModelFormat(OpenModel):
    """A model format the runtime can serve."""

    name: Annotated[str, Field(min_length=1, max_length=63)]
    """Name of the format (e.g. sklearn, onnx, pytorch)."""


class ServingRuntimeTemplate(ApiModel):
    """A KServe ServingRuntime spec (serving.kserve.io/v1alpha1).

    Its fields are those of KServe's CRD (ModelMesh Serving's declares a subset of them);
    deeper levels are passed through as they are.
    """

    containers: Annotated[list[RuntimeContainer], Field(min_length=1, max_length=16)]
    """Containers of the runtime."""
    supported_model_formats: Annotated[
        list[SupportedModelFormat], Field(min_length=1, max_length=64)
    ]
    """Model formats the runtime serves."""
    multi_model: bool | None = None
    """Whether one server loads many models (ModelMesh)."""
    disabled: bool | None = None
    """Whether the runtime is kept from serving new models."""
    protocol_versions: Annotated[list[ShortText], Field(max_length=16)] | None = None
    """Inference protocols the runtime speaks (v1, v2, grpc-v1, grpc-v2)."""
    replicas: int | None = None
    """Replicas of a multi-model runtime (ModelMesh)."""
    grpc_endpoint: ShortText | None = None
    """gRPC endpoint of a multi-model runtime's model management (ModelMesh)."""
    grpc_data_endpoint: ShortText | None = None
    """gRPC endpoint of a multi-model runtime's inference (ModelMesh)."""
    http_data_endpoint: ShortText | None = None
    """HTTP endpoint of a multi-model runtime's inference (ModelMesh)."""
    built_in_adapter: Object | None = None
    """ModelMesh's built-in adapter for the runtime."""
    storage_helper: Object | None = None
    """Whether ModelMesh's storage helper fetches models for the runtime."""
    worker_spec: Object | None = None
    """Worker pods of a multi-node runtime (KServe only)."""
    labels: StringMap | None = None
    """Labels added to the runtime's pods."""
    annotations: StringMap | None = None
    """Annotations added to the runtime's pods."""
    node_selector: StringMap | None = None
    """Node labels the runtime's pods must run on."""
    affinity: Object | None = None
    """Scheduling affinity of the runtime's pods."""
    tolerations: ObjectList | None = None
    """Taints the runtime's pods tolerate."""
    scheduler_name: ShortText | None = None
    """Scheduler of the runtime's pods (KServe only)."""
    host_ipc: bool | None = Field(default=None, alias="hostIPC")
    """Whether the runtime's pods share the node's IPC namespace (KServe only)."""
    image_pull_secrets: ObjectList | None = None
    """Secrets used to pull the runtime's images."""
    volumes: ObjectList | None = None
    """Volumes of the runtime's pods."""
