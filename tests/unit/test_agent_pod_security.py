"""Pod Security ``restricted``: what the agent sets on the stacks' pods, and the checker."""

from __future__ import annotations

import copy
from typing import Any

from addon_agent import planning, pod_security
from addon_agent.planning import ClusterFacts
from addon_agent.stacks import MODELMESH
from addon_api.spoke import ServingPlatformSpec


def _bare() -> dict[str, Any]:
    return {"containers": [{"name": "manager", "image": "x"}],
            "initContainers": [{"name": "init", "image": "y"}],
            "volumes": [{"name": "tmp", "emptyDir": {}}]}


def test_a_bare_pod_is_made_restricted_and_then_passes() -> None:
    pod = _bare()
    assert len(pod_security.violations(pod)) == 8  # 4 per container
    pod_security.restrict(pod)
    assert pod_security.violations(pod) == []
    assert pod["securityContext"] == {"runAsNonRoot": True,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_restrict_turns_unsafe_settings_down_and_keeps_strict_ones() -> None:
    pod = _bare()
    pod["securityContext"] = {"runAsNonRoot": True, "runAsUser": 1001,
                              "seccompProfile": {"type": "Localhost",
                                                 "localhostProfile": "p.json"}}
    pod["containers"][0]["securityContext"] = {
        "privileged": True, "allowPrivilegeEscalation": True, "readOnlyRootFilesystem": True,
        "capabilities": {"add": ["NET_BIND_SERVICE", "SYS_ADMIN"], "drop": ["NET_RAW"]}}
    before = copy.deepcopy(pod)
    pod_security.restrict(pod)
    assert pod["securityContext"] == before["securityContext"]  # already strict
    sc = pod["containers"][0]["securityContext"]
    assert sc == {"privileged": False, "allowPrivilegeEscalation": False,
                  "readOnlyRootFilesystem": True,
                  "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["NET_RAW", "ALL"]}}
    assert pod_security.violations(pod) == []


def test_the_checker_names_what_admission_would_refuse() -> None:
    pod = pod_security.restrict(_bare())
    pod["hostNetwork"] = True
    pod["volumes"].append({"name": "root", "hostPath": {"path": "/"}})
    pod["containers"][0]["securityContext"]["privileged"] = True
    pod["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    pod["initContainers"][0]["securityContext"]["runAsUser"] = 0
    assert pod_security.violations(pod) == [
        "hostNetwork=true", "volume root of type hostPath", "container init: runAsUser=0",
        "container manager: privileged", "container manager: hostPort"]


def test_the_modelmesh_plan_pods_and_namespace_are_restricted() -> None:
    """ModelMesh's own controller template sets little; the plan makes it and the built-in
    etcd ``restricted``, and labels the stack's namespace so the API server enforces it."""
    bundle = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MODELMESH.namespace}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "modelmesh-controller", "namespace": MODELMESH.namespace},
         "spec": {"template": {"spec": {"containers": [
             {"name": "manager", "image": "m",
              "securityContext": {"capabilities": {"drop": ["ALL"]}}}]}}}},
    ]
    spec = ServingPlatformSpec.model_validate({"platform": "ModelMesh"})
    plan = planning.plan(bundle, spec, MODELMESH, ClusterFacts())
    pods = {o["metadata"]["name"]: o["spec"]["template"]["spec"] for o in plan.objects
            if o["kind"] in planning.POD_OWNERS}
    assert {"modelmesh-controller", planning.ETCD_NAME} <= set(pods)
    assert {name: pod_security.violations(pod) for name, pod in pods.items()} == {
        name: [] for name in pods}
    ns = next(o for o in plan.objects if o["kind"] == "Namespace")
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_a_serving_runtimes_containers_are_hardened_without_forcing_non_root() -> None:
    runtime = {"kind": "ClusterServingRuntime", "spec": {"containers": [
        {"name": "kserve-container", "image": "a:1",
         "securityContext": {"runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}},
        {"name": "root", "image": "b:1", "securityContext": {"runAsNonRoot": False,
                                                              "privileged": True}},
        {"name": "bare", "image": "c:1"},
    ]}}
    pod_security.harden_runtime(runtime)
    first, root, bare = runtime["spec"]["containers"]
    # KServe's own runtimes (non-root already): restricted now
    assert pod_security.violations({"containers": [first]}) == []
    for container in (root, bare):
        sc = container["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and "ALL" in sc["capabilities"]["drop"]
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
        assert not sc.get("privileged")
    assert root["securityContext"]["runAsNonRoot"] is False  # left as the runtime said
    assert "runAsNonRoot" not in bare["securityContext"]
