"""Sealed storage connections on a testbed spoke: delivery, tampering, ownership, key restart."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest

from addon_api import constants as c
from addon_api import sealing
from testbed.support.agent import AgentProcess, get, seal_for
from testbed.support.waiting import eventually

CONN_NS = "storage-conns"
TEAM_A = "team-a"
TEAM_B = "team-b"
PAYLOAD = {
    "type": "s3",
    "access_key_id": "AKIA-TEST",
    "secret_access_key": "s3cr3t",
    "endpoint_url": "http://minio.example:9000",
    "region": "us-east-1",
    "bucket": "models",
}


def identity(cluster: Any) -> tuple[str, str]:
    cm = eventually(
        lambda: get(cluster, "configmap", "-n", c.AGENT_NAMESPACE, c.AGENT_IDENTITY_CONFIGMAP),
        timeout=60,
    )
    return cm["data"][c.IDENTITY_PUBLIC_KEY], cm["data"][c.IDENTITY_KEY_ID]


def connection(
    cluster: Any,
    name: str,
    entry: str,
    targets: list[str],
    sealed: str | None = None,
    payload: dict[str, Any] | None = None,
) -> dict[str, Any]:
    public, key_id = identity(cluster)
    spec: dict[str, Any] = {
        "keyId": key_id,
        "type": "s3",
        "targetNamespaces": targets,
        "entryName": entry,
    }
    if sealed is None:
        sealed = seal_for(cluster, public, CONN_NS, name, spec, payload or PAYLOAD)
    return {
        "apiVersion": f"{c.GROUP}/{c.VERSION}",
        "kind": "SealedStorageConnection",
        "metadata": {"name": name, "namespace": CONN_NS},
        "spec": {**spec, "sealed": sealed},
    }


def status(cluster: Any, name: str) -> dict[str, Any]:
    obj = get(cluster, "sealedstorageconnection", "-n", CONN_NS, name)
    return dict((obj or {}).get("status") or {})


def wait_status(cluster: Any, name: str, phase: str) -> dict[str, Any]:
    def check() -> dict[str, Any]:
        obj = get(cluster, "sealedstorageconnection", "-n", CONN_NS, name)
        st = (obj or {}).get("status") or {}
        assert st.get("phase") == phase, st
        assert st.get("observedGeneration") == obj["metadata"]["generation"], st
        return dict(st)

    return eventually(check, timeout=60)


def entries(cluster: Any, namespace: str) -> dict[str, Any]:
    secret = get(cluster, "secret", "-n", namespace, c.STORAGE_CONFIG_SECRET)
    if secret is None:
        return {}
    return {k: json.loads(base64.b64decode(v)) for k, v in (secret.get("data") or {}).items()}


@pytest.fixture(scope="module", autouse=True)
def namespaces(spoke: Any) -> None:
    for ns in (CONN_NS, TEAM_A, TEAM_B):
        spoke.kubectl("create", "namespace", ns, check=False)
    foreign = base64.b64encode(json.dumps({"type": "gcs", "bucket": "theirs"}).encode()).decode()
    spoke.apply_objects(
        [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": c.STORAGE_CONFIG_SECRET, "namespace": TEAM_B},
                "data": {"theirs": foreign},
            }
        ]
    )


def test_key_is_published(spoke: Any, agent: AgentProcess) -> None:
    public, key_id = identity(spoke)
    assert key_id == sealing.key_id(public)
    secret = get(spoke, "secret", "-n", c.AGENT_STATE_NAMESPACE, c.AGENT_KEY_SECRET)
    assert secret is not None


def test_sealed_connection_becomes_entries(spoke: Any, agent: AgentProcess) -> None:
    spoke.apply_objects([connection(spoke, "s3", "my-s3", [TEAM_A, TEAM_B])])
    st = wait_status(spoke, "s3", "Delivered")
    assert {x["type"]: x["status"] for x in st["conditions"]}["Delivered"] == "True"
    assert entries(spoke, TEAM_A) == {"my-s3": PAYLOAD}
    assert entries(spoke, TEAM_B) == {
        "my-s3": PAYLOAD,
        "theirs": {"type": "gcs", "bucket": "theirs"},
    }


def test_a_connection_waiting_for_its_namespace_is_delivered_when_it_appears(
    spoke: Any, agent: AgentProcess
) -> None:
    """Pending (NamespaceMissing) until the namespace exists, then delivered at once: the
    agent watches for it (the resync timer of sealed connections is 30 s here)."""
    late = "team-late"
    spoke.kubectl("delete", "namespace", late, "--ignore-not-found", "--wait=true")
    spoke.apply_objects([connection(spoke, "late", "late-s3", [late])])
    st = wait_status(spoke, "late", "Pending")
    assert {x["type"]: x["reason"] for x in st["conditions"]}["Delivered"] == "NamespaceMissing"
    spoke.kubectl("create", "namespace", late)
    created = time.monotonic()
    eventually(lambda: status(spoke, "late").get("phase") == "Delivered", timeout=10,
               interval=0.2)
    print(f"delivered {time.monotonic() - created:.1f}s after the namespace was created")
    assert entries(spoke, late) == {"late-s3": PAYLOAD}
    spoke.kubectl("delete", "sealedstorageconnection", "late", "-n", CONN_NS)
    spoke.kubectl("delete", "namespace", late, "--wait=false")


def test_tampered_payload_is_rejected(spoke: Any, agent: AgentProcess) -> None:
    good = connection(spoke, "bad", "bad-entry", [TEAM_A])
    raw = bytearray(base64.b64decode(good["spec"]["sealed"]))
    raw[-1] ^= 0x01
    good["spec"]["sealed"] = base64.b64encode(bytes(raw)).decode()
    spoke.apply_objects([good])
    st = wait_status(spoke, "bad", "Failed")
    delivered = {x["type"]: x for x in st["conditions"]}["Delivered"]
    assert delivered["status"] == "False" and delivered["reason"] == "DecryptFailed"
    assert "bad-entry" not in entries(spoke, TEAM_A)


def test_ciphertext_copied_to_another_object_is_rejected(spoke: Any, agent: AgentProcess) -> None:
    sealed = get(spoke, "sealedstorageconnection", "-n", CONN_NS, "s3")["spec"]["sealed"]
    spoke.apply_objects([connection(spoke, "copy", "copy-entry", [TEAM_A], sealed=sealed)])
    st = wait_status(spoke, "copy", "Failed")
    assert "sealed for" in st["message"]
    assert "copy-entry" not in entries(spoke, TEAM_A)


def test_foreign_entry_is_never_rewritten(spoke: Any, agent: AgentProcess) -> None:
    spoke.apply_objects([connection(spoke, "clash", "theirs", [TEAM_B])])
    st = wait_status(spoke, "clash", "Failed")
    assert {x["type"]: x for x in st["conditions"]}["Delivered"]["reason"] == "EntryConflict"
    assert entries(spoke, TEAM_B)["theirs"] == {"type": "gcs", "bucket": "theirs"}


def test_retargeting_removes_entry_from_dropped_namespace(spoke: Any, agent: AgentProcess) -> None:
    spoke.apply_objects([connection(spoke, "s3", "my-s3", [TEAM_A])])
    wait_status(spoke, "s3", "Delivered")
    eventually(lambda: "my-s3" not in entries(spoke, TEAM_B), timeout=30)
    assert "theirs" in entries(spoke, TEAM_B)


def test_private_key_survives_restart(spoke: Any, agent: AgentProcess) -> None:
    before = identity(spoke)
    secret_before = get(spoke, "secret", "-n", c.AGENT_STATE_NAMESPACE, c.AGENT_KEY_SECRET)["data"]
    agent.restart()
    eventually(lambda: agent.metrics(), timeout=30)
    assert identity(spoke) == before
    after = get(spoke, "secret", "-n", c.AGENT_STATE_NAMESPACE, c.AGENT_KEY_SECRET)["data"]
    assert after == secret_before
    # a payload sealed to the published key before the restart still opens
    spoke.apply_objects([connection(spoke, "after", "after-restart", [TEAM_A])])
    wait_status(spoke, "after", "Delivered")
    assert entries(spoke, TEAM_A)["after-restart"] == PAYLOAD


def test_deleting_connection_removes_only_its_entry(spoke: Any, agent: AgentProcess) -> None:
    spoke.kubectl("delete", "sealedstorageconnection", "-n", CONN_NS, "after", "--timeout=60s")
    eventually(lambda: "after-restart" not in entries(spoke, TEAM_A), timeout=30)
    assert "my-s3" in entries(spoke, TEAM_A)
    spoke.kubectl("delete", "sealedstorageconnection", "-n", CONN_NS, "s3", "--timeout=60s")
    # the agent created team-a's storage-config: with its last entry gone, the Secret goes
    eventually(lambda: get(spoke, "secret", "-n", TEAM_A, c.STORAGE_CONFIG_SECRET) is None)
    assert entries(spoke, TEAM_B) == {"theirs": {"type": "gcs", "bucket": "theirs"}}
    for name in ("bad", "copy", "clash"):
        spoke.kubectl("delete", "sealedstorageconnection", "-n", CONN_NS, name, "--timeout=60s")


def test_the_release_hook_removes_entries_and_finalizers_with_the_agents_identity(
    spoke: Any, agent: AgentProcess
) -> None:
    """What OCM's pre-delete hook Job runs when the add-on is disabled (issue 29, item 11),
    here as a process with the agent's ServiceAccount kubeconfig, the agent stopped: the
    connection's plaintext entry goes (another writer's stays), its finalizer goes, so the
    object can be deleted without an agent."""
    import subprocess
    import sys
    from pathlib import Path

    spoke.apply_objects([connection(spoke, "rel", "released", [TEAM_A])])
    wait_status(spoke, "rel", "Delivered")
    assert "released" in entries(spoke, TEAM_A)
    agent.stop()
    try:
        done = subprocess.run(
            [str(Path(sys.executable).parent / "model-serving-addon"), "agent-release",
             f"--kubeconfig={agent.kubeconfig}"],
            capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert f"{CONN_NS}/rel" in done.stdout, done.stdout
        assert "released" not in entries(spoke, TEAM_A)
        assert entries(spoke, TEAM_B) == {"theirs": {"type": "gcs", "bucket": "theirs"}}
        sealed = get(spoke, "sealedstorageconnection", "-n", CONN_NS, "rel")
        assert f"{c.GROUP}/agent" not in (sealed["metadata"].get("finalizers") or [])
        spoke.kubectl("delete", "sealedstorageconnection", "-n", CONN_NS, "rel", "--timeout=30s")
    finally:
        agent.start()
