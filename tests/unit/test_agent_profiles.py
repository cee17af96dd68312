"""The SingleNode profile: one replica, no anti-affinity, small requests; explicit settings win."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from addon_agent.pure import modelmesh_plan, planning, profiles
from addon_agent.stacks import KSERVE, MODELMESH
from addon_api.spoke import ServingPlatformSpec

ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "ctrl"}}, "topologyKey": "kubernetes.io/hostname"}]},
    "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]}}]}}
BIG = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}


def _bundle() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "ctrl", "namespace": "kserve"},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "ctrl"}}, "template": {
             "metadata": {"labels": {"app": "ctrl"}},
             "spec": {"affinity": json.loads(json.dumps(ANTI)),
                      "initContainers": [{"name": "init", "image": "i:1",
                                          "resources": json.loads(json.dumps(BIG))}],
                      "containers": [
                          {"name": "manager", "image": "c:1",
                           "resources": json.loads(json.dumps(BIG))},
                          {"name": "small", "image": "s:1",
                           "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}},
                          {"name": "none", "image": "n:1"}]}}}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "inferenceservice-config", "namespace": "kserve"},
         "data": {"inferenceService": json.dumps({"resource": {
             "cpuLimit": "1", "memoryLimit": "2Gi", "cpuRequest": "1", "memoryRequest": "2Gi"}}),
                  "storageInitializer": json.dumps({"image": "si:1", "cpuRequest": "100m",
                                                    "memoryRequest": "100Mi"}),
                  "explainers": "not json"}},
    ]


def _plan(**kw: Any) -> dict[str, Any]:
    spec = ServingPlatformSpec.model_validate({"platform": "KServe", **kw})
    plan = planning.plan(_bundle(), spec, KSERVE, planning.ClusterFacts())
    return {o["kind"]: o for o in plan.objects}


def test_single_node_runs_one_replica_without_anti_affinity_and_small_requests() -> None:
    out = _plan(profile="SingleNode")
    dep = out["Deployment"]
    pod = dep["spec"]["template"]["spec"]
    assert dep["spec"]["replicas"] == 1
    assert pod["affinity"] == {"nodeAffinity": ANTI["nodeAffinity"]}  # only the anti goes
    containers = {x["name"]: x for x in [*pod["initContainers"], *pod["containers"]]}
    for name in ("init", "manager"):
        assert containers[name]["resources"] == {"requests": {"cpu": "50m", "memory": "64Mi"},
                                                 "limits": BIG["limits"]}, name
    assert containers["small"]["resources"]["requests"] == {"cpu": "10m", "memory": "16Mi"}
    assert "resources" not in containers["none"]
    data = out["ConfigMap"]["data"]
    assert json.loads(data["inferenceService"])["resource"] == {
        "cpuLimit": "1", "memoryLimit": "2Gi", "cpuRequest": "100m", "memoryRequest": "256Mi"}
    assert json.loads(data["storageInitializer"]) == {
        "image": "si:1", "cpuRequest": "10m", "memoryRequest": "64Mi"}
    assert data["explainers"] == "not json" and "batcher" not in data


def test_the_default_profile_keeps_the_release_settings() -> None:
    out = _plan()
    dep = out["Deployment"]
    assert dep["spec"]["replicas"] == 2 and dep["spec"]["template"]["spec"]["affinity"] == ANTI
    assert dep["spec"]["template"]["spec"]["containers"][0]["resources"] == BIG
    assert json.loads(out["ConfigMap"]["data"]["inferenceService"])["resource"]["cpuRequest"] == "1"


@pytest.mark.parametrize("component, replicas, requests", [
    ({"replicas": 3}, 3, {"cpu": "50m", "memory": "64Mi"}),
    ({"autoscaling": {"minReplicas": 1, "maxReplicas": 4}}, None,
     {"cpu": "50m", "memory": "64Mi"}),
    ({"resources": {"requests": {"cpu": "2", "memory": "3Gi"}}}, 1, {"cpu": "2", "memory": "3Gi"}),
])
def test_what_components_set_wins_over_the_profile(
    component: dict[str, Any], replicas: int | None, requests: dict[str, str],
) -> None:
    dep = _plan(profile="SingleNode", components={"ctrl": component})["Deployment"]
    assert dep["spec"].get("replicas") == replicas
    assert dep["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == requests


def test_single_node_modelmesh_runs_one_pod_per_runtime_unless_set() -> None:
    def pods(**kw: Any) -> int:
        spec = ServingPlatformSpec.model_validate({"platform": "ModelMesh", **kw})
        config = next(o for o in modelmesh_plan.modelmesh_extras(spec, MODELMESH.namespace)
                      if o["metadata"]["name"] == modelmesh_plan.MODELMESH_CONFIG)
        return int(yaml.safe_load(config["data"]["config.yaml"])["podsPerRuntime"])

    assert pods() == 2
    assert pods(profile="SingleNode") == 1
    assert pods(profile="SingleNode", modelmesh={"podsPerRuntime": 2}) == 2
    assert pods(modelmesh={"podsPerRuntime": 3}) == 3


def test_caps_compare_quantities_not_strings() -> None:
    container = {"resources": {"requests": {"cpu": "0.04", "memory": "100M"}}}
    profiles.cap_requests(container)
    # 40m stays (smaller than 50m); 100M (decimal) is more than 64Mi
    assert container["resources"]["requests"] == {"cpu": "0.04", "memory": "64Mi"}


def test_single_node_caps_the_builtin_runtimes_models_inherit() -> None:
    """A model without requests gets its runtime's: KServe's built-in runtimes ask 1 CPU and
    2Gi (the scheduling test found it), so SingleNode caps them too."""
    runtime = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterServingRuntime",
               "metadata": {"name": "kserve-sklearnserver"},
               "spec": {"supportedModelFormats": [{"name": "sklearn"}], "containers": [{
                   "name": "kserve-container", "image": "kserve/sklearnserver:v1",
                   "resources": json.loads(json.dumps(BIG))}]}}

    def planned(**kw: Any) -> dict[str, Any]:
        spec = ServingPlatformSpec.model_validate({"platform": "KServe", **kw})
        plan = planning.plan([json.loads(json.dumps(runtime))], spec, KSERVE,
                             planning.ClusterFacts())
        return next(o for o in plan.objects if o["kind"] == "ClusterServingRuntime")

    small = planned(profile="SingleNode")["spec"]["containers"][0]["resources"]
    assert small == {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": BIG["limits"]}
    assert planned()["spec"]["containers"][0]["resources"] == BIG
