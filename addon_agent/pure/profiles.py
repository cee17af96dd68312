"""Sizing profiles of a stack (``ServingPlatform.spec.profile``).

``Default`` keeps each release's own settings. ``SingleNode`` fits a cluster of one node with
little room (single-node OpenShift): every Deployment and StatefulSet of the stack runs one
replica, pod anti-affinity goes (its required terms can never be met on one node, its preferred
ones mean nothing there), each container's requests are capped at
:data:`SINGLE_NODE_REQUESTS`, KServe's defaults for model containers without requests and for
its sidecars shrink (:data:`SINGLE_NODE_KSERVE`), so do the built-in serving runtimes' requests
(:func:`fit_runtime`), and each ModelMesh runtime runs one pod.
Whatever the ModelServing sets explicitly (``spec.components``' replicas, autoscaling and
resources, ``spec.modelmesh.podsPerRuntime``) wins over the profile. Everything here is pure.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, Final, cast

from kubernetes.utils.quantity import parse_quantity

from addon_api.platform import ComponentSpec, ModelMeshOptions
from addon_api.spoke import ServingPlatformSpec

Obj = dict[str, Any]

SINGLE_NODE: Final = "SingleNode"
SINGLE_NODE_REQUESTS: Final = {"cpu": "50m", "memory": "64Mi"}
"""The most a container of the stack requests under ``SingleNode`` (limits are kept)."""
SINGLE_NODE_MODEL_REQUESTS: Final = {"cpu": "100m", "memory": "256Mi"}
"""The most a model's container requests under ``SingleNode`` when its InferenceService sets
no requests of its own: the built-in serving runtimes' containers are capped at it (KServe
gives a model its runtime's resources; the release's are 1 CPU and 2Gi, or more for large
language models), and so is KServe's configured default."""
SINGLE_NODE_KSERVE: Final[dict[str, dict[str, Any]]] = {
    "inferenceService": {"resource": {"cpuRequest": SINGLE_NODE_MODEL_REQUESTS["cpu"],
                                      "memoryRequest": SINGLE_NODE_MODEL_REQUESTS["memory"]}},
    "agent": {"cpuRequest": "10m", "memoryRequest": "32Mi"},
    "router": {"cpuRequest": "10m", "memoryRequest": "32Mi"},
    "logger": {"cpuRequest": "10m", "memoryRequest": "32Mi"},
    "batcher": {"cpuRequest": "100m", "memoryRequest": "128Mi"},
    "storageInitializer": {"cpuRequest": "10m", "memoryRequest": "64Mi"},
}
"""Under ``SingleNode``, the requests in ``inferenceservice-config`` that KServe gives what it
creates: a model's container when its template sets no resources (the release's default is 1
CPU and 2Gi, which alone may not fit), and its sidecars and init containers. Keys a release's
configuration lacks are left out; limits are kept."""
SINGLE_NODE_PODS_PER_RUNTIME: Final = 1
SCALED_KINDS: Final = frozenset({"Deployment", "StatefulSet"})


def single_node(spec: ServingPlatformSpec) -> bool:
    """Whether ``spec`` asks for the ``SingleNode`` profile."""
    return bool(spec.profile == SINGLE_NODE)


def fit_workload(obj: Obj, component: ComponentSpec | None) -> Obj:
    """A Deployment, StatefulSet or DaemonSet of the stack sized for one node, in place."""
    pod = obj["spec"]["template"]["spec"]
    explicit = component or ComponentSpec()
    if obj["kind"] in SCALED_KINDS and explicit.replicas is None and explicit.autoscaling is None:
        obj["spec"]["replicas"] = 1
    affinity = pod.get("affinity")
    if isinstance(affinity, dict):
        affinity.pop("podAntiAffinity", None)
        if not affinity:
            pod.pop("affinity")
    if explicit.resources is None:
        for container in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
            cap_requests(container)
    return obj


def fit_runtime(obj: Obj) -> Obj:
    """A serving runtime of the stack sized for one node, in place.

    Its containers request at most :data:`SINGLE_NODE_MODEL_REQUESTS`; limits are kept.
    """
    for container in (obj.get("spec") or {}).get("containers") or []:
        cap_requests(container, SINGLE_NODE_MODEL_REQUESTS)
    return obj


def cap_requests(container: Obj, caps: dict[str, str] = SINGLE_NODE_REQUESTS) -> Obj:
    """Lower the container's CPU and memory requests to ``caps``, in place.

    A request that is missing or already smaller stays as it is.
    """
    requests = (container.get("resources") or {}).get("requests")
    if not isinstance(requests, dict):
        return container
    for name, most in caps.items():
        have = requests.get(name)
        if have is not None and quantity(have) > quantity(most):
            requests[name] = most
    return container


def quantity(value: object) -> Decimal:
    """A Kubernetes quantity ("100m", "2Gi", "0.5") as a number."""
    return cast(Decimal, parse_quantity(str(value)))  # type: ignore[no-untyped-call]


def fit_kserve_config(data: dict[str, str]) -> dict[str, str]:
    """``inferenceservice-config``'s data with :data:`SINGLE_NODE_KSERVE` merged in, in place.

    Only keys the release's configuration has are changed (an entry that is not a JSON object
    is left alone).
    """
    for key, values in SINGLE_NODE_KSERVE.items():
        try:
            current = json.loads(data[key]) if key in data else None
        except ValueError:
            continue
        if not isinstance(current, dict):
            continue
        data[key] = json.dumps(_merge(current, values), indent=2, sort_keys=True)
    return data


def _merge(base: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def pods_per_runtime(spec: ServingPlatformSpec) -> int:
    """Pods of each ModelMesh runtime: the spec's, else the profile's, else the default."""
    options = spec.modelmesh
    if options is not None and "pods_per_runtime" in options.model_fields_set:
        return int(options.pods_per_runtime)
    if single_node(spec):
        return SINGLE_NODE_PODS_PER_RUNTIME
    return int((options or ModelMeshOptions()).pods_per_runtime)
