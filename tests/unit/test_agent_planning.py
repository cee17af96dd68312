from __future__ import annotations

import copy
import json
from typing import Any

from addon_agent.pure import kserve_plan, planning
from addon_agent.pure.planning import ClusterFacts
from addon_agent.stacks import KSERVE, MODELMESH
from addon_api.spoke import ServingPlatformSpec

BUNDLE = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: ctrl, namespace: kserve}
spec:
  replicas: 1
  selector: {matchLabels: {app: ctrl}}
  template:
    metadata: {labels: {app: ctrl}}
    spec:
      containers: [{name: manager, image: kserve/ctrl:v1}, {name: proxy, image: proxy:v1}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: hooks, namespace: kserve}
webhooks: [{name: a, clientConfig: {service: {name: svc, namespace: kserve}}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: inferenceservice-config, namespace: kserve}
data:
  deploy: '{"defaultDeploymentMode": "Serverless"}'
  ingress: '{"ingressClassName": "istio", "disableIngressCreation": false}'
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: serving-cert, namespace: kserve}
spec: {secretName: webhook-cert, dnsNames: [svc.kserve.svc]}
---
apiVersion: v1
kind: Namespace
metadata: {name: kserve}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.serving.kserve.io}
spec:
  group: serving.kserve.io
  scope: Cluster
  names: {kind: Thing, plural: things}
---
apiVersion: serving.kserve.io/v1alpha1
kind: Thing
metadata: {name: default, namespace: kserve}
"""


def spec(**kw: Any) -> ServingPlatformSpec:
    return ServingPlatformSpec.model_validate({"platform": "KServe", **kw})


def make(s: ServingPlatformSpec, facts: ClusterFacts | None = None) -> planning.Plan:
    return planning.plan(planning.parse_bundle(BUNDLE), s, KSERVE, facts or ClusterFacts())


def by_kind(p: planning.Plan, kind: str) -> list[dict[str, Any]]:
    return [o for o in p.objects if o["kind"] == kind]


def test_order_crds_first_then_namespaces_config_webhooks_controllers() -> None:
    kinds = [o["kind"] for o in make(spec()).objects]
    assert kinds[0] == "CustomResourceDefinition"
    assert kinds[1] == "Namespace"
    assert kinds.index("ValidatingWebhookConfiguration") < kinds.index("Deployment")
    assert kinds.index("ConfigMap") < kinds.index("ValidatingWebhookConfiguration")


def test_cluster_scoped_objects_lose_their_namespace() -> None:
    p = make(spec())
    assert "namespace" not in by_kind(p, "Thing")[0]["metadata"]
    assert "namespace" not in by_kind(p, "ValidatingWebhookConfiguration")[0]["metadata"]


def test_every_object_is_labelled() -> None:
    for obj in make(spec()).objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "model-serving-addon"
        assert labels["modelserving.opendatahub.io/platform"] == "KServe"


def test_component_settings() -> None:
    res = {"requests": {"cpu": "10m"}, "limits": {"cpu": "1"}}
    p = make(
        spec(
            components={"ctrl": {"replicas": 3, "resources": res}},
            devFlags={"images": {"ctrl": "example.com/x:1"}},
        )
    )
    dep = by_kind(p, "Deployment")[0]
    assert dep["spec"]["replicas"] == 3
    for container in dep["spec"]["template"]["spec"]["containers"]:
        assert container["image"] == "example.com/x:1"
        assert container["resources"] == res
    assert p.warnings and "only one is active" in p.warnings[0]


def test_autoscaling_adds_hpa_and_drops_replicas() -> None:
    p = make(spec(components={"ctrl": {"autoscaling": {"minReplicas": 1, "maxReplicas": 2}}}))
    dep = by_kind(p, "Deployment")[0]
    assert "replicas" not in dep["spec"]
    hpa = by_kind(p, "HorizontalPodAutoscaler")[0]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"]["name"] == "ctrl"
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    assert not p.warnings


def test_inferenceservice_config_edits_keep_other_keys() -> None:
    p = make(spec(kserve={"deploymentMode": "RawDeployment", "serviceClusterIPNone": False}))
    data = by_kind(p, "ConfigMap")[0]["data"]
    assert json.loads(data["deploy"]) == {"defaultDeploymentMode": "RawDeployment"}
    ingress = json.loads(data["ingress"])
    assert ingress == {"ingressClassName": "istio", "disableIngressCreation": True}
    assert json.loads(data["service"]) == {"serviceClusterIPNone": False}


def test_without_cert_manager_certificates_become_requests() -> None:
    p = make(spec())
    assert not [o for o in p.objects if planning.group_of(o) == "cert-manager.io"]
    assert p.certificates == [planning.CertRequest("kserve", "webhook-cert", ("svc.kserve.svc",))]
    with_cm = make(spec(), ClusterFacts(cert_manager=True))
    assert by_kind(with_cm, "Certificate") and not with_cm.certificates


SERVICE_CA_EXTRA = """
apiVersion: v1
kind: Service
metadata: {name: svc, namespace: kserve}
spec: {ports: [{port: 443}]}
---
apiVersion: v1
kind: Secret
metadata: {name: webhook-cert, namespace: kserve}
---
apiVersion: v1
kind: Service
metadata: {name: metrics, namespace: kserve}
spec: {ports: [{port: 8443}]}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: converted.serving.kserve.io}
spec:
  group: serving.kserve.io
  scope: Namespaced
  names: {kind: Converted, plural: converted}
  conversion:
    strategy: Webhook
    webhook: {clientConfig: {service: {name: svc, namespace: kserve}}}
"""


def test_with_the_service_ca_webhook_certificates_come_from_it() -> None:
    """OpenShift without cert-manager: no certificate for the agent to make; the webhook
    Service asks the service CA for its serving certificate (in the Secret the Certificate
    named, which the bundle's placeholder no longer shadows), and the webhooks and conversion
    webhooks ask for its CA bundle."""
    bundle = planning.parse_bundle(BUNDLE + "---" + SERVICE_CA_EXTRA)
    p = planning.plan(bundle, spec(), KSERVE, ClusterFacts(service_ca=True))
    assert p.certificates == []
    assert not [o for o in p.objects if planning.group_of(o) == "cert-manager.io"]
    services = {o["metadata"]["name"]: o["metadata"].get("annotations") or {}
                for o in by_kind(p, "Service")}
    assert services["svc"][planning.SERVING_CERT_ANNOTATION] == "webhook-cert"
    assert planning.SERVING_CERT_ANNOTATION not in services["metrics"]
    assert not [o for o in by_kind(p, "Secret") if o["metadata"]["name"] == "webhook-cert"]
    hooks = by_kind(p, "ValidatingWebhookConfiguration")[0]
    assert hooks["metadata"]["annotations"][planning.INJECT_CA_ANNOTATION] == "true"
    assert "caBundle" not in hooks["webhooks"][0]["clientConfig"]  # injected, not ours
    crds = {o["metadata"]["name"]: o["metadata"].get("annotations") or {}
            for o in by_kind(p, "CustomResourceDefinition")}
    assert crds["converted.serving.kserve.io"][planning.INJECT_CA_ANNOTATION] == "true"
    assert planning.INJECT_CA_ANNOTATION not in crds["things.serving.kserve.io"]
    # cert-manager, where it runs, still wins; the agent's own CA where neither does
    both = planning.plan(bundle, spec(), KSERVE, ClusterFacts(cert_manager=True, service_ca=True))
    assert by_kind(both, "Certificate") and not by_kind(both, "Service")[0]["metadata"].get(
        "annotations")
    assert planning.plan(bundle, spec(), KSERVE, ClusterFacts()).certificates


def test_inject_ca_bundle() -> None:
    objects = copy.deepcopy(make(spec()).objects)
    planning.inject_ca_bundle(objects, "Q0E=")
    hooks = next(o for o in objects if o["kind"] == "ValidatingWebhookConfiguration")
    assert hooks["webhooks"][0]["clientConfig"]["caBundle"] == "Q0E="


def test_bundle_is_not_modified() -> None:
    bundle = planning.parse_bundle(BUNDLE)
    before = copy.deepcopy(bundle)
    planning.plan(bundle, spec(components={"ctrl": {"replicas": 2}}), KSERVE, ClusterFacts())
    assert bundle == before


def test_modelmesh_builtin_etcd_and_config() -> None:
    s = ServingPlatformSpec.model_validate(
        {"platform": "ModelMesh", "modelmesh": {"podsPerRuntime": 3}}
    )
    p = planning.plan([], s, MODELMESH, ClusterFacts())
    names = {(o["kind"], o["metadata"]["name"]) for o in p.objects}
    assert ("Deployment", "etcd") in names
    assert ("Secret", "model-serving-etcd") in names
    config = next(o for o in p.objects if o["metadata"]["name"] == "model-serving-config")
    assert "podsPerRuntime: 3" in config["data"]["config.yaml"]


def test_modelmesh_external_etcd() -> None:
    s = ServingPlatformSpec.model_validate(
        {
            "platform": "ModelMesh",
            "modelmesh": {"etcd": {"external": {"secretRef": {"name": "my-etcd"}}}},
        }
    )
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "modelmesh-controller", "namespace": "mm"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "m", "env": [{"name": "ETCD_SECRET_NAME", "value": "x"}]}
                    ]
                }
            }
        },
    }
    p = planning.plan([dep], s, MODELMESH, ClusterFacts())
    assert not [o for o in p.objects if o["metadata"]["name"] == "etcd"]
    env = by_kind(p, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "ETCD_SECRET_NAME", "value": "my-etcd"}]


def test_service_monitor_only_with_operator_and_monitoring() -> None:
    text = BUNDLE + (
        "\n---\napiVersion: v1\nkind: Service\nmetadata: {name: "
        f"{KSERVE.metrics_service}, namespace: kserve}}\n"
        "spec: {selector: {app: ctrl}, ports: [{name: https, port: 8443}]}\n"
    )
    bundle = planning.parse_bundle(text)
    on = spec(monitoring={"enabled": True})
    assert not [
        o
        for o in planning.plan(bundle, on, KSERVE, ClusterFacts()).objects
        if o["kind"] == "ServiceMonitor"
    ]
    p = planning.plan(bundle, on, KSERVE, ClusterFacts(prometheus_operator=True))
    monitor = next(o for o in p.objects if o["kind"] == "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"] == {"app": "ctrl"}


def test_point_webhooks_at_external_server_keeps_paths() -> None:
    from addon_agent.pure.planning import point_webhooks_at

    objs: list[dict[str, Any]] = [
        {"kind": "MutatingWebhookConfiguration", "webhooks": [
            {"name": "a", "clientConfig": {"service": {"name": "s", "namespace": "kserve",
                                                        "path": "/mutate-pods"}}},
            {"name": "b", "clientConfig": {"url": "https://elsewhere/x"}}]},
        {"kind": "CustomResourceDefinition", "spec": {"conversion": {
            "strategy": "Webhook",
            "webhook": {"clientConfig": {"service": {"name": "s", "namespace": "kserve",
                                                     "path": "/convert"}}}}}},
    ]
    point_webhooks_at(objs, "https://127.0.0.1:9443/", "Q0E=")
    hooks = objs[0]["webhooks"]
    assert hooks[0]["clientConfig"] == {"url": "https://127.0.0.1:9443/mutate-pods",
                                        "caBundle": "Q0E="}
    assert hooks[1]["clientConfig"] == {"url": "https://elsewhere/x"}  # not Service-backed
    conv = objs[1]["spec"]["conversion"]["webhook"]["clientConfig"]
    assert conv == {"url": "https://127.0.0.1:9443/convert", "caBundle": "Q0E="}


RUNTIMES = """
apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata: {name: mlserver-1.x, labels: {name: modelmesh-serving-mlserver-1.x-SR}}
spec: {multiModel: true, containers: [{name: mlserver, image: seldonio/mlserver:1.3.2}]}
---
apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata: {name: ns-runtime, namespace: team}
spec: {multiModel: true, containers: [{name: r, image: r:1}]}
"""


def runtime_names(p: planning.Plan) -> set[str]:
    return {o["metadata"]["name"] for o in p.objects if planning.is_runtime(o)}


def test_modelmesh_builtin_runtimes_on_by_default_and_switchable() -> None:
    bundle = planning.parse_bundle(BUNDLE + "\n---\n" + RUNTIMES)
    mm = {"platform": "ModelMesh"}
    on = ServingPlatformSpec.model_validate(mm)
    default = planning.plan(bundle, on, MODELMESH, ClusterFacts())
    assert runtime_names(default) == {"mlserver-1.x", "ns-runtime"}
    csr = next(o for o in default.objects if o["kind"] == "ClusterServingRuntime")
    assert "namespace" not in csr["metadata"]  # cluster-scoped: served to every namespace
    assert csr["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "model-serving-addon"
    assert csr["metadata"]["labels"]["name"] == "modelmesh-serving-mlserver-1.x-SR"
    kinds = [o["kind"] for o in default.objects]
    # custom resources: after the CRDs, before the webhook configuration and the controllers
    assert kinds.index("CustomResourceDefinition") < kinds.index("ClusterServingRuntime")
    assert kinds.index("ClusterServingRuntime") < kinds.index("ValidatingWebhookConfiguration")
    off = ServingPlatformSpec.model_validate({**mm, "modelmesh": {"builtInRuntimes": False}})
    without = planning.plan(bundle, off, MODELMESH, ClusterFacts())
    assert runtime_names(without) == set()
    assert {o["metadata"]["name"] for o in without.objects} == {
        o["metadata"]["name"] for o in default.objects if not planning.is_runtime(o)
    }
    # KServe's default keeps every runtime of a (custom) KServe bundle too
    assert runtime_names(planning.plan(bundle, spec(), KSERVE, ClusterFacts())) == {
        "mlserver-1.x",
        "ns-runtime",
    }


KSERVE_RUNTIMES = """
apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata: {name: kserve-sklearnserver, annotations: {serving.kserve.io/server-type: sklearnserver}}
spec:
  supportedModelFormats: [{name: sklearn, version: "1", autoSelect: true, priority: 1}]
  containers: [{name: kserve-container, image: kserve/sklearnserver:v0.17.0}]
---
apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata: {name: kserve-xgbserver}
spec: {containers: [{name: kserve-container, image: kserve/xgbserver:v0.17.0}]}
"""


def test_kserve_builtin_runtimes_on_by_default_and_switchable() -> None:
    assert KSERVE.runtimes == "runtimes"  # rendered from upstream's config/runtimes
    bundle = planning.parse_bundle(BUNDLE + "\n---\n" + KSERVE_RUNTIMES)
    default = planning.plan(bundle, spec(), KSERVE, ClusterFacts())
    assert runtime_names(default) == {"kserve-sklearnserver", "kserve-xgbserver"}
    explicit = planning.plan(bundle, spec(kserve={"builtInRuntimes": True}), KSERVE, ClusterFacts())
    assert explicit.objects == default.objects
    csr = next(o for o in default.objects if o["metadata"]["name"] == "kserve-sklearnserver")
    assert "namespace" not in csr["metadata"]  # cluster-scoped: every serving namespace
    assert csr["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "model-serving-addon"
    assert csr["metadata"]["annotations"] == {"serving.kserve.io/server-type": "sklearnserver"}
    kinds = [o["kind"] for o in default.objects]
    # created before KServe's webhook for them is configured, so a first install never
    # waits for the controller
    assert kinds.index("ClusterServingRuntime") < kinds.index("ValidatingWebhookConfiguration")
    off = spec(kserve={"builtInRuntimes": False})
    assert planning.runtimes_wanted(off, KSERVE) is False
    without = planning.plan(bundle, off, KSERVE, ClusterFacts())
    assert runtime_names(without) == set()
    assert [o["metadata"]["name"] for o in without.objects] == [
        o["metadata"]["name"] for o in default.objects if not planning.is_runtime(o)
    ]


def test_modelmesh_service_monitor_covers_the_serving_namespaces() -> None:
    s = ServingPlatformSpec.model_validate(
        {"platform": "ModelMesh", "servingNamespaces": ["a", "b"], "monitoring": {"enabled": True}}
    )
    facts = ClusterFacts(prometheus_operator=True)
    p = planning.plan([], s, MODELMESH, facts, agent_metrics=("agent-ns", 8383))
    monitors = {o["metadata"]["name"]: o for o in by_kind(p, "ServiceMonitor")}
    runtime_monitor = monitors["modelmesh-service-monitor"]
    assert runtime_monitor["metadata"]["namespace"] == MODELMESH.namespace
    assert runtime_monitor["spec"]["namespaceSelector"] == {"matchNames": ["a", "b"]}
    assert monitors["model-serving-agent"]["metadata"]["namespace"] == "agent-ns"
    off = ServingPlatformSpec.model_validate({"platform": "ModelMesh", "servingNamespaces": ["a"]})
    assert not by_kind(planning.plan([], off, MODELMESH, facts), "ServiceMonitor")


def test_kserve_predictor_pod_monitor_with_monitoring_and_the_operator() -> None:
    """Monitoring on a cluster with prometheus-operator: a PodMonitor in KServe's namespace
    for the model containers of the InferenceService pods of the serving namespaces, on the
    port and path KServe's runtimes annotate; none without the operator or monitoring, and
    none for ModelMesh (its runtimes have their ServiceMonitor)."""
    on = ServingPlatformSpec.model_validate(
        {"platform": "KServe", "servingNamespaces": ["models", "team-b"],
         "monitoring": {"enabled": True}})
    facts = ClusterFacts(prometheus_operator=True)
    (monitor,) = by_kind(planning.plan([], on, KSERVE, facts), "PodMonitor")
    assert monitor["metadata"] == {
        "name": kserve_plan.PREDICTOR_MONITOR, "namespace": KSERVE.namespace,
        "labels": monitor["metadata"]["labels"]}
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["models", "team-b"]}
    assert monitor["spec"]["selector"] == {"matchExpressions": [
        {"key": "serving.kserve.io/inferenceservice", "operator": "Exists"}]}
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics" and "port" not in endpoint
    keeps = [(r["sourceLabels"], r["regex"]) for r in endpoint["relabelings"]
             if r["action"] == "keep"]
    assert keeps == [(["__meta_kubernetes_pod_container_name"], "kserve-container"),
                     (["__meta_kubernetes_pod_annotation_prometheus_kserve_io_port"], "[0-9]+")]
    rules = {r["targetLabel"]: r for r in endpoint["relabelings"] if r["action"] == "replace"}
    address = rules["__address__"]
    assert address["sourceLabels"] == [
        "__address__", "__meta_kubernetes_pod_annotation_prometheus_kserve_io_port"]
    assert rules["__metrics_path__"]["sourceLabels"] == [
        "__meta_kubernetes_pod_annotation_prometheus_kserve_io_path"]
    assert rules["inferenceservice"]["sourceLabels"] == [
        "__meta_kubernetes_pod_label_serving_kserve_io_inferenceservice"]
    assert not by_kind(planning.plan([], on, KSERVE, ClusterFacts()), "PodMonitor")
    off = ServingPlatformSpec.model_validate({"platform": "KServe", "servingNamespaces": ["m"]})
    assert not by_kind(planning.plan([], off, KSERVE, facts), "PodMonitor")
    mm = ServingPlatformSpec.model_validate(
        {"platform": "ModelMesh", "servingNamespaces": ["m"], "monitoring": {"enabled": True}})
    assert not by_kind(planning.plan([], mm, MODELMESH, facts), "PodMonitor")
    anywhere = ServingPlatformSpec.model_validate(
        {"platform": "KServe", "monitoring": {"enabled": True}})
    (monitor,) = by_kind(planning.plan([], anywhere, KSERVE, facts), "PodMonitor")
    assert monitor["spec"]["namespaceSelector"] == {"any": True}
