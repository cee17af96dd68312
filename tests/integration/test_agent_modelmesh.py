"""ModelMesh on a testbed spoke: install, built-in runtimes, serving namespaces and their
monitoring RoleBinding, removal blocked then forced."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
import yaml

from addon_agent.bundle_render import RUNTIMES_FILE, bundle_path
from addon_agent.pure import pod_security
from addon_agent.stacks import MODELMESH
from addon_api import constants as c
from testbed import upstream
from testbed.support.agent import (
    AgentProcess,
    get,
    leftovers,
    platform,
    timed,
    wait_phase,
    wait_runtimes_reported,
)
from testbed.support.waiting import eventually

NAME = "modelmesh"
MM_NS = "modelmesh-serving"
NEW_NS = "ml-new"
EXISTING_NS = "ml-existing"
SPEC: dict[str, Any] = {
    "platform": "ModelMesh",
    "modelmesh": {"podsPerRuntime": 1},
    "servingNamespaces": [NEW_NS, EXISTING_NS],
    "monitoring": {"enabled": True},
}
ISVC = {
    "apiVersion": "serving.kserve.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {
        "name": "users-model",
        "namespace": EXISTING_NS,
        "annotations": {"serving.kserve.io/deploymentMode": "ModelMesh"},
    },
    "spec": {
        "predictor": {"model": {"modelFormat": {"name": "sklearn"}, "storageUri": "s3://models/m"}}
    },
}


# Serving runtimes someone else created before the stack was installed (with the stack's
# webhook configuration in place nothing on the testbed could admit them): one with the name
# of a built-in runtime, one in a serving namespace.
FOREIGN_CSR = "triton-2.x"
FOREIGN_SR = "users-runtime"


def foreign_runtime(kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"team": "users"}}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": kind,
        "metadata": meta,
        "spec": {
            "multiModel": True,
            "supportedModelFormats": [{"name": "users-format", "autoSelect": True}],
            "containers": [{"name": "server", "image": "example.com/users/server:1"}],
        },
    }


@pytest.fixture(scope="module", autouse=True)
def existing_namespace(spoke: Any) -> None:
    spoke.kubectl("create", "namespace", EXISTING_NS, check=False)
    spoke.kubectl("label", "namespace", EXISTING_NS, "team=users", "--overwrite")
    spoke.kubectl("create", "configmap", "users-config", "-n", EXISTING_NS, check=False)
    spoke.apply_files(upstream.modelmesh_crds())

    def established() -> bool:
        # (kubectl wait fails on a CRD whose status has no conditions yet)
        for kind in ("servingruntimes", "clusterservingruntimes"):
            crd = get(spoke, "crd", f"{kind}.serving.kserve.io")
            conditions = (crd or {}).get("status", {}).get("conditions") or []
            assert any(
                c["type"] == "Established" and c["status"] == "True" for c in conditions
            ), crd
        return True

    eventually(established, timeout=120)
    spoke.apply_objects(
        [
            foreign_runtime("ClusterServingRuntime", FOREIGN_CSR),
            foreign_runtime("ServingRuntime", FOREIGN_SR, EXISTING_NS),
        ]
    )


def rendered_runtimes(bundles: Any) -> dict[str, dict[str, Any]]:
    text = (bundle_path(bundles, MODELMESH) / RUNTIMES_FILE).read_text()
    return {d["metadata"]["name"]: d for d in yaml.safe_load_all(text) if d}


def ours(obj: dict[str, Any]) -> bool:
    labels = obj["metadata"].get("labels") or {}
    return labels.get("app.kubernetes.io/managed-by") == "model-serving-addon"


def test_install_to_available(spoke: Any, agent: AgentProcess) -> None:
    spoke.apply_objects([platform(NAME, SPEC)])
    status, seconds = timed(lambda: wait_phase(spoke, NAME, "Available", timeout=180))
    print(f"ModelMesh install to Available: {seconds:.1f}s")
    assert status["stackVersion"] == "v0.12.0"
    assert status["readyComponents"] == status["totalComponents"] == 2  # controller + etcd
    controller = get(spoke, "deployment", "-n", MM_NS, "modelmesh-controller")
    args = controller["spec"]["template"]["spec"]["containers"][0].get("args", [])
    assert "--enable-leader-election" in args  # controllers keep their leader election


def test_builtin_runtimes_installed_as_rendered(
    spoke: Any, bundles: Any, agent: AgentProcess
) -> None:
    rendered = rendered_runtimes(bundles)
    assert set(rendered) == {"mlserver-1.x", "triton-2.x", "ovms-1.x", "torchserve-0.x"}
    for name, want in rendered.items():
        live = get(spoke, "clusterservingruntime", name)
        if name == FOREIGN_CSR:  # someone else's: not taken over, not changed
            assert not ours(live), live["metadata"]
            assert live["spec"]["containers"][0]["image"] == "example.com/users/server:1"
            continue
        assert ours(live), live["metadata"]
        assert live["kind"] == "ClusterServingRuntime" and "namespace" not in live["metadata"]
        # as rendered, with the agent's container hardening (docs/openshift.md)
        assert live["spec"] == pod_security.harden_runtime(copy.deepcopy(want))["spec"], name
        for key, value in want["metadata"]["labels"].items():
            if key != "app.kubernetes.io/managed-by":
                assert live["metadata"]["labels"][key] == value
    status = wait_phase(spoke, NAME, "Available", timeout=60)
    # someone else's runtime of a built-in's name is reported, the stack stays Available
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ForeignObjectConflict"), status
    assert f"deletes them): ClusterServingRuntime {FOREIGN_CSR}" in status["message"], status
    users = get(spoke, "servingruntime", "-n", EXISTING_NS, FOREIGN_SR)
    assert not ours(users) and users["metadata"]["labels"] == {"team": "users"}


def test_modelmesh_configuration(spoke: Any, agent: AgentProcess) -> None:
    config = get(spoke, "configmap", "-n", MM_NS, "model-serving-config")
    assert "podsPerRuntime: 1" in config["data"]["config.yaml"]
    etcd = get(spoke, "secret", "-n", MM_NS, "model-serving-etcd")
    connection = json.loads(base64.b64decode(etcd["data"]["etcd_connection"]))
    assert connection["endpoints"] == f"http://etcd.{MM_NS}.svc:2379"
    assert get(spoke, "deployment", "-n", MM_NS, "etcd") is not None
    hook = get(
        spoke, "validatingwebhookconfiguration", "modelmesh-servingruntime.serving.kserve.io"
    )
    cert = get(spoke, "secret", "-n", MM_NS, "modelmesh-webhook-server-cert")
    assert hook["webhooks"][0]["clientConfig"]["caBundle"] == cert["data"]["ca.crt"]
    assert hook["webhooks"][0]["clientConfig"]["service"]["namespace"] == MM_NS


def test_external_etcd_replaces_the_builtin_one(spoke: Any, agent: AgentProcess) -> None:
    connection = {"endpoints": "https://etcd.example.com:2379", "root_prefix": "mm"}
    spoke.apply_objects(
        [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "users-etcd", "namespace": MM_NS},
                "stringData": {"etcd_connection": json.dumps(connection)},
            }
        ]
    )
    external = {"external": {"secretRef": {"name": "users-etcd"}}}
    spoke.apply_objects(
        [platform(NAME, {**SPEC, "modelmesh": {**SPEC["modelmesh"], "etcd": external}})]
    )

    def switched() -> bool:
        controller = get(spoke, "deployment", "-n", MM_NS, "modelmesh-controller")
        env = controller["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "ETCD_SECRET_NAME", "value": "users-etcd"} in env, env
        assert get(spoke, "deployment", "-n", MM_NS, "etcd") is None
        assert get(spoke, "secret", "-n", MM_NS, "model-serving-etcd") is None
        return True

    eventually(switched, timeout=60)
    status = wait_phase(spoke, NAME, "Available", timeout=120)
    assert status["totalComponents"] == 1  # the controller only
    assert get(spoke, "secret", "-n", MM_NS, "users-etcd") is not None  # the user's, kept
    spoke.apply_objects([platform(NAME, SPEC)])  # back to the built-in etcd
    status = wait_phase(spoke, NAME, "Available", timeout=120)
    assert status["totalComponents"] == 2
    assert get(spoke, "secret", "-n", MM_NS, "model-serving-etcd") is not None


def test_second_platform_only_reports_the_conflict(spoke: Any, agent: AgentProcess) -> None:
    spoke.apply_objects([platform("intruder", {"platform": "KServe"})])
    status = wait_phase(spoke, "intruder", "Degraded", timeout=60)
    assert f"ServingPlatform {NAME} manages" in status["message"]
    assert get(spoke, "namespace", "kserve") is None
    # deleting it removes nothing of the stack the first one owns
    spoke.kubectl("delete", "servingplatform", "intruder", "--timeout=60s")
    wait_phase(spoke, NAME, "Available", timeout=30)
    assert get(spoke, "deployment", "-n", MM_NS, "modelmesh-controller") is not None


def test_serving_namespaces_enabled(spoke: Any, agent: AgentProcess) -> None:
    def check() -> bool:
        for ns in (NEW_NS, EXISTING_NS):
            obj = get(spoke, "namespace", ns)
            assert obj["metadata"]["labels"].get("modelmesh-enabled") == "true", obj
            assert get(spoke, "rolebinding", "-n", ns, "model-serving-monitoring") is not None
        created = get(spoke, "namespace", NEW_NS)["metadata"].get("annotations") or {}
        assert created.get("modelserving.opendatahub.io/created-by-agent") == "true"
        existing = get(spoke, "namespace", EXISTING_NS)["metadata"].get("annotations") or {}
        assert "modelserving.opendatahub.io/created-by-agent" not in existing
        return True

    eventually(check, timeout=30)


def test_monitoring_subject_is_configurable(spoke: Any, agent: AgentProcess) -> None:
    def subjects(ns: str) -> list[dict[str, Any]]:
        rb = get(spoke, "rolebinding", "-n", ns, "model-serving-monitoring")
        return list((rb or {}).get("subjects") or [])

    default = {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}
    for ns in (NEW_NS, EXISTING_NS):
        assert subjects(ns) == [default]
    openshift = {"namespace": "openshift-monitoring", "name": "prometheus-k8s"}
    spoke.apply_objects(
        [
            platform(
                NAME,
                {**SPEC, "monitoring": {"enabled": True, "prometheusServiceAccount": openshift}},
            )
        ]
    )
    wanted = [{"kind": "ServiceAccount", **openshift}]
    # the subject is replaced in place: the old one is not left behind
    eventually(lambda: all(subjects(ns) == wanted for ns in (NEW_NS, EXISTING_NS)), timeout=30)
    spoke.apply_objects([platform(NAME, SPEC)])
    eventually(lambda: all(subjects(ns) == [default] for ns in (NEW_NS, EXISTING_NS)), timeout=30)


def test_serving_namespaces_disabled_without_touching_foreign_objects(
    spoke: Any, agent: AgentProcess
) -> None:
    spoke.apply_objects([platform(NAME, {**SPEC, "servingNamespaces": []})])

    def check() -> bool:
        new = get(spoke, "namespace", NEW_NS)
        assert new is None or new["metadata"].get("deletionTimestamp"), new
        existing = get(spoke, "namespace", EXISTING_NS)
        labels = existing["metadata"]["labels"]
        assert "modelmesh-enabled" not in labels and labels["team"] == "users", labels
        assert get(spoke, "rolebinding", "-n", EXISTING_NS, "model-serving-monitoring") is None
        return True

    eventually(check, timeout=30)
    assert get(spoke, "configmap", "-n", EXISTING_NS, "users-config") is not None
    spoke.apply_objects([platform(NAME, {**SPEC, "servingNamespaces": [EXISTING_NS]})])
    eventually(
        lambda: (
            get(spoke, "namespace", EXISTING_NS)["metadata"]["labels"].get("modelmesh-enabled")
            == "true"
        ),
        timeout=30,
    )


def test_builtin_runtimes_disabled_leaves_foreign_runtimes(
    spoke: Any, bundles: Any, agent: AgentProcess
) -> None:
    off = {**SPEC, "servingNamespaces": [EXISTING_NS]}
    off["modelmesh"] = {**SPEC["modelmesh"], "builtInRuntimes": False}
    spoke.apply_objects([platform(NAME, off)])
    builtins = set(rendered_runtimes(bundles)) - {FOREIGN_CSR}

    def gone() -> bool:
        left = [n for n in builtins if get(spoke, "clusterservingruntime", n) is not None]
        assert not left, left
        return True

    eventually(gone, timeout=60)
    wait_phase(spoke, NAME, "Available", timeout=60)
    foreign = get(spoke, "clusterservingruntime", FOREIGN_CSR)
    assert foreign is not None and not ours(foreign)
    assert foreign["spec"]["containers"][0]["image"] == "example.com/users/server:1"
    users = get(spoke, "servingruntime", "-n", EXISTING_NS, FOREIGN_SR)
    assert users is not None and not ours(users)


def test_builtin_runtimes_the_webhook_cannot_admit_are_reported(
    spoke: Any, agent: AgentProcess
) -> None:
    # Turned back on, the runtimes must now pass ModelMesh's validating webhook, which only
    # the real modelmesh-controller serves (none runs on the testbed): the agent reports them
    # and the rest of the stack stays Available.
    spoke.apply_objects([platform(NAME, {**SPEC, "servingNamespaces": [EXISTING_NS]})])

    status, seconds = timed(lambda: wait_runtimes_reported(spoke, NAME))
    print(f"ModelMesh runtimes rejected by the unserved webhook reported after {seconds:.1f}s")
    assert "ClusterServingRuntime mlserver-1.x" in status["message"]
    assert get(spoke, "clusterservingruntime", "mlserver-1.x") is None


def test_removal_waits_for_the_add_ons_inference_services_deleting_nothing(
    spoke: Any, agent: AgentProcess
) -> None:
    """An InferenceService the add-on created (labelled so) carrying a controller's finalizer:
    a removal deletes nothing while it exists (the controller must process the finalizer)."""
    held = {**ISVC, "metadata": {
        **ISVC["metadata"], "name": "addon-model", "finalizers": ["test.example/hold"],
        "labels": {c.LABEL_PART_OF: c.ADDON_NAME},
    }}
    spoke.apply_objects([held])
    try:
        managed = {**SPEC, "servingNamespaces": [EXISTING_NS]}  # as the test before left it
        spoke.apply_objects([platform(NAME, {**managed, "managementState": "Removed"})])
        status = wait_phase(spoke, NAME, "Removing", timeout=60)
        assert status["message"].startswith(
            f"waiting for InferenceServices to be deleted: {EXISTING_NS}/addon-model"), status
        reasons = {x["reason"] for x in status["conditions"]}
        assert reasons == {"WaitingForInferenceServices"}, status
        # nothing was deleted: the controller is there, the serving namespace still enabled
        assert get(spoke, "deployment", "-n", MM_NS, "modelmesh-controller") is not None
        labels = get(spoke, "namespace", EXISTING_NS)["metadata"]["labels"]
        assert labels.get("modelmesh-enabled") == "true", labels
        spoke.apply_objects([platform(NAME, managed)])
        wait_phase(spoke, NAME, "Available", timeout=120)
    finally:
        spoke.kubectl("delete", "isvc", "addon-model", "-n", EXISTING_NS, "--wait=false",
                      check=False)
        spoke.kubectl("patch", "isvc", "addon-model", "-n", EXISTING_NS, "--type=merge",
                      "-p", '{"metadata":{"finalizers":null}}', check=False)


def test_removal_blocked_by_foreign_inference_service(spoke: Any, agent: AgentProcess) -> None:
    # ModelMesh's only admission webhook covers ServingRuntimes, so this InferenceService is
    # admitted while the stack's webhook configuration is installed.
    spoke.apply_objects([ISVC])
    # no controller reconciles it on the testbed, so it has no Ready condition: Unknown
    eventually(
        lambda: 'model_serving_inferenceservices{state="Unknown"} 1.0' in agent.metrics(),
        timeout=30,
    )
    spoke.apply_objects([platform(NAME, {**SPEC, "managementState": "Removed"})])
    status = wait_phase(spoke, NAME, "RemovalBlocked", timeout=60)
    assert f"{EXISTING_NS}/users-model" in status["message"]
    # nothing was uninstalled
    assert get(spoke, "deployment", "-n", MM_NS, "modelmesh-controller") is not None
    assert get(spoke, "inferenceservice", "-n", EXISTING_NS, "users-model") is not None


def test_forced_removal_leaves_nothing_behind(spoke: Any, agent: AgentProcess) -> None:
    spoke.apply_objects([platform(NAME, {**SPEC, "managementState": "Removed", "force": True})])
    status, seconds = timed(lambda: wait_phase(spoke, NAME, "Removed", timeout=180))
    print(f"ModelMesh removal: {seconds:.1f}s")
    # the user's etcd Secret (test_external_etcd_replaces_the_builtin_one) keeps the stack's
    # namespace, which the agent created; once it is gone the agent deletes the namespace
    assert f"Namespace {MM_NS} (holds Secret {MM_NS}/users-etcd)" in status["message"], status
    eventually(lambda: leftovers(spoke) == [f"Namespace /{MM_NS}"], timeout=120)
    assert get(spoke, "secret", "-n", MM_NS, "users-etcd") is not None
    spoke.kubectl("delete", "secret", "users-etcd", "-n", MM_NS)
    eventually(lambda: leftovers(spoke) == [], timeout=120)
    existing = get(spoke, "namespace", EXISTING_NS)
    assert existing is not None and not existing["metadata"].get("deletionTimestamp")
    assert "modelmesh-enabled" not in existing["metadata"]["labels"]
    assert get(spoke, "configmap", "-n", EXISTING_NS, "users-config") is not None
    spoke.kubectl("delete", "servingplatform", NAME, "--timeout=60s")
