"""Manager edge cases on the testbed: missing placement, conflicts, sealing, removal, blocking.

The longer scenarios are classes whose steps report separately (see tests/conftest.py).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from addon_api import constants as c
from addon_api import sealing
from addon_manager.facts import naming
from addon_manager.kinds import agent_identity
from testbed import identities
from testbed.fleet import Testbed
from testbed.support.manager import (
    API,
    Manager,
    approve_agent_key,
    exists,
    get_json,
    intent,
    model_serving,
    placement,
    running_manager,
    set_platform_phase,
    verify_key,
    works,
)
from testbed.support.waiting import eventually


@pytest.fixture(scope="module")
def manager(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Manager]:
    """One manager for the module, add-on enablement on."""
    with running_manager(
        testbed, tmp_path_factory.mktemp("manager"), "--deletion-blocked-after=5",
        "--sealing-refresh=1",
    ) as mgr:
        yield mgr


def _labelled_cluster1(testbed: Testbed) -> Iterator[str]:
    label = f"t-{uuid.uuid4().hex[:6]}"
    testbed.hub.kubectl("label", "managedcluster", "cluster1", f"{label}=yes")
    yield label
    testbed.hub.kubectl("label", "managedcluster", "cluster1", f"{label}-", check=False)


@pytest.fixture
def cluster1_label(testbed: Testbed) -> Iterator[str]:
    """A fresh label put on cluster1 only (a Placement on it selects cluster1 alone)."""
    yield from _labelled_cluster1(testbed)


@pytest.fixture(scope="class")
def scenario_cluster1_label(testbed: Testbed) -> Iterator[str]:
    """Like ``cluster1_label``, shared by the steps of one scenario class."""
    yield from _labelled_cluster1(testbed)


def _status(hub: Any, plural: str, ns: str, name: str) -> dict[str, Any]:
    return dict(get_json(hub, plural, name, "-n", ns).get("status") or {})


def _cond(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next((x for x in status.get("conditions", []) if x["type"] == ctype), {})


def _delete_all(hub: Any, ns: str) -> None:
    hub.kubectl("delete", "msv,sconn,mcsr,mcisvc", "--all", "-n", ns, "--wait=false", check=False)
    eventually(lambda: get_json(hub, "msv,sconn,mcsr,mcisvc", "-n", ns)["items"] == [], timeout=90)


def _publish_key(hub: Any, spoke: Any, public: str) -> None:
    """A new agent key on cluster1, published as the agent would and approved on the hub.

    Each scenario fakes a new agent: without the approval its key would differ from the one
    pinned by an earlier scenario (``AgentKeyChanged``).
    """
    approve_agent_key(hub, "cluster1", sealing.key_id(public))
    spoke.apply_objects([_identity_configmap(public)])


def _identity_configmap(public: str) -> dict[str, Any]:
    """The agent's published key, written here as the agent would."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": c.AGENT_IDENTITY_CONFIGMAP, "namespace": c.AGENT_NAMESPACE},
        "data": {c.IDENTITY_PUBLIC_KEY: public, c.IDENTITY_KEY_ID: sealing.key_id(public)},
    }


def _mark_delivered(spoke: Any, sealed_name: str) -> None:
    """The agent's report that it delivered a SealedStorageConnection."""
    spoke.kubectl(
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


# --- A StorageConnection: waits for the agent's key, then sealed, resealed, overridden. ---


@dataclass
class Sealing:
    """What the steps of :class:`TestUnpublishedKeyThenSealedAndResealed` share."""

    hub: Any
    spoke1: Any
    ns: str
    secret: dict[str, Any]
    private: Any = None
    """The agent's private key, once step 2 published its public half."""
    public: str = ""

    @property
    def sealed_name(self) -> str:
        return naming.sealed_name(self.ns, "s3")

    def opened(self) -> dict[str, Any]:
        """The sealed payload on the spoke, opened with the agent's key."""
        obj = get_json(self.spoke1, "sealedstorageconnection", self.sealed_name,
                       "-n", c.AGENT_NAMESPACE)
        spec = obj["spec"]
        assert spec["keyId"] == sealing.key_id(self.public)
        binding = sealing.Binding("cluster1", c.AGENT_NAMESPACE, self.sealed_name,
                                  tuple(spec["targetNamespaces"]), spec["entryName"], spec["type"])
        return sealing.unseal(self.private, binding, spec["sealed"],
                              (verify_key(self.hub),)).payload

    def no_plaintext(self, value: str) -> None:
        """No ManifestWork on the hub carries ``value``, plain or base64."""
        dump = json.dumps(get_json(self.hub, "manifestworks", "-n", "cluster1"))
        assert value not in dump and base64.b64encode(value.encode()).decode() not in dump


@pytest.fixture(scope="class")
def sealing_scenario(
    testbed: Testbed, scenario_namespace: str, manager: Manager, scenario_cluster1_label: str
) -> Iterator[Sealing]:
    """A StorageConnection on cluster1 whose agent has published no key yet."""
    hub, spoke1, ns = testbed.hub, testbed.spokes[0], scenario_namespace
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
    identities.grant_manager_secrets(hub, ns)
    try:
        hub.apply_objects([placement("p", ns, {scenario_cluster1_label: "yes"}), secret, sconn])
        yield Sealing(hub, spoke1, ns, secret)
    finally:
        _delete_all(hub, ns)
        eventually(
            lambda: not exists(hub, "manifestwork", naming.IDENTITY_WORK_NAME, "-n", "cluster1"),
            timeout=60,
        )


class TestUnpublishedKeyThenSealedAndResealed:
    """A StorageConnection waits for the agent's key, is sealed to it, sealed again when its
    Secret or an override changes, and turns Ready once the agent reports delivery."""

    def test_1_waits_for_the_agent_key(self, sealing_scenario: Sealing) -> None:
        s = sealing_scenario

        def waiting_for_key() -> bool:
            entries = _status(s.hub, "sconn", s.ns, "s3").get("clusters", [])
            return [(x["cluster"], x["reason"]) for x in entries] == [
                ("cluster1", "WaitingForAgentKey")
            ]

        eventually(waiting_for_key, timeout=30)
        assert works(s.hub, s.ns, "s3", "StorageConnection") == {}
        assert exists(s.hub, "manifestwork", naming.IDENTITY_WORK_NAME, "-n", "cluster1")

    def test_2_sealed_to_the_published_key(self, sealing_scenario: Sealing) -> None:
        s = sealing_scenario
        # The agent publishes its key (done here as the agent would).
        s.private = sealing.generate_private_key()
        s.public = sealing.public_key_of(s.private)
        _publish_key(s.hub, s.spoke1, s.public)
        payload = eventually(s.opened, timeout=60)
        assert payload == {
            "type": "s3",
            "access_key_id": "AK1",
            "secret_access_key": "SK1",
            "endpoint_url": "http://minio:9000",
            "region": "us-east-1",
            "bucket": "models",
            "default_bucket": "models",
        }

    @pytest.mark.needs("test_2_sealed_to_the_published_key")
    def test_3_no_plaintext_credential_in_manifestworks(self, sealing_scenario: Sealing) -> None:
        sealing_scenario.no_plaintext("SK1")

    @pytest.mark.needs("test_2_sealed_to_the_published_key")
    def test_4_changed_secret_sealed_again(self, sealing_scenario: Sealing) -> None:
        s = sealing_scenario
        s.hub.kubectl(
            "patch",
            "secret",
            "creds",
            "-n",
            s.ns,
            "--type=merge",
            "-p",
            json.dumps({"stringData": {"AWS_SECRET_ACCESS_KEY": "SK2"}}),
        )
        eventually(lambda: s.opened()["secret_access_key"] == "SK2", timeout=60)

    @pytest.mark.needs("test_2_sealed_to_the_published_key")
    def test_5_override_another_bucket_and_secret(self, sealing_scenario: Sealing) -> None:
        s = sealing_scenario
        # An override for this cluster: another bucket, credentials from another Secret.
        s.hub.apply_objects(
            [
                {
                    **s.secret,
                    "metadata": {"name": "creds-eu", "namespace": s.ns},
                    "stringData": {"AWS_ACCESS_KEY_ID": "AK3", "AWS_SECRET_ACCESS_KEY": "SK3"},
                }
            ]
        )
        override = {
            "clusterNames": ["cluster1"],
            "patch": {"s3": {"bucket": "models-eu"}, "secretRef": {"name": "creds-eu"}},
        }
        s.hub.kubectl(
            "patch", "sconn", "s3", "-n", s.ns, "--type=merge",
            "-p", json.dumps({"spec": {"overrides": [override]}}),
        )
        eventually(
            lambda: s.opened()
            == {
                "type": "s3",
                "access_key_id": "AK3",
                "secret_access_key": "SK3",
                "endpoint_url": "http://minio:9000",
                "region": "us-east-1",
                "bucket": "models-eu",
                "default_bucket": "models-eu",
            },
            timeout=60,
        )

    @pytest.mark.needs("test_5_override_another_bucket_and_secret")
    def test_6_override_secret_watched_and_sealed(self, sealing_scenario: Sealing) -> None:
        s = sealing_scenario
        # The Secret an override names is watched like the spec's own.
        s.hub.kubectl(
            "patch", "secret", "creds-eu", "-n", s.ns, "--type=merge",
            "-p", json.dumps({"stringData": {"AWS_SECRET_ACCESS_KEY": "SK4"}}),
        )
        eventually(lambda: s.opened()["secret_access_key"] == "SK4", timeout=60)
        s.no_plaintext("SK4")

    @pytest.mark.needs("test_2_sealed_to_the_published_key")
    def test_7_delivery_reported_makes_the_intent_ready(self, sealing_scenario: Sealing) -> None:
        s = sealing_scenario
        # The agent reports delivery: the hub intent becomes ready.
        _mark_delivered(s.spoke1, s.sealed_name)
        eventually(lambda: _status(s.hub, "sconn", s.ns, "s3").get("phase") == "Ready", timeout=60)



# --- The manager reads Secrets only where a hub admin granted it; what it cannot read or decode
# --- is a condition, never a traceback.


@pytest.fixture(scope="class")
def ungranted_scenario(
    testbed: Testbed, scenario_namespace: str, manager: Manager, scenario_cluster1_label: str
) -> Iterator[Sealing]:
    """A StorageConnection on cluster1 (its agent's key published) in a namespace whose
    Secrets the manager may not read."""
    hub, spoke1, ns = testbed.hub, testbed.spokes[0], scenario_namespace
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds", "namespace": ns},
        "stringData": {"access_key_id": "AK1", "secret_access_key": "SK1"},
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
    s = Sealing(hub, spoke1, ns, secret)
    s.private = sealing.generate_private_key()
    s.public = sealing.public_key_of(s.private)
    _publish_key(hub, spoke1, s.public)
    try:
        hub.apply_objects([placement("p", ns, {scenario_cluster1_label: "yes"}), secret, sconn])
        yield s
    finally:
        _delete_all(hub, ns)
        spoke1.kubectl(
            "delete", "configmap", c.AGENT_IDENTITY_CONFIGMAP, "-n", c.AGENT_NAMESPACE,
            check=False,
        )
        eventually(
            lambda: not exists(hub, "manifestwork", naming.IDENTITY_WORK_NAME, "-n", "cluster1"),
            timeout=60,
        )


class TestSecretAccessFollowsTheHubAdminsGrant:
    """The manager (the chart's identity) has no right on Secrets but in the namespaces a hub
    admin grants: elsewhere a StorageConnection says SecretForbidden and gets nothing; once
    granted it is delivered; a value that is not UTF-8 text says SecretUndecodable."""

    def _entries(self, s: Sealing) -> list[tuple[str, str, str]]:
        return [(x["cluster"], x.get("reason", ""), x.get("message", ""))
                for x in _status(s.hub, "sconn", s.ns, "s3").get("clusters", [])]

    def test_1_ungranted_namespace_is_forbidden_and_gets_nothing(
        self, ungranted_scenario: Sealing, manager: Manager
    ) -> None:
        s = ungranted_scenario

        def forbidden() -> str:
            entries = self._entries(s)
            assert [(cl, reason) for cl, reason, _ in entries] == [("cluster1", "SecretForbidden")]
            return entries[0][2]

        message = eventually(forbidden, timeout=60)
        assert f"Secret {s.ns}/creds" in message
        assert f"add {s.ns} to the chart's manager.secretNamespaces" in message
        assert works(s.hub, s.ns, "s3", "StorageConnection") == {}
        assert "Traceback" not in manager.tail(400)

    @pytest.mark.needs("test_1_ungranted_namespace_is_forbidden_and_gets_nothing")
    def test_2_granted_namespace_is_delivered(self, ungranted_scenario: Sealing) -> None:
        s = ungranted_scenario
        identities.grant_manager_secrets(s.hub, s.ns)  # a hub admin adds the namespace
        payload = eventually(s.opened, timeout=90)
        assert (payload["access_key_id"], payload["secret_access_key"]) == ("AK1", "SK1")

    @pytest.mark.needs("test_2_granted_namespace_is_delivered")
    def test_3_undecodable_value_is_a_condition_naming_secret_and_key(
        self, ungranted_scenario: Sealing, manager: Manager
    ) -> None:
        s = ungranted_scenario
        not_utf8 = base64.b64encode(b"\xff\xfe\xfd").decode()
        s.hub.kubectl("patch", "secret", "creds", "-n", s.ns, "--type=merge",
                      "-p", json.dumps({"data": {"secret_access_key": not_utf8}}))

        def undecodable() -> str:
            entries = self._entries(s)
            assert [(cl, r) for cl, r, _ in entries] == [("cluster1", "SecretUndecodable")]
            return entries[0][2]

        message = eventually(undecodable, timeout=60)
        assert f"Secret {s.ns}/creds" in message and "'secret_access_key'" in message
        assert s.opened()["secret_access_key"] == "SK1"  # nothing new was delivered
        assert "Traceback" not in manager.tail(400)

# --- A ModelServing: managementState Removed, then a deletion a held work blocks. ---


@dataclass
class Removal:
    """What the steps of :class:`TestRemovedStateAndBlockedDeletion` share."""

    hub: Any
    spoke1: Any
    ns: str
    work_name: str


HOLD = "test.modelserving.opendatahub.io/hold"


@pytest.fixture(scope="class")
def removal_scenario(
    testbed: Testbed, scenario_namespace: str, manager: Manager, scenario_cluster1_label: str
) -> Iterator[Removal]:
    """A ModelServing (KServe) on cluster1."""
    hub, ns = testbed.hub, scenario_namespace
    work_name = naming.work_name(c.KIND_MODEL_SERVING, ns, "kserve")
    try:
        hub.apply_objects(
            [placement("p", ns, {scenario_cluster1_label: "yes"}), model_serving("kserve", ns, "p")]
        )
        yield Removal(hub, testbed.spokes[0], ns, work_name)
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


class TestRemovedStateAndBlockedDeletion:
    """managementState Removed keeps the intent and uninstalls on the spoke; a work that does
    not go away blocks the intent's deletion, and the condition says where."""

    def test_1_platform_delivered(self, removal_scenario: Removal) -> None:
        s = removal_scenario
        eventually(lambda: exists(s.spoke1, "servingplatform", "model-serving"), timeout=60)

    @pytest.mark.needs("test_1_platform_delivered")
    def test_2_removed_tells_the_spoke_to_uninstall(self, removal_scenario: Removal) -> None:
        s = removal_scenario
        # managementState Removed keeps the intent and tells the spoke to uninstall.
        s.hub.kubectl(
            "patch",
            "msv",
            "kserve",
            "-n",
            s.ns,
            "--type=merge",
            "-p",
            json.dumps({"spec": {"managementState": "Removed"}}),
        )
        eventually(
            lambda: (
                get_json(s.spoke1, "servingplatform", "model-serving")["spec"]["managementState"]
                == "Removed"
            ),
            timeout=60,
        )
        assert exists(s.hub, "msv", "kserve", "-n", s.ns)

    @pytest.mark.needs("test_2_removed_tells_the_spoke_to_uninstall")
    def test_3_removed_on_the_spoke_is_ready(self, removal_scenario: Removal) -> None:
        s = removal_scenario
        set_platform_phase(s.spoke1, "Removed", components=False)
        eventually(
            lambda: _status(s.hub, "msv", s.ns, "kserve").get("phase") == "Ready", timeout=60
        )

    @pytest.mark.needs("test_1_platform_delivered")
    def test_4_held_work_blocks_deletion(self, removal_scenario: Removal) -> None:
        s = removal_scenario
        # A work that does not go away blocks deletion, and the condition says where.
        s.hub.kubectl(
            "patch",
            "manifestwork",
            s.work_name,
            "-n",
            "cluster1",
            "--type=merge",
            "-p",
            json.dumps({"metadata": {"finalizers": [HOLD]}}),
        )
        s.hub.kubectl("delete", "msv", "kserve", "-n", s.ns, "--wait=false")

        def blocked() -> str:
            cond = _cond(_status(s.hub, "msv", s.ns, "kserve"), "DeletionBlocked")
            assert cond.get("status") == "True", cond
            return str(cond["message"])

        assert "cluster1" in eventually(blocked, timeout=60)

    @pytest.mark.needs("test_4_held_work_blocks_deletion")
    def test_5_released_work_lets_deletion_finish(self, removal_scenario: Removal) -> None:
        s = removal_scenario
        fins = get_json(s.hub, "manifestwork", s.work_name, "-n", "cluster1")["metadata"][
            "finalizers"
        ]
        s.hub.kubectl(
            "patch",
            "manifestwork",
            s.work_name,
            "-n",
            "cluster1",
            "--type=merge",
            "-p",
            json.dumps({"metadata": {"finalizers": [f for f in fins if f != HOLD]}}),
        )
        eventually(lambda: not exists(s.hub, "msv", "kserve", "-n", s.ns), timeout=60)


# --- A MultiClusterInferenceService gated on its platform, then on its storage. ---


@dataclass
class Gates:
    """What the steps of :class:`TestInferenceServiceWaitsForPlatformAndStorage` share."""

    hub: Any
    spoke1: Any
    ns: str
    sealed_name: str = field(init=False)

    def __post_init__(self) -> None:
        self.sealed_name = naming.sealed_name(self.ns, "s3")

    def reasons(self, plural: str, name: str) -> list[str]:
        return [x["reason"] for x in _status(self.hub, plural, self.ns, name).get("clusters", [])]


@pytest.fixture(scope="class")
def gates_scenario(
    testbed: Testbed, scenario_namespace: str, manager: Manager, scenario_cluster1_label: str
) -> Iterator[Gates]:
    """On cluster1: a StorageConnection (no agent key yet), a ModelServing, a runtime and an
    InferenceService that uses the storage."""
    hub, spoke1, ns = testbed.hub, testbed.spokes[0], scenario_namespace
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
    identities.grant_manager_secrets(hub, ns)
    try:
        hub.apply_objects(
            [
                placement("p", ns, {scenario_cluster1_label: "yes"}),
                secret,
                sconn,
                model_serving("kserve", ns, "p"),
                _runtime("rt", ns, "p"),
                isvc,
            ]
        )
        yield Gates(hub, spoke1, ns)
    finally:
        _delete_all(hub, ns)


class TestInferenceServiceWaitsForPlatformAndStorage:
    """The runtime and the model wait for the platform; once it is Available the runtime goes
    and the model waits for its storage, sealed and then reported delivered."""

    def test_1_runtime_waits_for_the_platform(self, gates_scenario: Gates) -> None:
        s = gates_scenario
        eventually(lambda: s.reasons("mcsr", "rt") == ["WaitingForPlatform"], timeout=60)

    def test_2_platform_available_runtime_delivered(self, gates_scenario: Gates) -> None:
        s = gates_scenario
        eventually(lambda: exists(s.spoke1, "servingplatform", "model-serving"), timeout=60)
        set_platform_phase(s.spoke1, "Available", components=False)
        # The platform is there: the runtime goes.
        eventually(lambda: exists(s.spoke1, "servingruntime", "rt", "-n", "models"), timeout=60)

    @pytest.mark.needs("test_2_platform_available_runtime_delivered")
    def test_3_model_waits_for_its_storage(self, gates_scenario: Gates) -> None:
        s = gates_scenario
        # The model still waits for its storage.
        eventually(lambda: s.reasons("mcisvc", "iris") == ["WaitingForStorage"], timeout=60)
        entry = _status(s.hub, "mcisvc", s.ns, "iris")["clusters"][0]
        assert entry["waitingFor"] == ["StorageConnection s3 delivered"]
        assert works(s.hub, s.ns, "iris", "MultiClusterInferenceService") == {}

    @pytest.mark.needs("test_2_platform_available_runtime_delivered")
    def test_4_sealed_storage_not_yet_delivered_still_gates(self, gates_scenario: Gates) -> None:
        s = gates_scenario
        public = sealing.public_key_of(sealing.generate_private_key())
        _publish_key(s.hub, s.spoke1, public)
        eventually(
            lambda: exists(
                s.spoke1, "sealedstorageconnection", s.sealed_name, "-n", c.AGENT_NAMESPACE
            ),
            timeout=60,
        )
        assert works(s.hub, s.ns, "iris", "MultiClusterInferenceService") == {}

    @pytest.mark.needs("test_4_sealed_storage_not_yet_delivered_still_gates")
    def test_5_delivered_storage_releases_the_model(self, gates_scenario: Gates) -> None:
        s = gates_scenario
        _mark_delivered(s.spoke1, s.sealed_name)
        eventually(lambda: exists(s.spoke1, "inferenceservice", "iris", "-n", "models"), timeout=60)


@dataclass
class RuntimeGate:
    """What the steps of :class:`TestAModelWaitsForTheFleetRuntimeItNames` share."""

    hub: Any
    spoke1: Any
    ns: str
    target: str
    """The spoke namespace of both, missing on the spoke at first."""


@pytest.fixture(scope="class")
def runtime_gate_scenario(
    testbed: Testbed, scenario_namespace: str, manager: Manager, scenario_cluster1_label: str
) -> Iterator[RuntimeGate]:
    """On cluster1: a ModelServing, a runtime and a model naming it, both in a spoke namespace
    that does not exist yet (the runtime's work cannot be applied, so it is not Available)."""
    hub, spoke1, ns = testbed.hub, testbed.spokes[0], scenario_namespace
    target = f"rt-{uuid.uuid4().hex[:6]}"
    runtime = _runtime("named", ns, "p")
    runtime["spec"]["targetNamespace"] = target
    model = intent("MultiClusterInferenceService", "iris", ns, "p", targetNamespace=target,
                   template={"predictor": {"model": {"modelFormat": {"name": "sklearn"},
                                                     "runtime": "named",
                                                     "storageUri": "s3://models/iris"}}})
    try:
        hub.apply_objects([placement("p", ns, {scenario_cluster1_label: "yes"}),
                           model_serving("kserve", ns, "p"), runtime, model])
        yield RuntimeGate(hub, spoke1, ns, target)
    finally:
        _delete_all(hub, ns)
        spoke1.kubectl("delete", "namespace", target, "--wait=false", check=False)


class TestAModelWaitsForTheFleetRuntimeItNames:
    """KServe picks a model's runtime once and ignores ServingRuntimes created later: the model
    is sent to a cluster only once the fleet runtime it names is Available there, through the
    real work agent (WaitingForServingRuntime)."""

    def test_1_the_model_waits_while_the_runtime_is_not_available(
            self, runtime_gate_scenario: RuntimeGate) -> None:
        s = runtime_gate_scenario
        eventually(lambda: exists(s.spoke1, "servingplatform", "model-serving"), timeout=60)
        set_platform_phase(s.spoke1, "Available", components=False)
        # The runtime's work is sent and fails there (no such namespace); the model waits.
        eventually(lambda: works(s.hub, s.ns, "named", "MultiClusterServingRuntime") != {},
                   timeout=60)

        def waiting() -> bool:
            entries = _status(s.hub, "mcisvc", s.ns, "iris").get("clusters") or []
            return [(e["reason"], e.get("waitingFor")) for e in entries] == [
                ("WaitingForServingRuntime", ["MultiClusterServingRuntime named Available"])]

        eventually(waiting, timeout=60)
        assert works(s.hub, s.ns, "iris", "MultiClusterInferenceService") == {}
        assert not exists(s.spoke1, "servingruntime", "named", "-n", s.target)

    @pytest.mark.needs("test_1_the_model_waits_while_the_runtime_is_not_available")
    def test_2_the_runtime_lands_first_then_the_model(
            self, runtime_gate_scenario: RuntimeGate) -> None:
        s = runtime_gate_scenario
        s.spoke1.kubectl("create", "namespace", s.target)
        eventually(lambda: exists(s.spoke1, "inferenceservice", "iris", "-n", s.target),
                   timeout=120)
        runtime = get_json(s.spoke1, "servingruntime", "named", "-n", s.target)
        model = get_json(s.spoke1, "inferenceservice", "iris", "-n", s.target)
        assert runtime["metadata"]["creationTimestamp"] <= model["metadata"]["creationTimestamp"]
        assert model["spec"]["predictor"]["model"]["runtime"] == "named"


def test_leftover_identity_work_is_removed(testbed: Testbed, manager: Manager) -> None:
    # An identity work no StorageConnection needs (as left by a manager killed mid-way).
    hub = testbed.hub
    hub.apply_objects([agent_identity.render("cluster2").body])
    eventually(
        lambda: not exists(hub, "manifestwork", naming.IDENTITY_WORK_NAME, "-n", "cluster2"),
        timeout=60,
    )
