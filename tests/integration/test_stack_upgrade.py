"""KServe upgraded and downgraded in place under a serving model (issue 19).

One spoke with the add-on; its ModelServing first asks for the previous KServe pin
(``spec.version: v0.17.0``) and a model serves on it. Changing ``spec.version`` to v0.20.0
upgrades the stack in place: the CRDs first, then the controller (the testbed runs the
release of the Deployment's image, as a kubelet would), then the configuration. Throughout,
sampled every few hundred milliseconds, the model keeps serving: its predictor Deployment
keeps an available replica, and KServe's real controller and the hub report it Ready except
while the predictor rolls to the new release's runtime image, which KServe itself reports as
Ready Unknown (the Deployment's ReplicaSetUpdated) and the hub as Progressing with that reason
(see :mod:`testbed.support.serving`). A version the agent does not carry is then refused with
a reason naming those it has, and leaves the stack and the model alone; the SingleNode profile
runs on a node sized like a minimal single-node OpenShift (issue 20). Last, the same as the
upgrade back to v0.17.0, which keeps the newer CRDs (the older schema would prune fields): the
one version change a test makes after the upgrade, where each costs about a minute.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
import yaml
from kubernetes import client

from addon_agent.stacks import KSERVE
from addon_api import constants as c
from testbed import demo
from testbed.fleet import Testbed
from testbed.support.serving import hub_entry_serving, isvc_serving
from testbed.support.waiting import on_fleet

NS = demo.NAMESPACE
AGENT_NS = "model-serving-agent"
MODEL = "iris-upgrade"
PREVIOUS, CURRENT = KSERVE.versions[-2], KSERVE.version
Fleet = tuple[Testbed, Callable[[], None]]
ISVC_CRD = "inferenceservices.serving.kserve.io"
STACK_VERSION = f"{c.GROUP}/stack-version"


def _modelserving(version: str | None) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(
        (demo.REPO / "examples" / "modelserving-kserve.yaml").read_text())
    body["spec"].pop("overrides")
    if version is not None:
        body["spec"]["version"] = version
    return body


_CLIENTS: dict[str, Any] = {}


def _client(cluster: Any) -> Any:
    """One API client per cluster for the module (the samples read several times a second)."""
    key = str(cluster.kubeconfig)
    if key not in _CLIENTS:
        _CLIENTS[key] = cluster.api_client()
    return _CLIENTS[key]


def _apply(bed: Testbed, obj: dict[str, Any]) -> None:
    bed.hub.kubectl("apply", "-n", NS, "-f", "-", input=yaml.safe_dump(obj))


POLL = "300s"
"""How often this fleet's work agent polls what it applied: everything the hub learns here
comes from the watches the manager asks for (``feedbackScrapeType: Watch``), within the
tests' timeouts (a refusal within 120 s), where a poll would come 300 to 570 s later."""


@pytest.fixture(scope="module")
def fleet(built_binaries: Callable[..., Any]) -> Iterator[Fleet]:
    """One spoke; KServe at the previous pin; a model Ready on it."""
    for version in KSERVE.versions:
        built_binaries("kserve-manager", version)  # both controllers, or say which is missing
    with demo.fleet(demo.Phases(), agent_namespace=AGENT_NS, spokes=1,
                    status_sync_interval=POLL) as bed:
        bed.bind_clusterset(NS)
        bed.hub.kubectl("apply", "-n", NS, "-f", str(demo.REPO / "examples" / "placement.yaml"))
        _apply(bed, _modelserving(PREVIOUS))
        step = demo.start_kserve_when_stack_ready(bed)
        on_fleet(bed, step, lambda: "kserve-controller" in bed.spokes[0].processes, 300)
        _apply(bed, demo.public_model(MODEL))
        on_fleet(bed, step, lambda: _hub_model(bed).get("ready") and _spoke_model_ready(bed), 300)
        yield bed, step
        bed.cleanup()


def _hub_entry(bed: Testbed, plural: str, name: str) -> dict[str, Any]:
    body = cast(dict[str, Any], client.CustomObjectsApi(
        _client(bed.hub)).get_namespaced_custom_object(c.GROUP, c.VERSION, NS, plural, name))
    entries = (body.get("status") or {}).get("clusters") or []
    return dict(entries[0]) if entries else {}


def _hub_model(bed: Testbed) -> dict[str, Any]:
    return _hub_entry(bed, "multiclusterinferenceservices", MODEL)


def _hub_stack(bed: Testbed) -> dict[str, Any]:
    return _hub_entry(bed, "modelservings", "kserve")


def _spoke_isvc(bed: Testbed) -> dict[str, Any]:
    """The model's InferenceService on the spoke, as KServe's controller left it."""
    return cast(dict[str, Any], client.CustomObjectsApi(
        _client(bed.spokes[0])).get_namespaced_custom_object(
        "serving.kserve.io", "v1beta1", "models", "inferenceservices", MODEL))


def _spoke_model_ready(bed: Testbed) -> bool:
    """KServe's Ready condition of the model's InferenceService on the spoke."""
    conds = {x["type"]: x["status"]
             for x in (_spoke_isvc(bed).get("status") or {}).get("conditions") or []}
    return conds.get("Ready") == "True"


def _spoke_stack(bed: Testbed) -> dict[str, Any]:
    """What the spoke runs: the platform's status, the controller's image and rollout, the
    configuration's and the CRD's version labels, the model's serving image."""
    spoke = bed.spokes[0]
    apps = client.AppsV1Api(_client(spoke))
    dep = apps.read_namespaced_deployment(KSERVE.controller, KSERVE.namespace).to_dict()
    cm = client.CoreV1Api(_client(spoke)).read_namespaced_config_map(
        "inferenceservice-config", KSERVE.namespace).to_dict()
    crd = json.loads(spoke.kubectl("get", "crd", ISVC_CRD, "-o", "json").stdout)
    platform = json.loads(spoke.kubectl("get", "servingplatforms", "-o", "json").stdout)["items"]
    st = dep["status"]
    model = apps.read_namespaced_deployment(f"{MODEL}-predictor", "models").to_dict()
    return {
        "model_available": model["status"].get("available_replicas") or 0,
        "model_image": next(x["image"] for x in model["spec"]["template"]["spec"]["containers"]
                            if x["name"] == "kserve-container"),
        "platform": (platform[0].get("status") or {}) if platform else {},
        "image": next(x["image"] for x in dep["spec"]["template"]["spec"]["containers"]
                      if x["name"] == "manager"),
        "rolled_out": (st.get("observed_generation") == dep["metadata"]["generation"]
                       and st.get("updated_replicas") == st.get("replicas")
                       and (st.get("available_replicas") or 0) >= 1),
        "config": (cm["metadata"]["labels"] or {}).get(STACK_VERSION),
        "crd": crd["metadata"]["labels"].get(STACK_VERSION),
        "canary_field": "canary" in crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"][
            "properties"]["spec"]["properties"],
    }


def _change_version(fleet: Fleet, version: str | None, target: str,
                    timeout: float = 300) -> list[dict[str, Any]]:
    """Set ``spec.version``; sample until the cluster runs ``target`` everywhere the hub and
    the spoke can tell, asserting at every sample that the model serves (an available
    predictor replica; Ready on the spoke, as KServe's controller reports it, and on the hub,
    but for the predictor's own roll to the new runtime image), and that the configuration does
    not carry the target version before the controller has rolled out at it, nor before the
    testbed began replacing the controller's process (it follows the Deployment's image by
    itself, as a kubelet would: :class:`testbed.kservepod.ReleaseFollower`; nothing here
    starts it)."""
    bed, _ = fleet
    follower = bed.kserve_followers[bed.spokes[0].name]
    _apply(bed, _modelserving(version))
    samples: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        bed.check_processes()
        now = _spoke_stack(bed)
        now["hub_stack"], now["hub_model"] = _hub_stack(bed), _hub_model(bed)
        isvc = _spoke_isvc(bed)
        now["spoke_model_ready"] = [(x["type"], x["status"], x.get("reason")) for x in
                                    (isvc.get("status") or {}).get("conditions") or []
                                    if x["type"] == "Ready"]
        samples.append(now)
        assert now["model_available"] >= 1, f"no predictor replica served: {samples[-3:]}"
        assert isvc_serving(isvc), f"KServe's Ready left the model: {samples[-3:]}"
        assert hub_entry_serving(now["hub_model"]), (
            f"the hub saw the model not serving: {samples[-3:]}")
        if now["config"] == target:
            assert now["image"].endswith(f":{target}") and now["rolled_out"], (
                f"the configuration moved before the controller rolled out: {now}")
            assert follower.release == target, (
                f"the configuration moved before the testbed replaced the controller: "
                f"{follower.swaps}")
        if _at(target, now):
            proc = bed.spokes[0].processes["kserve-controller"]
            assert f"kserve-{target}" in proc.argv[0] and proc.alive(), proc.argv
            return samples
        assert time.monotonic() < deadline, f"not done in {timeout}s: {samples[-3:]}"
        time.sleep(0.3)


def _at(version: str, now: dict[str, Any]) -> bool:
    """Whether a sample shows the stack at ``version`` on the spoke and on the hub."""
    platform, hub = now["platform"], now["hub_stack"]
    return bool(now["image"].endswith(f":{version}") and now["config"] == version
                # the model's own Deployment rolled to the release's runtime image, by the
                # release's controller
                and now["model_image"] == f"kserve/sklearnserver:{version}"
                and platform.get("phase") == "Available"
                and platform.get("stackVersion") == version
                and not platform.get("targetVersion")
                and hub.get("ready") and hub.get("version") == version
                and now["hub_model"].get("ready"))


def _serving(samples: list[dict[str, Any]]) -> str:
    """How the samples saw the model: serving in each, Ready on the hub in how many."""
    ready = sum(1 for x in samples if x["hub_model"].get("ready"))
    return (f"{len(samples)} samples, a predictor replica available in each, the model Ready "
            f"on the hub in {ready} (Progressing while its Deployment rolled in the others)")


def _agent_log(bed: Testbed) -> str:
    return (bed.log_dir / f"{bed.spokes[0].name}-agent.log").read_text(errors="replace")


def test_upgrade_to_the_current_pin_keeps_the_model_ready_throughout(fleet: Fleet) -> None:
    bed, _ = fleet
    before = _spoke_stack(bed)
    assert before["image"].endswith(f":{PREVIOUS}") and before["crd"] == PREVIOUS
    assert before["model_image"] == f"kserve/sklearnserver:{PREVIOUS}"
    assert not before["canary_field"]  # the previous pin's schema
    assert _hub_stack(bed).get("version") == PREVIOUS
    samples = _change_version(fleet, CURRENT, CURRENT)
    print(f"upgrade {PREVIOUS} -> {CURRENT}: {_serving(samples)}")
    after = samples[-1]
    assert after["crd"] == CURRENT and after["canary_field"]
    # The agent went through the controllers' step and said so.
    assert (f"upgrading KServe {PREVIOUS} -> {CURRENT}: the CRDs and controllers first"
            in _agent_log(bed))
    # The controller now running is the new release's (started from its Deployment's image).
    proc = bed.spokes[0].processes["kserve-controller"]
    assert f"kserve-{CURRENT}" in proc.argv[0] and proc.alive()


def test_a_version_the_agent_does_not_carry_is_refused_and_changes_nothing(
    fleet: Fleet,
) -> None:
    bed, step = fleet
    before = _spoke_stack(bed)
    _apply(bed, _modelserving("v0.19.0"))

    def refused() -> dict[str, Any] | None:
        entry = _hub_stack(bed)
        return entry if entry.get("phase") == "Degraded" else None

    entry = on_fleet(bed, step, refused, 120)
    assert "KServe v0.19.0 is not a version this agent carries" in entry["message"]
    assert f"it has {', '.join(KSERVE.versions)}" in entry["message"]
    assert not entry["ready"]
    now = _spoke_stack(bed)
    assert (now["image"], now["config"], now["crd"]) == (
        before["image"], before["config"], before["crd"])
    assert _spoke_model_ready(bed) and _hub_model(bed)["ready"]
    # Back to the default (the current pin it runs): Available again, the model still serving.
    _change_version(fleet, None, CURRENT)


SNO_NODE = "sno-node"
SNO_SIZE = {"cpu": "8", "memory": "16Gi", "pods": "250"}
"""The smallest single-node OpenShift: 8 vCPUs and 16 GiB."""
PLATFORM_SHARE = {"cpu": "7250m", "memory": "14Gi"}
"""What OpenShift's own pods are taken to request on it (a stand-in pod holds it): 750m CPU and
2 GiB are left to the serving stack and its models."""


def _pods(spoke: Any, namespace: str) -> list[dict[str, Any]]:
    return list(json.loads(spoke.kubectl("get", "pods", "-n", namespace, "-o",
                                         "json").stdout)["items"])


def _unscheduled(spoke: Any, *namespaces: str) -> dict[str, str]:
    """Pods the scheduler could not place, with its message."""
    return {p["metadata"]["name"]: c.get("message", "") for ns in namespaces
            for p in _pods(spoke, ns) for c in (p.get("status") or {}).get("conditions") or []
            if c["type"] == "PodScheduled" and c["status"] == "False"}


def _model_without_resources(name: str) -> dict[str, Any]:
    """A model that leaves its requests to KServe's defaults."""
    body = demo.public_model(name)
    body["spec"]["template"]["predictor"]["model"].pop("resources", None)
    return body


def test_a_single_node_cluster_schedules_every_pod_under_the_single_node_profile(
    fleet: Fleet,
) -> None:
    """A cluster whose only schedulable node is a minimal single-node OpenShift's: under the
    Default profile a model without requests of its own gets KServe's 1 CPU and never
    schedules; under SingleNode the controller moves onto the node and the model serves."""
    bed, step = fleet
    spoke = bed.spokes[0]
    default_node = f"{spoke.name}-node-0"
    spoke.apply_objects([
        {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": SNO_NODE, "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {"kubernetes.io/hostname": SNO_NODE, "kubernetes.io/os": "linux",
                       "type": "kwok"}},
         "status": {"capacity": SNO_SIZE, "allocatable": SNO_SIZE}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "sno-platform"}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "openshift",
                                                         "namespace": "sno-platform"},
         "spec": {"nodeName": SNO_NODE, "containers": [{
             "name": "platform", "image": "platform:1",
             "resources": {"requests": PLATFORM_SHARE}}]}},
    ])
    # kwok keeps a node's own sizes; the status subresource is where they are for certain
    spoke.kubectl("patch", "node", SNO_NODE, "--subresource=status", "--type=merge", "-p",
                  json.dumps({"status": {"capacity": SNO_SIZE, "allocatable": SNO_SIZE}}))
    spoke.kubectl("cordon", default_node)
    model, small = "fits", "fits-small"
    try:
        _apply(bed, _model_without_resources(model))
        pending = on_fleet(bed, step, lambda: _unscheduled(spoke, "models"), 120)
        assert any(model in name and "Insufficient cpu" in why for name, why in pending.items())
        assert not _hub_entry(bed, "multiclusterinferenceservices", model).get("ready")
        bed.hub.kubectl("delete", "mcisvc", model, "-n", NS)
        on_fleet(bed, step, lambda: not _unscheduled(spoke, "models"), 120)

        single = _modelserving(None)
        single["spec"]["profile"] = "SingleNode"
        single["spec"].pop("components")  # the example's explicit requests would win
        _apply(bed, single)

        def controller_moved() -> bool:
            pods = {p["metadata"]["name"]: (p["spec"].get("nodeName"), p["status"].get("phase"))
                    for p in _pods(spoke, KSERVE.namespace)
                    if p["metadata"]["name"].startswith(KSERVE.controller)}
            hub = _hub_stack(bed)
            assert pods and all(node == SNO_NODE for node, _ in pods.values()) and hub.get(
                "ready"), f"controller pods {pods}; hub {hub.get('phase')}: {hub.get('message')}"
            # the built-in runtime a model without requests inherits them from
            runtime = json.loads(spoke.kubectl("get", "clusterservingruntime",
                                               "kserve-sklearnserver", "-o", "json").stdout)
            requests = runtime["spec"]["containers"][0]["resources"]["requests"]
            assert requests == {"cpu": "100m", "memory": "256Mi"}, requests
            return True

        on_fleet(bed, step, controller_moved, 180)
        _apply(bed, _model_without_resources(small))
        on_fleet(bed, step, lambda: _hub_entry(
            bed, "multiclusterinferenceservices", small).get("ready"), 180)
        predictor = [p for p in _pods(spoke, "models") if p["metadata"]["name"].startswith(
            f"{small}-predictor")]
        assert predictor and all(p["spec"]["nodeName"] == SNO_NODE for p in predictor)
        assert _unscheduled(spoke, "models", KSERVE.namespace) == {}
    finally:
        bed.hub.kubectl("delete", "mcisvc", model, small, "-n", NS, "--ignore-not-found")
        _apply(bed, _modelserving(None))
        spoke.kubectl("uncordon", default_node)
        spoke.kubectl("delete", "namespace", "sno-platform", "--wait=false")
        spoke.kubectl("delete", "node", SNO_NODE, "--wait=false")


def test_downgrade_keeps_the_newer_crds_and_the_model_ready(fleet: Fleet) -> None:
    bed, _ = fleet
    samples = _change_version(fleet, PREVIOUS, PREVIOUS)
    print(f"downgrade {CURRENT} -> {PREVIOUS}: {_serving(samples)}")
    after = samples[-1]
    # The CRD keeps the newer schema: the older one would prune spec.canary from stored
    # InferenceServices.
    assert after["crd"] == CURRENT and after["canary_field"]
    # The agent took the two steps (its status shows the wait only if the controllers were
    # not rolled out by its next read, which on a fast pass they are: the log says it always).
    assert (f"upgrading KServe {CURRENT} -> {PREVIOUS}: the CRDs and controllers first"
            in _agent_log(bed))
