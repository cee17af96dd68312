"""Manager edge cases on the testbed: missing placement, conflicts, sealing, removal, blocking."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from addon_api import constants as c
from addon_api import sealing
from addon_manager import naming, render
from testbed.fleet import Testbed
from testbed.support.manager import (
    API,
    Manager,
    exists,
    get_json,
    intent,
    model_serving,
    placement,
    running_manager,
    works,
)
from testbed.support.waiting import eventually


@pytest.fixture(scope="module")
def manager(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Manager]:
    """One manager for the module, add-on enablement on."""
    with running_manager(
        testbed, tmp_path_factory.mktemp("manager"), "--deletion-blocked-after=5"
    ) as mgr:
        yield mgr


@pytest.fixture
def cluster1_label(testbed: Testbed) -> Iterator[str]:
    """A fresh label put on cluster1 only (a Placement on it selects cluster1 alone)."""
    label = f"t-{uuid.uuid4().hex[:6]}"
    testbed.hub.kubectl("label", "managedcluster", "cluster1", f"{label}=yes")
    yield label
    testbed.hub.kubectl("label", "managedcluster", "cluster1", f"{label}-", check=False)


def _status(hub: Any, plural: str, ns: str, name: str) -> dict[str, Any]:
    return dict(get_json(hub, plural, name, "-n", ns).get("status") or {})


def _cond(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next((x for x in status.get("conditions", []) if x["type"] == ctype), {})


def _delete_all(hub: Any, ns: str) -> None:
    hub.kubectl("delete", "msv,sconn,mcsr,mcisvc", "--all", "-n", ns, "--wait=false", check=False)
    eventually(lambda: get_json(hub, "msv,sconn,mcsr,mcisvc", "-n", ns)["items"] == [], timeout=90)


def _runtime(name: str, ns: str, placement_name: str) -> dict[str, Any]:
    return intent(
        "MultiClusterServingRuntime", name, ns, placement_name,
        targetNamespace="models",
        template={
            "containers": [{"name": "c", "image": "img:1"}],
            "supportedModelFormats": [{"name": "sklearn"}],
        },
    )


def test_missing_placement_is_a_condition_not_a_loop(
    testbed: Testbed, hub_namespace: str, manager: Manager
) -> None:
    hub, ns = testbed.hub, hub_namespace
    hub.apply_objects([_runtime("rt", ns, "nope")])
    try:
        eventually(
            lambda: (
                _cond(_status(hub, "mcsr", ns, "rt"), "PlacementResolved").get("reason")
                == "PlacementNotFound"
            ),
            timeout=30,
        )
        st = _status(hub, "mcsr", ns, "rt")
        assert st["phase"] == "Pending" and st["summary"]["readyText"] == "0/0"
        manager.wait_quiet(window=5)  # no retry loop: it settles, 5 s without a reconcile
        # A Placement that selects nothing is reported as such.
        hub.apply_objects([placement("nope", ns, {f"absent-{uuid.uuid4().hex[:6]}": "x"})])
        eventually(
            lambda: (
                _cond(_status(hub, "mcsr", ns, "rt"), "PlacementResolved").get("reason")
                == "NoClustersSelected"
            ),
            timeout=60,
        )
        assert works(hub, ns, "rt", "MultiClusterServingRuntime") == {}
    finally:
        _delete_all(hub, ns)


def test_conflict_oldest_model_serving_wins(
    testbed: Testbed, hub_namespace: str, manager: Manager, cluster1_label: str
) -> None:
    hub, ns = testbed.hub, hub_namespace
    hub.apply_objects(
        [placement("p", ns, {cluster1_label: "yes"}), model_serving("first", ns, "p")]
    )
    try:
        eventually(lambda: set(works(hub, ns, "first", "ModelServing")) == {"cluster1"}, timeout=60)
        # creationTimestamp has a one-second resolution: the second must be a second younger.
        created = get_json(hub, "msv", "first", "-n", ns)["metadata"]["creationTimestamp"]
        born = datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        eventually(lambda: datetime.now(UTC) >= born + timedelta(seconds=1.05), interval=0.05)
        hub.apply_objects([model_serving("second", ns, "p", platform="ModelMesh")])

        def conflicted() -> bool:
            entries = _status(hub, "msv", ns, "second").get("clusters", [])
            return [(x["cluster"], x["reason"]) for x in entries] == [("cluster1", "Conflict")]

        eventually(conflicted, timeout=30)
        st = _status(hub, "msv", ns, "second")
        assert "first" in st["clusters"][0]["message"] and st["phase"] == "Degraded"
        assert works(hub, ns, "second", "ModelServing") == {}
        # The transition is announced as an Event on the intent.
        eventually(
            lambda: (
                {"Conflict", "Degraded"}
                <= {
                    e["reason"]
                    for e in get_json(
                        hub, "events", "-n", ns, "--field-selector", "involvedObject.name=second"
                    )["items"]
                }
            ),
            timeout=30,
        )
        # Add-on enablement: the cluster the winner selects gets the ManagedClusterAddOn.
        eventually(
            lambda: exists(hub, "managedclusteraddon", c.ADDON_NAME, "-n", "cluster1"), timeout=30
        )
        # When the winner goes, the other one takes the cluster over.
        hub.kubectl("delete", "msv", "first", "-n", ns, "--wait=false")
        eventually(
            lambda: set(works(hub, ns, "second", "ModelServing")) == {"cluster1"}, timeout=90
        )
        sp = eventually(
            lambda: (
                get_json(testbed.spokes[0], "servingplatform", "model-serving")
                if get_json(testbed.spokes[0], "servingplatform", "model-serving")["spec"][
                    "platform"
                ]
                == "ModelMesh"
                else None
            ),
            timeout=60,
        )
        assert sp["spec"]["source"] == {"namespace": ns, "name": "second"}
    finally:
        _delete_all(hub, ns)


def test_unpublished_key_then_sealed_and_resealed(
    testbed: Testbed, hub_namespace: str, manager: Manager, cluster1_label: str
) -> None:
    hub, spoke1, ns = testbed.hub, testbed.spokes[0], hub_namespace
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds", "namespace": ns},
        "stringData": {"AWS_ACCESS_KEY_ID": "AK1", "AWS_SECRET_ACCESS_KEY": "SK1"},
    }
    sconn = {
        "apiVersion": API,
        "kind": "StorageConnection",
        "metadata": {"name": "s3", "namespace": ns},
        "spec": {
            "placementRef": {"name": "p"},
            "type": "s3",
            "targetNamespaces": ["models"],
            "secretRef": {
                "name": "creds",
                "keys": {
                    "access_key_id": "AWS_ACCESS_KEY_ID",
                    "secret_access_key": "AWS_SECRET_ACCESS_KEY",
                },
            },
            "s3": {"endpoint": "http://minio:9000", "region": "us-east-1", "bucket": "models"},
        },
    }
    spoke1.kubectl(
        "delete", "configmap", c.AGENT_IDENTITY_CONFIGMAP, "-n", c.AGENT_NAMESPACE, check=False
    )
    hub.apply_objects([placement("p", ns, {cluster1_label: "yes"}), secret, sconn])
    try:

        def waiting_for_key() -> bool:
            entries = _status(hub, "sconn", ns, "s3").get("clusters", [])
            return [(x["cluster"], x["reason"]) for x in entries] == [
                ("cluster1", "WaitingForAgentKey")
            ]

        eventually(waiting_for_key, timeout=30)
        assert works(hub, ns, "s3", "StorageConnection") == {}
        assert exists(hub, "manifestwork", naming.IDENTITY_WORK_NAME, "-n", "cluster1")

        # The agent publishes its key (done here as the agent would).
        private = sealing.generate_private_key()
        public = sealing.public_key_of(private)
        spoke1.apply_objects(
            [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": c.AGENT_IDENTITY_CONFIGMAP,
                        "namespace": c.AGENT_NAMESPACE,
                    },
                    "data": {
                        c.IDENTITY_PUBLIC_KEY: public,
                        c.IDENTITY_KEY_ID: sealing.key_id(public),
                    },
                }
            ]
        )
        binding = sealing.binding_for(c.AGENT_NAMESPACE, naming.sealed_name(ns, "s3"))

        def opened() -> dict[str, Any]:
            obj = get_json(
                spoke1,
                "sealedstorageconnection",
                naming.sealed_name(ns, "s3"),
                "-n",
                c.AGENT_NAMESPACE,
            )
            assert obj["spec"]["keyId"] == sealing.key_id(public)
            return sealing.unseal(private, binding, obj["spec"]["sealed"])

        payload = eventually(opened, timeout=60)
        assert payload == {
            "type": "s3",
            "access_key_id": "AK1",
            "secret_access_key": "SK1",
            "endpoint_url": "http://minio:9000",
            "region": "us-east-1",
            "bucket": "models",
        }
        # No plaintext credential in any ManifestWork on the hub.
        dump = json.dumps(get_json(hub, "manifestworks", "-n", "cluster1"))
        assert "SK1" not in dump and base64.b64encode(b"SK1").decode() not in dump

        # A changed Secret is sealed again.
        hub.kubectl(
            "patch",
            "secret",
            "creds",
            "-n",
            ns,
            "--type=merge",
            "-p",
            json.dumps({"stringData": {"AWS_SECRET_ACCESS_KEY": "SK2"}}),
        )
        eventually(lambda: opened()["secret_access_key"] == "SK2", timeout=60)

        # An override for this cluster: another bucket, credentials from another Secret.
        hub.apply_objects(
            [
                {
                    **secret,
                    "metadata": {"name": "creds-eu", "namespace": ns},
                    "stringData": {"AWS_ACCESS_KEY_ID": "AK3", "AWS_SECRET_ACCESS_KEY": "SK3"},
                }
            ]
        )
        override = {
            "clusterNames": ["cluster1"],
            "patch": {"s3": {"bucket": "models-eu"}, "secretRef": {"name": "creds-eu"}},
        }
        hub.kubectl(
            "patch", "sconn", "s3", "-n", ns, "--type=merge",
            "-p", json.dumps({"spec": {"overrides": [override]}}),
        )
        eventually(
            lambda: opened()
            == {
                "type": "s3",
                "access_key_id": "AK3",
                "secret_access_key": "SK3",
                "endpoint_url": "http://minio:9000",
                "region": "us-east-1",
                "bucket": "models-eu",
            },
            timeout=60,
        )
        # The Secret an override names is watched like the spec's own.
        hub.kubectl(
            "patch", "secret", "creds-eu", "-n", ns, "--type=merge",
            "-p", json.dumps({"stringData": {"AWS_SECRET_ACCESS_KEY": "SK4"}}),
        )
        eventually(lambda: opened()["secret_access_key"] == "SK4", timeout=60)
        dump = json.dumps(get_json(hub, "manifestworks", "-n", "cluster1"))
        assert "SK4" not in dump and base64.b64encode(b"SK4").decode() not in dump

        # The agent reports delivery: the hub intent becomes ready.
        spoke1.kubectl(
            "patch",
            "sealedstorageconnection",
            naming.sealed_name(ns, "s3"),
            "-n",
            c.AGENT_NAMESPACE,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": {"phase": "Delivered"}}),
        )
        eventually(lambda: _status(hub, "sconn", ns, "s3").get("phase") == "Ready", timeout=60)
    finally:
        _delete_all(hub, ns)
        eventually(
            lambda: not exists(hub, "manifestwork", naming.IDENTITY_WORK_NAME, "-n", "cluster1"),
            timeout=60,
        )


def test_removed_state_and_blocked_deletion(
    testbed: Testbed, hub_namespace: str, manager: Manager, cluster1_label: str
) -> None:
    hub, spoke1, ns = testbed.hub, testbed.spokes[0], hub_namespace
    hub.apply_objects(
        [placement("p", ns, {cluster1_label: "yes"}), model_serving("kserve", ns, "p")]
    )
    hold = "test.modelserving.opendatahub.io/hold"
    work_name = naming.work_name(c.KIND_MODEL_SERVING, ns, "kserve")
    try:
        eventually(lambda: exists(spoke1, "servingplatform", "model-serving"), timeout=60)
        # managementState Removed keeps the intent and tells the spoke to uninstall.
        hub.kubectl(
            "patch",
            "msv",
            "kserve",
            "-n",
            ns,
            "--type=merge",
            "-p",
            json.dumps({"spec": {"managementState": "Removed"}}),
        )
        eventually(
            lambda: (
                get_json(spoke1, "servingplatform", "model-serving")["spec"]["managementState"]
                == "Removed"
            ),
            timeout=60,
        )
        assert exists(hub, "msv", "kserve", "-n", ns)
        spoke1.kubectl(
            "patch",
            "servingplatform",
            "model-serving",
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": {"phase": "Removed"}}),
        )
        eventually(lambda: _status(hub, "msv", ns, "kserve").get("phase") == "Ready", timeout=60)

        # A work that does not go away blocks deletion, and the condition says where.
        hub.kubectl(
            "patch",
            "manifestwork",
            work_name,
            "-n",
            "cluster1",
            "--type=merge",
            "-p",
            json.dumps({"metadata": {"finalizers": [hold]}}),
        )
        hub.kubectl("delete", "msv", "kserve", "-n", ns, "--wait=false")

        def blocked() -> str:
            cond = _cond(_status(hub, "msv", ns, "kserve"), "DeletionBlocked")
            assert cond.get("status") == "True", cond
            return str(cond["message"])

        assert "cluster1" in eventually(blocked, timeout=60)
        fins = get_json(hub, "manifestwork", work_name, "-n", "cluster1")["metadata"]["finalizers"]
        hub.kubectl(
            "patch",
            "manifestwork",
            work_name,
            "-n",
            "cluster1",
            "--type=merge",
            "-p",
            json.dumps({"metadata": {"finalizers": [f for f in fins if f != hold]}}),
        )
        eventually(lambda: not exists(hub, "msv", "kserve", "-n", ns), timeout=60)
    finally:
        if exists(hub, "manifestwork", work_name, "-n", "cluster1"):
            hub.kubectl(
                "patch",
                "manifestwork",
                work_name,
                "-n",
                "cluster1",
                "--type=json",
                "-p",
                '[{"op":"remove","path":"/metadata/finalizers"}]',
                check=False,
            )
        _delete_all(hub, ns)


def test_inference_service_waits_for_platform_and_storage(
    testbed: Testbed, hub_namespace: str, manager: Manager, cluster1_label: str
) -> None:
    hub, spoke1, ns = testbed.hub, testbed.spokes[0], hub_namespace
    spoke1.kubectl(
        "delete", "configmap", c.AGENT_IDENTITY_CONFIGMAP, "-n", c.AGENT_NAMESPACE, check=False
    )
    isvc = {
        "apiVersion": API,
        "kind": "MultiClusterInferenceService",
        "metadata": {"name": "iris", "namespace": ns},
        "spec": {
            "placementRef": {"name": "p"},
            "targetNamespace": "models",
            "storageConnections": ["s3"],
            "template": {
                "predictor": {
                    "model": {"modelFormat": {"name": "sklearn"}, "storageUri": "s3://models/iris"}
                }
            },
        },
    }
    sconn = {
        "apiVersion": API,
        "kind": "StorageConnection",
        "metadata": {"name": "s3", "namespace": ns},
        "spec": {
            "placementRef": {"name": "p"},
            "type": "s3",
            "targetNamespaces": ["models"],
            "secretRef": {"name": "creds"},
            "s3": {"bucket": "models"},
        },
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds", "namespace": ns},
        "stringData": {"access_key_id": "AK", "secret_access_key": "SK"},
    }
    hub.apply_objects(
        [
            placement("p", ns, {cluster1_label: "yes"}),
            secret,
            sconn,
            model_serving("kserve", ns, "p"),
            _runtime("rt", ns, "p"),
            isvc,
        ]
    )
    try:

        def reasons(plural: str, name: str) -> list[str]:
            return [x["reason"] for x in _status(hub, plural, ns, name).get("clusters", [])]

        eventually(lambda: reasons("mcsr", "rt") == ["WaitingForPlatform"], timeout=60)
        eventually(lambda: exists(spoke1, "servingplatform", "model-serving"), timeout=60)
        spoke1.kubectl(
            "patch",
            "servingplatform",
            "model-serving",
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": {"phase": "Available"}}),
        )
        # The platform is there: the runtime goes; the model still waits for its storage.
        eventually(lambda: exists(spoke1, "servingruntime", "rt", "-n", "models"), timeout=60)
        eventually(lambda: reasons("mcisvc", "iris") == ["WaitingForStorage"], timeout=60)
        entry = _status(hub, "mcisvc", ns, "iris")["clusters"][0]
        assert entry["waitingFor"] == ["StorageConnection s3 delivered"]
        assert works(hub, ns, "iris", "MultiClusterInferenceService") == {}

        public = sealing.public_key_of(sealing.generate_private_key())
        spoke1.apply_objects(
            [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": c.AGENT_IDENTITY_CONFIGMAP,
                        "namespace": c.AGENT_NAMESPACE,
                    },
                    "data": {
                        c.IDENTITY_PUBLIC_KEY: public,
                        c.IDENTITY_KEY_ID: sealing.key_id(public),
                    },
                }
            ]
        )
        sealed_name = naming.sealed_name(ns, "s3")
        eventually(
            lambda: exists(spoke1, "sealedstorageconnection", sealed_name, "-n", c.AGENT_NAMESPACE),
            timeout=60,
        )
        assert works(hub, ns, "iris", "MultiClusterInferenceService") == {}
        spoke1.kubectl(
            "patch",
            "sealedstorageconnection",
            sealed_name,
            "-n",
            c.AGENT_NAMESPACE,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": {"phase": "Delivered"}}),
        )
        eventually(lambda: exists(spoke1, "inferenceservice", "iris", "-n", "models"), timeout=60)
    finally:
        _delete_all(hub, ns)


def test_leftover_identity_work_is_removed(testbed: Testbed, manager: Manager) -> None:
    # An identity work no StorageConnection needs (as left by a manager killed mid-way).
    hub = testbed.hub
    hub.apply_objects([render.render_identity("cluster2").body])
    eventually(
        lambda: not exists(hub, "manifestwork", naming.IDENTITY_WORK_NAME, "-n", "cluster2"),
        timeout=60,
    )
