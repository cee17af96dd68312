"""Serving platform settings, shared by ModelServing (hub) and ServingPlatform (spoke).

The manager renders a ModelServing for one cluster (overrides applied) into the
spec of that cluster's ServingPlatform; both use the settings defined here.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field

from addon_api import constants as c
from addon_api.base import (
    ApiModel,
    Cel,
    DnsLabel,
    DnsSubdomain,
    OpenModel,
    Quantity,
    SecretKey,
    UniqueList,
    is_dns_label,
    parse_quantity,
    set_list,
)

Platform = Literal["KServe", "ModelMesh"]

MODELMESH_DEPRECATED = (
    "platform ModelMesh is deprecated: ModelMesh Serving is archived upstream and its last "
    "release is v0.12.0; use platform KServe"
)
"""The warning at admission (the chart's ValidatingAdmissionPolicy) and the message of a
ModelServing's Deprecated condition."""
ManagementState = Literal["Managed", "Unmanaged", "Removed"]
Profile = Literal["Default", "SingleNode"]

# Components --------------------------------------------------------------------------------------

_DEPLOYMENT_NAME_RULE = (
    "self.all(name, size(name) <= 63 && name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))"
)


def deployment_keys(what: str) -> Cel:
    """Rule on a map keyed by Deployment name: every key is an RFC 1123 label."""
    return Cel(
        _DEPLOYMENT_NAME_RULE,
        f"keys of {what} must be Deployment names"
        " (lowercase letters, digits and '-', at most 63 characters)",
        lambda mapping: all(is_dns_label(k) for k in mapping),
    )


def _requests_within_limits(res: ResourceRequirements) -> bool:
    for name, request in res.requests.items():
        limit = res.limits.get(name)
        if limit is not None and parse_quantity(request) > parse_quantity(limit):
            return False
    return True


class ResourceRequirements(ApiModel):
    """Compute resources of a Deployment's containers (as in a Pod's container spec)."""

    cel_rules = (
        Cel(
            "!has(self.limits) || !has(self.requests) || self.requests.all(r,"
            " !(r in self.limits) || !isQuantity(self.requests[r]) || !isQuantity(self.limits[r])"
            " || quantity(self.requests[r]).compareTo(quantity(self.limits[r])) <= 0)",
            "resources.requests must not exceed resources.limits",
            _requests_within_limits,
            field_path=".requests",
        ),
    )

    limits: Annotated[dict[str, Quantity], Field(max_length=16)] = Field(default_factory=dict)
    """Maximum amount of each resource (e.g. cpu: "2", memory: 4Gi)."""
    requests: Annotated[dict[str, Quantity], Field(max_length=16)] = Field(default_factory=dict)
    """Amount of each resource the scheduler reserves (e.g. cpu: 500m, memory: 1Gi)."""


MetricType = Literal["Resource", "Pods", "Object", "External", "ContainerResource"]

_METRIC_SECTIONS: dict[str, str] = {
    "Resource": "resource",
    "Pods": "pods",
    "Object": "object",
    "External": "external",
    "ContainerResource": "container_resource",
}


def _one_metric_source(metric: MetricSpec) -> bool:
    return all(
        (getattr(metric, attr) is not None) == (metric.type == kind)
        for kind, attr in _METRIC_SECTIONS.items()
    )


class MetricSpec(OpenModel):
    """A HorizontalPodAutoscaler (autoscaling/v2) MetricSpec, passed through as is."""

    cel_rules = (
        Cel(
            " && ".join(
                f"(self.type == '{kind}') == has(self.{attr})"
                for kind, attr in (
                    ("Resource", "resource"),
                    ("Pods", "pods"),
                    ("Object", "object"),
                    ("External", "external"),
                    ("ContainerResource", "containerResource"),
                )
            ),
            "a metric must set the source named by its type (resource, pods, object, external"
            " or containerResource) and no other",
            _one_metric_source,
        ),
    )

    type: MetricType
    """Kind of metric source: Resource, Pods, Object, External or ContainerResource."""
    resource: dict[str, Any] | None = None
    """Resource metric source (when type is Resource)."""
    pods: dict[str, Any] | None = None
    """Pods metric source (when type is Pods)."""
    object: dict[str, Any] | None = None
    """Object metric source (when type is Object)."""
    external: dict[str, Any] | None = None
    """External metric source (when type is External)."""
    container_resource: dict[str, Any] | None = None
    """ContainerResource metric source (when type is ContainerResource)."""


class Autoscaling(ApiModel):
    """A HorizontalPodAutoscaler for the Deployment."""

    cel_rules = (
        Cel(
            "!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",
            "autoscaling.minReplicas must be <= autoscaling.maxReplicas",
            lambda a: a.min_replicas <= a.max_replicas,
            field_path=".minReplicas",
        ),
    )

    min_replicas: Annotated[int, Field(ge=1, le=100)] = 1
    """Lower bound of the replica count."""
    max_replicas: Annotated[int, Field(ge=1, le=100)]
    """Upper bound of the replica count."""
    metrics: Annotated[list[MetricSpec], Field(max_length=8)] = Field(default_factory=list)
    """HPA v2 metrics; when empty the HPA default (80% average CPU utilization) applies."""


class ComponentSpec(ApiModel):
    """Settings of one Deployment of the serving stack."""

    cel_rules = (
        Cel(
            "!(has(self.replicas) && has(self.autoscaling))",
            "replicas and autoscaling are mutually exclusive (the autoscaler owns the"
            " replica count)",
            lambda s: s.replicas is None or s.autoscaling is None,
            field_path=".replicas",
            reason="FieldValueForbidden",
        ),
    )

    replicas: Annotated[int, Field(ge=0, le=10)] | None = None
    """Fixed replica count (0 stops the Deployment)."""
    resources: ResourceRequirements | None = None
    """Resources of every container of the Deployment; unset keeps the bundle's values."""
    autoscaling: Autoscaling | None = None
    """Scale the Deployment with a HorizontalPodAutoscaler."""


# devFlags ----------------------------------------------------------------------------------------

_IMAGE_COMPONENT = "[a-z0-9]+((__|[._]|[-]+)[a-z0-9]+)*"
_DOMAIN_PART = "([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
IMAGE_REFERENCE_RE = (
    f"^({_DOMAIN_PART}([.]{_DOMAIN_PART})*(:[0-9]+)?/)?"
    f"{_IMAGE_COMPONENT}(/{_IMAGE_COMPONENT})*"
    "(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?"
    "(@sha256:[a-f0-9]{64})?$"
)
"""A container image reference: [registry[:port]/]repository[:tag][@sha256:digest]."""

ImageReference = Annotated[
    str,
    Field(min_length=1, max_length=512),
    Cel(
        f"self.matches('{IMAGE_REFERENCE_RE}')",
        "must be a container image reference: [registry[:port]/]repository[:tag][@sha256:digest]",
        lambda v: re.fullmatch(IMAGE_REFERENCE_RE, v) is not None,
    ),
]

MANIFESTS_URI_RE = "^(file:///[^?# ]*|https://[^/?# ]+/[^?# ]*[.](tar[.]gz|tgz)([?][^# ]*)?)$"

SHA256_RE = "^[a-f0-9]{64}$"

RelativePath = Annotated[
    str,
    Field(max_length=512),
    Cel(
        "!self.startsWith('/') && !('/' + self + '/').contains('/../')",
        "must be a relative path inside the bundle (no leading '/', no '..')",
        lambda v: not v.startswith("/") and "/../" not in f"/{v}/",
    ),
]


class ManifestsSource(ApiModel):
    """Where the agent takes the whole stack bundle from, instead of the one it ships."""

    cel_rules = (
        Cel(
            f"self.uri.matches('{MANIFESTS_URI_RE}')",
            "devFlags.manifests.uri must be a file:/// path or an https:// URL of a"
            " .tar.gz or .tgz tarball",
            lambda m: re.fullmatch(MANIFESTS_URI_RE, m.uri) is not None,
            field_path=".uri",
        ),
        Cel(
            "!self.uri.startsWith('https://') || has(self.sha256)",
            "devFlags.manifests.sha256 is required with an https:// uri: the sha256 digest"
            " (64 lowercase hex characters) of the tarball, checked before it is used",
            lambda m: not m.uri.startswith("https://") or m.sha256 is not None,
            field_path=".sha256",
            reason="FieldValueRequired",
        ),
    )

    uri: Annotated[str, Field(min_length=1, max_length=2048)]
    """file:///path (a directory or tarball on the agent's filesystem) or
    https://host/path.tar.gz (a tarball the agent downloads; needs sha256)."""
    sha256: Annotated[str, Field(min_length=64, max_length=64, pattern=SHA256_RE)] | None = None
    """sha256 digest of the tarball (64 lowercase hex characters). Required with an https uri;
    with a file:/// tarball it is checked when given. The agent uses nothing it did not
    verify."""
    context_dir: RelativePath | None = None
    """Directory inside the bundle that holds the manifests (default: the bundle's root)."""
    source_path: RelativePath | None = None
    """Path inside contextDir of the overlay to render (default: contextDir itself)."""


class DevFlags(ApiModel):
    """Development settings; not for production use."""

    images: Annotated[
        dict[str, ImageReference],
        Field(max_length=c.MAX_COMPONENTS),
        deployment_keys("devFlags.images"),
    ] = Field(default_factory=dict)
    """Container image per Deployment name, replacing the bundle's image for every
    container of that Deployment."""
    manifests: ManifestsSource | None = None
    """Replace the whole stack bundle."""


# Platform options --------------------------------------------------------------------------------


DEFAULT_PROMETHEUS_NAMESPACE = "monitoring"
DEFAULT_PROMETHEUS_SERVICE_ACCOUNT = "prometheus-k8s"


class ServiceAccountRef(ApiModel):
    """A ServiceAccount on the managed cluster."""

    namespace: DnsLabel
    """Namespace of the ServiceAccount."""
    name: DnsSubdomain
    """Name of the ServiceAccount."""


class Monitoring(ApiModel):
    """Prometheus monitoring of the serving stack."""

    enabled: bool = False
    """Create ServiceMonitors for the stack and the agent (when the CRD exists) and let
    Prometheus read the serving namespaces (a RoleBinding to ClusterRole view)."""
    prometheus_service_account: ServiceAccountRef | None = None
    """ServiceAccount Prometheus runs as on the clusters: the subject of the RoleBinding in
    each serving namespace. Unset means monitoring/prometheus-k8s (kube-prometheus); on
    OpenShift use openshift-monitoring/prometheus-k8s (platform monitoring) or
    openshift-user-workload-monitoring/prometheus-user-workload (user workload monitoring)."""

    def prometheus_subject(self) -> tuple[str, str]:
        """(namespace, name) of the ServiceAccount the RoleBinding names."""
        ref = self.prometheus_service_account
        if ref is None:
            return DEFAULT_PROMETHEUS_NAMESPACE, DEFAULT_PROMETHEUS_SERVICE_ACCOUNT
        return ref.namespace, ref.name


class KServeOptions(ApiModel):
    """Options of the KServe platform."""

    deployment_mode: Literal["Standard", "RawDeployment"] = "Standard"
    """Default deployment mode of InferenceServices. RawDeployment is the older name of
    Standard (plain Deployments and Services, no Knative); both are accepted."""
    service_cluster_ip_none: bool = Field(default=True, alias="serviceClusterIPNone")
    """Create headless predictor Services (clusterIP: None)."""
    built_in_runtimes: bool = True
    """Install KServe's built-in runtimes (upstream's ClusterServingRuntimes, e.g.
    kserve-sklearnserver, kserve-xgbserver, kserve-tritonserver, kserve-huggingfaceserver,
    usable from every serving namespace), so an InferenceService that names only its
    modelFormat finds a runtime, as in KServe's own samples. false removes the ones the agent
    installed; runtimes created by others are never changed or removed."""


class SecretKeySelector(ApiModel):
    """A key of a Secret on the managed cluster."""

    name: Annotated[str, Field(min_length=1, max_length=253)]
    """Name of the Secret, in the namespace the platform is installed in."""
    key: SecretKey = "etcd_connection"
    """Key of the Secret holding the ModelMesh etcd connection JSON."""


class ExternalEtcd(ApiModel):
    """An etcd that already exists."""

    secret_ref: SecretKeySelector
    """Secret on each managed cluster holding the ModelMesh etcd connection JSON
    (endpoints, root_prefix, credentials)."""


class EtcdConnection(ApiModel):
    """The etcd ModelMesh keeps its state in: an external one, or one the agent deploys."""

    cel_rules = (
        Cel(
            "has(self.external) != (has(self.builtIn) && self.builtIn)",
            "modelmesh.etcd: set exactly one of external or builtIn: true",
            lambda e: (e.external is not None) != bool(e.built_in),
        ),
    )

    external: ExternalEtcd | None = None
    """Use an existing etcd."""
    built_in: bool | None = None
    """Deploy a small single-member etcd next to the ModelMesh controller."""


class ModelMeshOptions(ApiModel):
    """Options of the ModelMesh platform."""

    pods_per_runtime: Annotated[int, Field(ge=1, le=10)] = 2
    """Replicas of each ServingRuntime's Deployment."""
    etcd: EtcdConnection | None = None
    """Where ModelMesh keeps its state; unset means the built-in etcd."""
    built_in_runtimes: bool = True
    """Install ModelMesh Serving's built-in runtimes (ClusterServingRuntimes mlserver-1.x,
    triton-2.x, ovms-1.x and torchserve-0.x, usable from every serving namespace), as
    upstream's installer does. false removes the ones the agent installed; runtimes created
    by others are never changed or removed."""


# The settings ------------------------------------------------------------------------------------


class PlatformSettings(ApiModel):
    """What a serving platform on one managed cluster should look like."""

    cel_rules = (
        Cel(
            "!has(self.kserve) || self.platform == 'KServe'",
            "spec.kserve is only allowed when spec.platform is KServe",
            lambda s: s.kserve is None or s.platform == "KServe",
            field_path=".kserve",
            reason="FieldValueForbidden",
        ),
        Cel(
            "!has(self.modelmesh) || self.platform == 'ModelMesh'",
            "spec.modelmesh is only allowed when spec.platform is ModelMesh",
            lambda s: s.modelmesh is None or s.platform == "ModelMesh",
            field_path=".modelmesh",
            reason="FieldValueForbidden",
        ),
    )

    platform: Platform = "KServe"
    """Serving stack: KServe (Standard deployment mode, no Knative) or ModelMesh Serving
    (deprecated: archived upstream, its last release is v0.12.0)."""
    version: Annotated[str, Field(max_length=32, pattern=r"^v[0-9]+\.[0-9]+\.[0-9]+$")] | None = (
        None)
    """Release of the stack to install (e.g. v0.17.0); default: the newest the agent
    carries (KServe v0.20.0, ModelMesh v0.12.0). Changing it upgrades or downgrades each
    cluster's stack in place; a release the agent has no bundle of is refused on the cluster
    (reason VersionNotCarried, naming those it has)."""
    management_state: ManagementState = "Managed"
    """Managed installs and keeps the stack (refused, changing nothing, where another operator
    such as Open Data Hub manages it: reason OwnedByAnotherOperator); Unmanaged serves with
    the stack already on the cluster, whoever installed it, and installs and changes nothing
    of it (the agent checks it is there, of a supported version and available, and still
    manages serving namespaces and credentials; runtimes and models go to it as usual);
    Removed uninstalls what the agent installed."""
    profile: Profile = "Default"
    """How the stack is sized. Default keeps each release's own settings. SingleNode is for
    clusters of one node (single-node OpenShift): one replica per controller, no pod
    anti-affinity, requests of the stack's containers at most 50m CPU and 64Mi memory, at most
    100m CPU and 256Mi for the models KServe runs without requests of their own (the built-in
    runtimes' requests and KServe's default), smaller sidecars, one pod per ModelMesh
    runtime. What spec.components (replicas,
    autoscaling, resources) and spec.modelmesh.podsPerRuntime set explicitly wins."""
    components: Annotated[
        dict[str, ComponentSpec],
        Field(max_length=c.MAX_COMPONENTS),
        deployment_keys("components"),
    ] = Field(default_factory=dict)
    """Settings per Deployment of the stack, keyed by Deployment name
    (e.g. kserve-controller-manager, modelmesh-controller)."""
    dev_flags: DevFlags | None = None
    """Development settings: images per Deployment, a different bundle."""
    serving_namespaces: Annotated[list[DnsLabel], set_list(c.MAX_NAMESPACES), UniqueList] = Field(
        default_factory=list
    )
    """Namespaces to enable for serving on the clusters (created when missing; labelled
    modelmesh-enabled for ModelMesh)."""
    monitoring: Monitoring | None = None
    """Prometheus monitoring."""
    kserve: KServeOptions | None = None
    """KServe options (platform KServe only)."""
    modelmesh: ModelMeshOptions | None = None
    """ModelMesh options (platform ModelMesh only)."""
