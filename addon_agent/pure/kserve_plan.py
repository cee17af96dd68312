"""KServe's part of a plan: its configuration ConfigMap and its monitors (pure).

The generic planner (:func:`addon_agent.pure.planning.plan`) calls :data:`PLANNING`'s hooks.
"""

from __future__ import annotations

import re

from addon_agent.pure import profiles
from addon_agent.pure.manifests import Obj, edit_json, json_of
from addon_agent.stacks import Stack
from addon_api import constants as c
from addon_api.platform import KServeOptions
from addon_api.spoke import ServingPlatformSpec

KSERVE_CONFIG = "inferenceservice-config"
SA_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


class KServePlanning:
    """The hooks of :class:`addon_agent.pure.planning.StackPlanning` for KServe."""

    def runtimes_wanted(self, spec: ServingPlatformSpec) -> bool:
        """``kserve.builtInRuntimes`` (default: true)."""
        return (spec.kserve or KServeOptions()).built_in_runtimes

    def extras(self, spec: ServingPlatformSpec, stack: Stack) -> list[Obj]:
        """Nothing beyond the bundle."""
        return []

    def configure(self, obj: Obj, spec: ServingPlatformSpec) -> None:
        """``inferenceservice-config``: headless Standard mode, sized by the profile."""
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == KSERVE_CONFIG:
            configure_kserve(obj, spec)
            if profiles.single_node(spec):
                profiles.fit_kserve_config(obj.setdefault("data", {}))

    def monitors(self, spec: ServingPlatformSpec, stack: Stack, objects: list[Obj]) -> list[Obj]:
        """The controller's ServiceMonitor (its Service in the bundle), the servers' PodMonitor."""
        monitor = stack_service_monitor(stack, objects)
        return [*([monitor] if monitor is not None else []),
                kserve_predictor_pod_monitor(stack, spec.serving_namespaces)]


PLANNING = KServePlanning()


def configure_kserve(config_map: Obj, spec: ServingPlatformSpec) -> Obj:
    """Headless Standard mode in ``inferenceservice-config``."""
    options = spec.kserve
    mode = options.deployment_mode if options else "Standard"
    headless = options.service_cluster_ip_none if options else True
    data = config_map.setdefault("data", {})
    edit_json(data, "deploy", {"defaultDeploymentMode": mode})
    edit_json(data, "ingress", {"disableIngressCreation": True})
    edit_json(data, "service", {"serviceClusterIPNone": headless})
    keep_off_pods(data)
    return config_map


def keep_off_pods(data: dict[str, str]) -> None:
    """KServe told not to copy the agent's verdict annotation onto predictor pods.

    Added to ``inferenceService.serviceAnnotationDisallowedList`` (KServe adds its own
    defaults to the list); without it each change of verdict would restart the pods.
    """
    listed = json_of(data, "inferenceService").get("serviceAnnotationDisallowedList")
    listed = [str(x) for x in listed] if isinstance(listed, list) else []
    if c.ANNOTATION_DATAPLANE not in listed:
        listed.append(c.ANNOTATION_DATAPLANE)
    edit_json(data, "inferenceService", {"serviceAnnotationDisallowedList": listed})


def stack_service_monitor(stack: Stack, objects: list[Obj]) -> Obj | None:
    """A ServiceMonitor for the stack's metrics Service, if the bundle has one."""
    for obj in objects:
        meta = obj["metadata"]
        if obj["kind"] == "Service" and meta["name"] == stack.metrics_service:
            ports = obj["spec"].get("ports", [])
            port = ports[0].get("name", "https") if ports else "https"
            return {
                "apiVersion": "monitoring.coreos.com/v1",
                "kind": "ServiceMonitor",
                "metadata": {
                    "name": f"{stack.controller}-metrics",
                    "namespace": meta.get("namespace", ""),
                },
                "spec": {
                    "selector": {"matchLabels": obj["spec"].get("selector", {})},
                    "endpoints": [
                        {
                            "port": port,
                            "scheme": "https",
                            "bearerTokenFile": SA_TOKEN,
                            "tlsConfig": {"insecureSkipVerify": True},
                        }
                    ],
                },
            }
    return None


PREDICTOR_MONITOR = "kserve-predictors"
ISVC_API = "serving.kserve.io/v1beta1"
"""API version of KServe's InferenceService the agent reads."""
ISVC_LABEL = "serving.kserve.io/inferenceservice"
"""Label KServe puts on every pod of an InferenceService (value: its name)."""
MODEL_CONTAINER = "kserve-container"
"""Name KServe gives the model server's container in a predictor pod."""
PROMETHEUS_PORT_ANNOTATION = "prometheus.kserve.io/port"
PROMETHEUS_PATH_ANNOTATION = "prometheus.kserve.io/path"
"""Where a serving runtime's server exports its metrics: KServe's built-in runtimes declare
both in their ``spec.annotations``, which KServe copies to the predictor pods; a predictor's
own annotations override them (e.g. ``"8082"`` for MLServer, which serves its metrics on a
port of their own)."""


def _meta_label(annotation: str, kind: str = "annotation") -> str:
    """The name Prometheus' Kubernetes discovery gives a pod annotation or label."""
    return f"__meta_kubernetes_pod_{kind}_" + re.sub(r"[^a-zA-Z0-9_]", "_", annotation)


def kserve_predictor_pod_monitor(stack: Stack, namespaces: list[str]) -> Obj:
    """A PodMonitor for the model servers of KServe's predictor pods in the serving namespaces.

    It scrapes the model container of every InferenceService pod on the port and path its
    pod's :data:`PROMETHEUS_PORT_ANNOTATION` and :data:`PROMETHEUS_PATH_ANNOTATION` name
    (pods without a port annotation are not scraped), and labels each series with the
    InferenceService (``inferenceservice``) besides prometheus-operator's ``namespace``,
    ``pod`` and ``container``: what the hub's dashboard, alerts and metric gates select on.
    """
    port, path = _meta_label(PROMETHEUS_PORT_ANNOTATION), _meta_label(PROMETHEUS_PATH_ANNOTATION)
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": PREDICTOR_MONITOR, "namespace": stack.namespace},
        "spec": {
            "selector": {"matchExpressions": [{"key": ISVC_LABEL, "operator": "Exists"}]},
            "namespaceSelector": {"matchNames": list(namespaces)} if namespaces else {"any": True},
            "podMetricsEndpoints": [
                {
                    "path": "/metrics",
                    "relabelings": [
                        {"action": "keep", "sourceLabels": ["__meta_kubernetes_pod_container_name"],
                         "regex": MODEL_CONTAINER},
                        {"action": "keep", "sourceLabels": [port], "regex": "[0-9]+"},
                        {"action": "replace", "sourceLabels": ["__address__", port],
                         "regex": "(.+?)(?::[0-9]+)?;([0-9]+)", "replacement": "$1:$2",
                         "targetLabel": "__address__"},
                        {"action": "replace", "sourceLabels": [path], "regex": "(/.*)",
                         "replacement": "$1", "targetLabel": "__metrics_path__"},
                        {"action": "replace", "sourceLabels": [_meta_label(ISVC_LABEL, "label")],
                         "targetLabel": "inferenceservice"},
                    ],
                }
            ],
        },
    }
