"""ModelMesh on a testbed spoke: install, serving namespaces, removal blocked then forced."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.helpers import eventually
from tests.integration import agent_support as support
from tests.integration.agent_support import (
    AgentProcess,
    get,
    leftovers,
    platform,
    timed,
    wait_phase,
)

bundles = support.bundles
spoke = support.spoke
agent = support.agent

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


@pytest.fixture(scope="module", autouse=True)
def existing_namespace(spoke: Any) -> None:
    spoke.kubectl("create", "namespace", EXISTING_NS, check=False)
    spoke.kubectl("label", "namespace", EXISTING_NS, "team=users", "--overwrite")
    spoke.kubectl("create", "configmap", "users-config", "-n", EXISTING_NS, check=False)


def test_install_to_available(spoke: Any, agent: AgentProcess) -> None:
    spoke.apply_objects([platform(NAME, SPEC)])
    status, seconds = timed(lambda: wait_phase(spoke, NAME, "Available", timeout=180))
    print(f"ModelMesh install to Available: {seconds:.1f}s")
    assert status["stackVersion"] == "v0.12.0"
    assert status["readyComponents"] == status["totalComponents"] == 2  # controller + etcd


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
    _, seconds = timed(lambda: wait_phase(spoke, NAME, "Removed", timeout=180))
    print(f"ModelMesh removal: {seconds:.1f}s")
    eventually(lambda: leftovers(spoke) == [], timeout=120)
    existing = get(spoke, "namespace", EXISTING_NS)
    assert existing is not None and not existing["metadata"].get("deletionTimestamp")
    assert "modelmesh-enabled" not in existing["metadata"]["labels"]
    assert get(spoke, "configmap", "-n", EXISTING_NS, "users-config") is not None
    spoke.kubectl("delete", "servingplatform", NAME, "--timeout=60s")
