"""Pod Security ``restricted``: what the agent sets on the stacks' pods, and the checker."""

from __future__ import annotations

import copy
from typing import Any

from addon_agent.pure import modelmesh_plan, planning, pod_security
from addon_agent.pure.planning import ClusterFacts
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
    assert {"modelmesh-controller", modelmesh_plan.ETCD_NAME} <= set(pods)
    assert {name: pod_security.violations(pod) for name, pod in pods.items()} == {
        name: [] for name in pods}
    ns = next(o for o in plan.objects if o["kind"] == "Namespace")
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_a_serving_runtimes_containers_are_hardened_without_forcing_non_root() -> None:
    """A runtime the agent knows nothing of keeps an unset runAsNonRoot (its image may run as
    root) and an explicit false; everything else is made restricted."""
    runtime = {"kind": "ClusterServingRuntime", "metadata": {"name": "someone-elses"},
               "spec": {"containers": [
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


def _modelmesh_runtime(name: str) -> dict[str, Any]:
    return {"kind": "ClusterServingRuntime", "metadata": {"name": name}, "spec": {
        "containers": [{"name": "server", "image": "s:1"}]}}


def test_the_shipped_runtimes_that_leave_non_root_unset_get_their_images_user() -> None:
    """ModelMesh's runtimes and KServe's multinode one: runAsNonRoot, and the uid where the
    image names its user or runs as root (a kubelet cannot check a named user)."""
    users = {}
    for name in ("mlserver-1.x", "ovms-1.x", "torchserve-0.x", "triton-2.x"):
        runtime = pod_security.harden_runtime(_modelmesh_runtime(name))
        (container,) = runtime["spec"]["containers"]
        assert pod_security.violations({"containers": [container]}) == [], name
        users[name] = container["securityContext"].get("runAsUser")
    assert users == {"mlserver-1.x": None, "ovms-1.x": 5000, "torchserve-0.x": 1000,
                     "triton-2.x": 1000}
    multinode = {"kind": "ClusterServingRuntime",
                 "metadata": {"name": "kserve-huggingfaceserver-multinode"},
                 "spec": {"containers": [{"name": "kserve-container", "image": "h:1"}],
                          "workerSpec": {"containers": [{"name": "worker-container",
                                                         "image": "h:1"}]}}}
    pod_security.harden_runtime(multinode)
    workers = multinode["spec"]["workerSpec"]["containers"]
    assert pod_security.violations({"containers": [*multinode["spec"]["containers"],
                                                   *workers]}) == []
    assert "runAsUser" not in workers[0]["securityContext"]


def test_where_the_cluster_assigns_users_no_runtime_names_one() -> None:
    """OpenShift's restricted-v2 gives a pod a uid of its namespace's range and refuses any
    other: the runtime keeps runAsNonRoot and loses runAsUser, its own (KServe's Triton sets
    1000) or the agent's."""
    kserve_triton = {"kind": "ClusterServingRuntime", "metadata": {"name": "kserve-tritonserver"},
                     "spec": {"containers": [{"name": "kserve-container", "image": "t:1",
                                              "securityContext": {"runAsNonRoot": True,
                                                                  "runAsUser": 1000}}]}}
    for runtime in (kserve_triton, _modelmesh_runtime("ovms-1.x")):
        pod_security.harden_runtime(runtime, assigns_users=True)
        (container,) = runtime["spec"]["containers"]
        assert "runAsUser" not in container["securityContext"]
        assert pod_security.violations({"containers": [container]}) == []
    plain = copy.deepcopy(kserve_triton)
    plain["spec"]["containers"][0]["securityContext"]["runAsUser"] = 1000
    pod_security.harden_runtime(plain)
    assert plain["spec"]["containers"][0]["securityContext"]["runAsUser"] == 1000
