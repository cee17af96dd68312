"""ModelMesh's part of a plan: its configuration, the built-in etcd, its monitor (pure).

The generic planner (:func:`addon_agent.pure.planning.plan`) calls :data:`PLANNING`'s hooks.
"""

from __future__ import annotations

import json

import yaml

from addon_agent.pure import profiles
from addon_agent.pure.manifests import Obj, b64
from addon_agent.stacks import Stack
from addon_api import constants as c
from addon_api.platform import ModelMeshOptions
from addon_api.spoke import ServingPlatformSpec

ETCD_IMAGE = "quay.io/coreos/etcd:v3.5.4"
ETCD_NAME = "etcd"
ETCD_SECRET = "model-serving-etcd"
ETCD_KEY = "etcd_connection"
MODELMESH_CONFIG = "model-serving-config"


class ModelMeshPlanning:
    """The hooks of :class:`addon_agent.pure.planning.StackPlanning` for ModelMesh."""

    def runtimes_wanted(self, spec: ServingPlatformSpec) -> bool:
        """``modelmesh.builtInRuntimes`` (default: true)."""
        return (spec.modelmesh or ModelMeshOptions()).built_in_runtimes

    def extras(self, spec: ServingPlatformSpec, stack: Stack) -> list[Obj]:
        """``model-serving-config`` and the built-in etcd (:func:`modelmesh_extras`)."""
        return modelmesh_extras(spec, stack.namespace)

    def configure(self, obj: Obj, spec: ServingPlatformSpec) -> None:
        """The controller Deployments point at an external etcd's Secret, when one is given."""
        etcd = spec.modelmesh.etcd if spec.modelmesh else None
        if obj["kind"] == "Deployment" and etcd is not None and etcd.external is not None:
            external_etcd_env(obj, etcd.external.secret_ref.name)

    def monitors(self, spec: ServingPlatformSpec, stack: Stack, objects: list[Obj]) -> list[Obj]:
        """The ServiceMonitor of the runtimes' Services in the serving namespaces."""
        return [modelmesh_service_monitor(stack, spec.serving_namespaces)]


PLANNING = ModelMeshPlanning()


def modelmesh_extras(spec: ServingPlatformSpec, namespace: str) -> list[Obj]:
    """``model-serving-config`` and, for the built-in etcd, etcd plus its connection Secret."""
    options = spec.modelmesh
    pods = profiles.pods_per_runtime(spec)
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": MODELMESH_CONFIG, "namespace": namespace},
        "data": {"config.yaml": yaml.safe_dump({"podsPerRuntime": pods})},
    }
    out: list[Obj] = [config]
    etcd = options.etcd if options else None
    if etcd is not None and etcd.external is not None:
        return out
    selector = {"app.kubernetes.io/name": ETCD_NAME, c.LABEL_COMPONENT: ETCD_NAME}
    connection = {
        "endpoints": f"http://{ETCD_NAME}.{namespace}.svc:2379",
        "root_prefix": "modelmesh-serving",
    }
    out += [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": ETCD_SECRET, "namespace": namespace},
            "type": "Opaque",
            "data": {ETCD_KEY: b64(json.dumps(connection))},
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": ETCD_NAME, "namespace": namespace},
            "spec": {
                "selector": selector,
                "ports": [{"name": "client", "port": 2379, "targetPort": 2379}],
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": ETCD_NAME, "namespace": namespace},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {"labels": selector},
                    "spec": {
                        "containers": [
                            {
                                "name": ETCD_NAME,
                                "image": ETCD_IMAGE,
                                "command": [
                                    "etcd",
                                    "--data-dir=/tmp/etcd.data",
                                    "--listen-client-urls=http://0.0.0.0:2379",
                                    f"--advertise-client-urls=http://{ETCD_NAME}.{namespace}.svc:2379",
                                ],
                                "ports": [{"containerPort": 2379, "name": "client"}],
                                "resources": {
                                    "requests": {"cpu": "50m", "memory": "64Mi"},
                                    "limits": {"cpu": "500m", "memory": "512Mi"},
                                },
                            }
                        ]
                    },
                },
            },
        },
    ]
    return out


def external_etcd_env(deployment: Obj, secret_name: str) -> Obj:
    """Point the ModelMesh controller at an existing etcd connection Secret."""
    for container in deployment["spec"]["template"]["spec"].get("containers", []):
        for env in container.get("env", []):
            if env.get("name") == "ETCD_SECRET_NAME":
                env["value"] = secret_name
    return deployment


def modelmesh_service_monitor(stack: Stack, namespaces: list[str]) -> Obj:
    """A ServiceMonitor for the ModelMesh runtime Services in the serving namespaces."""
    selector = {"modelmesh-service": "modelmesh-serving"}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "modelmesh-service-monitor", "namespace": stack.namespace},
        "spec": {
            "selector": {"matchLabels": selector},
            "namespaceSelector": {"matchNames": list(namespaces)} if namespaces else {"any": True},
            "endpoints": [
                {
                    "path": "/metrics",
                    "port": "prometheus",
                    "scheme": "https",
                    "tlsConfig": {"insecureSkipVerify": True},
                }
            ],
        },
    }
