"""Pure install planning: bundle objects + ServingPlatform spec -> ordered desired objects.

Nothing here talks to a cluster; :mod:`addon_agent.io.planner` and :mod:`addon_agent.io.applier`
do the I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import yaml

from addon_agent import labels as lb
from addon_agent.pure import kserve_plan, modelmesh_plan, pod_security, profiles
from addon_agent.pure.manifests import Obj, b64
from addon_agent.stacks import KSERVE, MODELMESH, Stack
from addon_api import constants as c
from addon_api.platform import ComponentSpec
from addon_api.spoke import ServingPlatformSpec

CLUSTER_SCOPED_KINDS = frozenset(
    {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "PriorityClass",
        "StorageClass",
        "IngressClass",
    }
)
WEBHOOK_KINDS = frozenset({"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"})
POD_OWNERS = frozenset({"Deployment", "StatefulSet", "DaemonSet"})
"""Kinds whose pod template the agent makes Pod Security ``restricted``."""
SERVING_GROUP = "serving.kserve.io"
RUNTIME_KINDS = frozenset({"ServingRuntime", "ClusterServingRuntime"})
CERT_MANAGER_GROUP = "cert-manager.io"
MAX_ACTIVE_REPLICAS = 2


@dataclass(frozen=True)
class ClusterFacts:
    """What the agent found on the cluster that changes the plan."""

    cert_manager: bool = False
    """cert-manager's Certificate CRD is served."""
    prometheus_operator: bool = False
    """prometheus-operator's ServiceMonitor CRD is served."""
    service_ca: bool = False
    """OpenShift's service CA operator runs (its ServiceCA CRD is served): webhook serving
    certificates come from it when cert-manager is not there (:func:`use_service_ca`)."""
    assigns_users: bool = False
    """OpenShift's SecurityContextConstraints CRD is served: its ``restricted-v2`` gives each
    pod a user from the namespace's range and refuses another, so the serving runtimes the
    agent ships name no ``runAsUser`` (:func:`addon_agent.pure.pod_security.harden_runtime`)."""


@dataclass(frozen=True)
class CertRequest:
    """A webhook serving certificate the agent must provide (no cert-manager)."""

    namespace: str
    secret_name: str
    dns_names: tuple[str, ...]


@dataclass
class Plan:
    """The ordered desired objects of one stack and what the status needs to know."""

    stack: Stack
    objects: list[Obj]
    warnings: list[str] = field(default_factory=list)
    certificates: list[CertRequest] = field(default_factory=list)
    runtime_errors: list[str] = field(default_factory=list)
    """Serving runtimes the last install could not apply (filled in by the applier)."""
    webhook_unreachable: bool = False
    """Some of them because the stack's admission webhook could not be called (a 5xx, as
    while its controller restarts), not because it refused them: worth trying again soon."""
    conflicts: list[str] = field(default_factory=list)
    """``Kind ns/name`` of objects of the plan that exist and are someone else's: not taken
    over (filled in by the applier); the stack is not Ready while there are any."""
    runtime_conflicts: list[str] = field(default_factory=list)
    """The same for serving runtimes (optional: one of that name serves anyway)."""

    def controllers(self) -> list[tuple[str, str]]:
        """(namespace, name) of every Deployment in the plan."""
        return [
            (o["metadata"].get("namespace", ""), o["metadata"]["name"])
            for o in self.objects
            if o["kind"] == "Deployment"
        ]

    def crd_names(self) -> list[str]:
        """Names of the CRDs in the plan."""
        return [
            o["metadata"]["name"] for o in self.objects if o["kind"] == "CustomResourceDefinition"
        ]


def parse_bundle(text: str) -> list[Obj]:
    """The Kubernetes objects of a multi-document YAML text (empty documents dropped)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml is ~6x faster
    return bundle_objects(yaml.load_all(text, Loader=loader))


def bundle_objects(documents: Iterable[Any]) -> list[Obj]:
    """The Kubernetes objects of a bundle's parsed YAML documents.

    Empty documents are dropped; a ``List`` gives its items in its place.
    """
    out: list[Obj] = []
    for doc in documents:
        if not doc:
            continue
        if doc.get("kind") == "List":
            out.extend(item for item in doc.get("items", []) if item)
        else:
            out.append(doc)
    return out


def group_of(obj: Obj) -> str:
    """API group of an object ("" for the core group)."""
    api_version = str(obj.get("apiVersion", ""))
    return api_version.split("/")[0] if "/" in api_version else ""


def key_of(obj: Obj) -> tuple[str, str, str, str]:
    """(group, kind, namespace, name): identity of an object."""
    meta = obj.get("metadata", {})
    return (group_of(obj), obj["kind"], meta.get("namespace", ""), meta["name"])


def is_runtime(obj: Obj) -> bool:
    """Whether ``obj`` is a (Cluster)ServingRuntime."""
    return group_of(obj) == SERVING_GROUP and obj.get("kind") in RUNTIME_KINDS


UPGRADE_FIRST = frozenset({
    "CustomResourceDefinition", "Namespace", "ServiceAccount", "Secret", "Service",
    "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Certificate", "Issuer",
    "Deployment", "StatefulSet", "DaemonSet",
})
"""What a version change applies before the configuration: the CRDs, then the controllers
with what they need to start (identity, RBAC, Services, certificates)."""


def upgrade_first(obj: Obj) -> bool:
    """Whether a version change applies ``obj`` before its controllers roll out.

    The rest (ConfigMaps, webhooks, serving runtimes, storage containers, NetworkPolicies:
    the configuration) follows once the controllers run the new version.
    """
    return str(obj.get("kind")) in UPGRADE_FIRST


def version_of(obj: Obj | None, platform: str) -> str:
    """The stack version an object of the agent's says it came from.

    "" when the object is missing, not the agent's or of another platform.
    """
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    if not lb.is_ours(obj or {}) or labels.get(lb.LABEL_PLATFORM) != platform:
        return ""
    return str(labels.get(lb.LABEL_STACK_VERSION) or "")


def phase_of(obj: Obj) -> int:
    """Apply order: CRDs, namespaces, config/RBAC/custom resources, webhooks, controllers.

    Serving runtimes are custom resources of phase 2: on a first install they are created
    before the stack's admission webhook for them is configured (upstream's installer waits
    for the controller instead); later updates go through that webhook.
    """
    kind = obj["kind"]
    if kind == "CustomResourceDefinition":
        return 0
    if kind == "Namespace":
        return 1
    if kind in WEBHOOK_KINDS:
        return 3
    if kind in ("Deployment", "StatefulSet", "DaemonSet"):
        return 4
    if kind in ("HorizontalPodAutoscaler", "ServiceMonitor", "PodMonitor"):
        return 5
    return 2


def order(objects: Iterable[Obj]) -> list[Obj]:
    """Objects sorted by apply phase (stable within a phase)."""
    return sorted(objects, key=phase_of)


def _crd_scopes(objects: Iterable[Obj]) -> dict[tuple[str, str], str]:
    return {
        (o["spec"]["group"], o["spec"]["names"]["kind"]): o["spec"].get("scope", "Namespaced")
        for o in objects
        if o["kind"] == "CustomResourceDefinition"
    }


def normalise_scope(objects: list[Obj]) -> list[Obj]:
    """Drop ``metadata.namespace`` from cluster-scoped objects (kustomize adds it to all)."""
    scopes = _crd_scopes(objects)
    for obj in objects:
        cluster = obj["kind"] in CLUSTER_SCOPED_KINDS or (
            scopes.get((group_of(obj), obj["kind"])) == "Cluster"
        )
        if cluster:
            obj.get("metadata", {}).pop("namespace", None)
    return objects


def label(obj: Obj, stack: Stack) -> Obj:
    """Put the agent's labels on an object (not on its pod template)."""
    meta = obj.setdefault("metadata", {})
    meta.setdefault("labels", {})
    meta["labels"] = {
        **(meta["labels"] or {}),
        **lb.ours(),
        lb.LABEL_PLATFORM: stack.platform,
        lb.LABEL_STACK_VERSION: stack.version,
    }
    return obj


# Component settings ------------------------------------------------------------------------------


def apply_component(deployment: Obj, spec: ComponentSpec | None, image: str | None) -> Obj:
    """Replicas, resources and image of one Deployment (autoscaling leaves replicas out)."""
    pod = deployment["spec"]["template"]["spec"]
    containers = pod.get("containers", [])
    if image:
        for container in containers:
            container["image"] = image
    if spec is None:
        return deployment
    if spec.autoscaling is not None:
        deployment["spec"].pop("replicas", None)
    elif spec.replicas is not None:
        deployment["spec"]["replicas"] = spec.replicas
    if spec.resources is not None:
        resources = spec.resources.to_dict()
        for container in containers:
            container["resources"] = copy.deepcopy(resources)
    if deployment["metadata"].get("name"):
        deployment["metadata"].setdefault("labels", {})[c.LABEL_COMPONENT] = deployment["metadata"][
            "name"
        ]
    return deployment


def hpa_for(deployment: Obj, spec: ComponentSpec) -> Obj:
    """An autoscaling/v2 HorizontalPodAutoscaler for ``deployment``."""
    assert spec.autoscaling is not None
    auto = spec.autoscaling
    metrics = [m.to_dict() for m in auto.metrics] or [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80},
            },
        }
    ]
    name = deployment["metadata"]["name"]
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": name,
            "namespace": deployment["metadata"].get("namespace", ""),
            "labels": {c.LABEL_COMPONENT: name},
        },
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": auto.min_replicas,
            "maxReplicas": auto.max_replicas,
            "metrics": metrics,
        },
    }


# Per stack ---------------------------------------------------------------------------------------


class StackPlanning(Protocol):
    """What one stack adds to the generic plan (one module per stack implements it)."""

    def runtimes_wanted(self, spec: ServingPlatformSpec) -> bool:
        """Whether the bundle's built-in serving runtimes stay in the plan."""

    def extras(self, spec: ServingPlatformSpec, stack: Stack) -> list[Obj]:
        """Objects the stack adds to its bundle (before anything is planned)."""

    def configure(self, obj: Obj, spec: ServingPlatformSpec) -> None:
        """Edit one object of the plan for ``spec`` (after the generic edits)."""

    def monitors(self, spec: ServingPlatformSpec, stack: Stack, objects: list[Obj]) -> list[Obj]:
        """The stack's ServiceMonitors/PodMonitors (monitoring on, prometheus-operator there)."""


STACK_PLANNING: Final[dict[str, StackPlanning]] = {
    KSERVE.platform: kserve_plan.PLANNING,
    MODELMESH.platform: modelmesh_plan.PLANNING,
}
"""Each stack's part of the plan, by platform: :mod:`addon_agent.pure.kserve_plan`,
:mod:`addon_agent.pure.modelmesh_plan`."""


def runtimes_wanted(spec: ServingPlatformSpec, stack: Stack) -> bool:
    """Whether the serving runtimes of the bundle are installed (``builtInRuntimes``)."""
    return STACK_PLANNING[stack.platform].runtimes_wanted(spec)


# The agent's own monitoring ----------------------------------------------------------------------


AGENT_APP = "model-serving-agent"
AGENT_METRICS_SERVICE = "model-serving-agent-metrics"


def agent_monitoring(namespace: str, port: int) -> list[Obj]:
    """A Service over the agent's pods' /metrics port and a ServiceMonitor scraping it."""
    selector = {"app.kubernetes.io/name": AGENT_APP}
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": AGENT_METRICS_SERVICE, "namespace": namespace, "labels": selector},
            "spec": {
                "selector": selector,
                "ports": [{"name": "metrics", "port": port, "targetPort": port}],
            },
        },
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": {"name": AGENT_APP, "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": selector},
                "endpoints": [{"port": "metrics", "path": "/metrics"}],
            },
        },
    ]


# The plan ----------------------------------------------------------------------------------------


def plan(
    bundle: list[Obj],
    spec: ServingPlatformSpec,
    stack: Stack,
    facts: ClusterFacts,
    agent_metrics: tuple[str, int] | None = None,
) -> Plan:
    """Ordered desired objects of ``stack`` configured by ``spec`` on a cluster with ``facts``.

    What every stack gets is done here; what is one stack's is its :class:`StackPlanning`
    (:data:`STACK_PLANNING`): its extra objects, whether its built-in runtimes stay, its
    edits of the bundle's objects (after the generic ones) and its monitors.
    """
    own = STACK_PLANNING[stack.platform]
    objects = normalise_scope(copy.deepcopy(bundle))
    result = Plan(stack=stack, objects=[])
    images = spec.dev_flags.images if spec.dev_flags else {}
    objects += own.extras(spec, stack)
    if not own.runtimes_wanted(spec):
        objects = [o for o in objects if not is_runtime(o)]
    extra: list[Obj] = []
    served: list[CertRequest] = []
    for obj in objects:
        meta = obj.setdefault("metadata", {})
        if group_of(obj) == CERT_MANAGER_GROUP and not facts.cert_manager:
            if obj["kind"] == "Certificate":
                request = CertRequest(
                    namespace=meta.get("namespace", stack.namespace),
                    secret_name=obj["spec"]["secretName"],
                    dns_names=tuple(obj["spec"].get("dnsNames") or [obj["spec"]["commonName"]]),
                )
                (served if facts.service_ca else result.certificates).append(request)
            continue
        if is_runtime(obj):
            pod_security.harden_runtime(obj, assigns_users=facts.assigns_users)
            if profiles.single_node(spec):
                profiles.fit_runtime(obj)
        if obj["kind"] in POD_OWNERS:
            pod_security.restrict(obj["spec"]["template"]["spec"])
            if profiles.single_node(spec):
                profiles.fit_workload(obj, spec.components.get(meta.get("name", "")))
        if obj["kind"] == "Namespace":
            meta["labels"] = {**(meta.get("labels") or {}), **pod_security.NAMESPACE_LABELS}
        if obj["kind"] == "Deployment":
            name = meta["name"]
            component = spec.components.get(name)
            apply_component(obj, component, images.get(name))
            if component is not None and component.autoscaling is not None:
                extra.append(hpa_for(obj, component))
            replicas = obj["spec"].get("replicas")
            if component is not None and component.autoscaling is not None:
                replicas = component.autoscaling.max_replicas
            if isinstance(replicas, int) and replicas > MAX_ACTIVE_REPLICAS:
                result.warnings.append(
                    f"{name} may run {replicas} replicas; with leader election only one is active"
                )
        own.configure(obj, spec)
        result.objects.append(obj)
    monitoring = spec.monitoring is not None and spec.monitoring.enabled
    if monitoring and facts.prometheus_operator:
        extra += own.monitors(spec, stack, result.objects)
        if agent_metrics is not None:
            extra += agent_monitoring(*agent_metrics)
    if served:
        result.objects = use_service_ca(result.objects, served)
    result.objects = order(label(o, stack) for o in result.objects + extra)
    return result


SERVING_CERT_ANNOTATION = "service.beta.openshift.io/serving-cert-secret-name"
INJECT_CA_ANNOTATION = "service.beta.openshift.io/inject-cabundle"


def use_service_ca(objects: list[Obj], requests: list[CertRequest]) -> list[Obj]:
    """Webhook certificates from OpenShift's service CA instead of cert-manager or the agent.

    Each certificate's Service (the first DNS name, ``NAME.NAMESPACE.svc``) asks the service
    CA for a serving certificate in the certificate's Secret (which the service CA creates, so
    a Secret of that name in the bundle is left out); every webhook configuration and CRD
    with a conversion webhook asks for the service CA's bundle to be injected.
    """
    wanted: dict[tuple[str, str], str] = {}
    for request in requests:
        name, _, rest = request.dns_names[0].partition(".")
        namespace = rest.split(".", 1)[0] or request.namespace
        wanted[(namespace, name)] = request.secret_name
    secrets = {(r.namespace, r.secret_name) for r in requests}
    out: list[Obj] = []
    for obj in objects:
        meta = obj.setdefault("metadata", {})
        where = (meta.get("namespace", ""), meta.get("name", ""))
        if obj["kind"] == "Secret" and where in secrets:
            continue
        if obj["kind"] == "Service" and where in wanted:
            meta.setdefault("annotations", {})[SERVING_CERT_ANNOTATION] = wanted[where]
        if obj["kind"] in WEBHOOK_KINDS or (
                obj["kind"] == "CustomResourceDefinition"
                and ((obj.get("spec") or {}).get("conversion") or {}).get("strategy") == "Webhook"):
            meta.setdefault("annotations", {})[INJECT_CA_ANNOTATION] = "true"
        out.append(obj)
    return out


def inject_ca_bundle(objects: list[Obj], ca_bundle_b64: str) -> list[Obj]:
    """Set ``caBundle`` on every webhook and CRD conversion webhook of the plan."""
    for obj in objects:
        if obj["kind"] in WEBHOOK_KINDS:
            for hook in obj.get("webhooks", []):
                hook.setdefault("clientConfig", {})["caBundle"] = ca_bundle_b64
        elif obj["kind"] == "CustomResourceDefinition":
            conversion = obj.get("spec", {}).get("conversion") or {}
            webhook = conversion.get("webhook")
            if conversion.get("strategy") == "Webhook" and webhook:
                webhook.setdefault("clientConfig", {})["caBundle"] = ca_bundle_b64
    return objects


def point_webhooks_at(objects: list[Obj], base_url: str, ca_bundle_b64: str) -> list[Obj]:
    """Make every Service-backed webhook (and CRD conversion webhook) call ``base_url``.

    For a stack whose controllers run outside the cluster: the Service path is kept and
    appended to ``base_url``; ``caBundle`` is the external server's CA.
    """

    def repoint(client_config: dict[str, Any]) -> None:
        service = client_config.get("service")
        if service is None:
            return
        path = service.get("path") or "/"
        client_config.clear()
        client_config.update({"url": base_url.rstrip("/") + path, "caBundle": ca_bundle_b64})

    for obj in objects:
        if obj["kind"] in WEBHOOK_KINDS:
            for hook in obj.get("webhooks", []):
                repoint(hook.setdefault("clientConfig", {}))
        elif obj["kind"] == "CustomResourceDefinition":
            conversion = obj.get("spec", {}).get("conversion") or {}
            webhook = conversion.get("webhook")
            if conversion.get("strategy") == "Webhook" and webhook:
                repoint(webhook.setdefault("clientConfig", {}))
    return objects


def webhook_cert_secret(request: CertRequest, cert_pem: str, key_pem: str, ca_pem: str) -> Obj:
    """The TLS Secret a webhook server mounts (tls.crt, tls.key, ca.crt)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": request.secret_name, "namespace": request.namespace},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": b64(cert_pem), "tls.key": b64(key_pem), "ca.crt": b64(ca_pem)},
    }
