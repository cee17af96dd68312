"""Sealing v2 end to end: the manager and the agent with their production identities.

One StorageConnection on cluster1, delivered by the manager through OCM's work agent to the
agent; then the attacks of a ManifestWork author in the cluster namespace (a replayed older
ciphertext, a payload sealed by someone else, a substituted agent key) and a key rotation
during which the delivered entry never goes away.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from addon_api import constants as c
from addon_api import sealing
from addon_manager.facts import naming
from addon_manager.shell import sealkeys
from testbed import identities
from testbed.fleet import Testbed
from testbed.support import agent as agent_support
from testbed.support.manager import (
    API,
    HUB_CRDS,
    Manager,
    approve_agent_key,
    get_json,
    manager_identity,
    placement,
    verify_key,
)
from testbed.support.waiting import eventually

TEAM = "sealing-team"
ENTRY = "s3"
SSC = ("sealedstorageconnection", "-n", c.AGENT_NAMESPACE)


@pytest.fixture(scope="module")
def manager(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Manager]:
    """The manager as the chart's ServiceAccount (only the hub CRDs: the spoke is left as is)."""
    testbed.hub.apply_files(HUB_CRDS)
    testbed.hub.wait_crds_established()
    log = tmp_path_factory.mktemp("manager") / "manager.log"
    mgr = Manager(manager_identity(testbed), log, "--no-addon-enablement",
                  "--sealing-refresh=1").start()
    try:
        yield mgr
    finally:
        mgr.stop()
        mgr.print_tail()


@pytest.fixture(scope="module")
def agent(
    testbed: Testbed, spoke: Any, bundles: Any, manager: Manager, request: pytest.FixtureRequest
) -> Iterator[agent_support.AgentProcess]:
    """The agent on cluster1, verifying with the manager's key (as the chart configures it)."""
    log = agent_support.agent_log("test_agent_sealing")
    with agent_support.running_agent(
        spoke, bundles, log, verify_keys=(verify_key(testbed.hub),),
        failed=lambda: bool(request.session.testsfailed),
    ) as proc:
        yield proc


@dataclass
class Scenario:
    hub: Any
    spoke: Any
    ns: str
    manager: Manager
    agent: agent_support.AgentProcess
    sealed_name: str = field(init=False)

    def __post_init__(self) -> None:
        self.sealed_name = naming.sealed_name(self.ns, "s3")

    def entry(self) -> dict[str, Any] | None:
        """The delivered storage-config entry in TEAM (None when absent)."""
        secret = agent_support.get(self.spoke, "secret", "-n", TEAM, c.STORAGE_CONFIG_SECRET)
        raw = ((secret or {}).get("data") or {}).get(ENTRY)
        return json.loads(base64.b64decode(raw)) if raw else None

    def secret_key(self) -> str | None:
        found = self.entry()
        return None if found is None else str(found.get("secret_access_key"))

    def sealed(self) -> dict[str, Any]:
        """The SealedStorageConnection on the spoke."""
        return dict(get_json(self.spoke, *SSC, self.sealed_name))

    def spoke_reason(self, name: str | None = None) -> str:
        obj = get_json(self.spoke, *SSC, name or self.sealed_name)
        status = obj.get("status") or {}
        if status.get("observedGeneration") != obj["metadata"]["generation"]:
            return ""
        cond: dict[str, Any] = next(
            (x for x in status.get("conditions", []) if x["type"] == "Delivered"), {}
        )
        return f"{cond.get('reason', '')}: {cond.get('message', '')}"

    def hub_entry(self) -> dict[str, Any]:
        status = get_json(self.hub, "sconn", "s3", "-n", self.ns).get("status") or {}
        return next((x for x in status.get("clusters", []) if x["cluster"] == "cluster1"), {})

    def set_secret(self, value: str) -> None:
        self.hub.kubectl("patch", "secret", "creds", "-n", self.ns, "--type=merge",
                         "-p", json.dumps({"stringData": {"secret_access_key": value}}))

    def forge(self, name: str, manifest: dict[str, Any], orphan: bool = False) -> None:
        """A ManifestWork in cluster1's namespace, written by someone who is not the manager."""
        work: dict[str, Any] = {
            "apiVersion": "work.open-cluster-management.io/v1",
            "kind": "ManifestWork",
            "metadata": {"name": name, "namespace": "cluster1"},
            "spec": {"workload": {"manifests": [manifest]}},
        }
        if orphan:  # its removal leaves the object it wrote (the manager's work owns it too)
            work["spec"]["deleteOption"] = {"propagationPolicy": "Orphan"}
        self.hub.apply_objects([work])

    def agent_key(self) -> dict[str, str]:
        cm = get_json(self.spoke, "configmap", c.AGENT_IDENTITY_CONFIGMAP, "-n",
                      c.AGENT_NAMESPACE)
        return {k: str(v) for k, v in cm["data"].items()}


@pytest.fixture(scope="class")
def scenario(
    testbed: Testbed, scenario_namespace: str, manager: Manager,
    agent: agent_support.AgentProcess,
) -> Iterator[Scenario]:
    """A StorageConnection on cluster1 alone, delivered into namespace TEAM."""
    hub, spoke, ns = testbed.hub, testbed.spokes[0], scenario_namespace
    label = f"t-{uuid.uuid4().hex[:6]}"
    hub.kubectl("label", "managedcluster", "cluster1", f"{label}=yes")
    spoke.kubectl("create", "namespace", TEAM, check=False)
    identities.grant_manager_secrets(hub, ns)
    hub.apply_objects([
        placement("p", ns, {label: "yes"}),
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": ns},
         "stringData": {"access_key_id": "AK", "secret_access_key": "SK1"}},
        {"apiVersion": API, "kind": "StorageConnection",
         "metadata": {"name": "s3", "namespace": ns},
         "spec": {"placementRef": {"name": "p"}, "type": "s3", "targetNamespaces": [TEAM],
                  "entryName": ENTRY, "secretRef": {"name": "creds"}, "s3": {"bucket": "b"}}},
    ])
    s = Scenario(hub, spoke, ns, manager, agent)
    try:
        eventually(lambda: s.secret_key() == "SK1", timeout=90)
        yield s
    finally:
        hub.kubectl("delete", "sconn", "s3", "-n", ns, "--wait=false", check=False)
        for work in ("forged-replay", "forged-seal"):
            hub.kubectl("delete", "manifestwork", work, "-n", "cluster1", "--wait=false",
                        check=False)
        eventually(lambda: s.entry() is None, timeout=90)  # the connection's entry is gone
        hub.kubectl("label", "managedcluster", "cluster1", f"{label}-", check=False)


class TestSealingV2:
    """Delivered, then every forgery refused (the newer credential kept), then rotated."""

    def test_1_delivered_and_the_agent_key_pinned(self, scenario: Scenario) -> None:
        s = scenario
        assert s.entry() == {"type": "s3", "access_key_id": "AK", "secret_access_key": "SK1",
                             "bucket": "b", "default_bucket": "b"}
        state = get_json(s.hub, "configmap", sealkeys.STATE_CONFIGMAP, "-n",
                         identities.MANAGER_NAMESPACE)["data"]
        assert state[f"{sealkeys.PIN_PREFIX}cluster1"] == s.agent_key()[c.IDENTITY_PUBLIC_KEY]
        lease = get_json(s.spoke, "lease", c.AGENT_SEAL_LEDGER, "-n", c.AGENT_STATE_NAMESPACE)
        assert f"{c.AGENT_NAMESPACE}/{s.sealed_name}" in json.dumps(lease["metadata"])

    @pytest.mark.needs("test_1_delivered_and_the_agent_key_pinned")
    def test_2_replayed_older_ciphertext_is_refused(self, scenario: Scenario) -> None:
        s = scenario
        old = s.sealed()
        s.set_secret("SK2")
        eventually(lambda: s.secret_key() == "SK2", timeout=60)
        # Someone who can write ManifestWorks in cluster1's namespace puts the older ciphertext
        # (read from the manager's earlier work) back.
        s.forge("forged-replay", {
            "apiVersion": API, "kind": "SealedStorageConnection",
            "metadata": {"name": s.sealed_name, "namespace": c.AGENT_NAMESPACE},
            "spec": old["spec"],
        }, orphan=True)

        def replayed() -> str:
            assert s.sealed()["spec"]["sealed"] == old["spec"]["sealed"]
            reason = s.spoke_reason()
            assert reason.startswith("SealReplayed"), reason
            return reason

        assert "older than" in eventually(replayed, timeout=60)
        eventually(lambda: s.hub_entry().get("reason") == "SealReplayed", timeout=30)
        assert s.secret_key() == "SK2"  # the newer credential stays
        s.hub.kubectl("delete", "manifestwork", "forged-replay", "-n", "cluster1")
        s.set_secret("SK3")  # the manager's next seal is accepted again
        eventually(lambda: s.secret_key() == "SK3", timeout=60)

    @pytest.mark.needs("test_1_delivered_and_the_agent_key_pinned")
    def test_3_payload_sealed_by_someone_else_is_refused(self, scenario: Scenario) -> None:
        s = scenario
        key = s.agent_key()
        spec = {"keyId": key[c.IDENTITY_KEY_ID], "type": "s3", "targetNamespaces": [TEAM],
                "entryName": "forged"}
        # Valid encryption to the agent's published key, bound correctly, a high sequence:
        # only the manager's signature is missing.
        spec["sealed"] = agent_support.seal_for(
            s.spoke, key[c.IDENTITY_PUBLIC_KEY], c.AGENT_NAMESPACE, "forged", spec,
            {"type": "s3", "secret_access_key": "theirs"}, sequence=2**62,
            signing_key=sealing.generate_signing_key(),
        )
        s.forge("forged-seal", {"apiVersion": API, "kind": "SealedStorageConnection",
                                "metadata": {"name": "forged", "namespace": c.AGENT_NAMESPACE},
                                "spec": spec})
        reason = eventually(lambda: s.spoke_reason("forged"), timeout=60)
        assert reason.startswith("SealUnsigned"), reason
        secret = agent_support.get(s.spoke, "secret", "-n", TEAM, c.STORAGE_CONFIG_SECRET)
        assert "forged" not in (secret.get("data") or {})
        s.hub.kubectl("delete", "manifestwork", "forged-seal", "-n", "cluster1")

    @pytest.mark.needs("test_1_delivered_and_the_agent_key_pinned")
    def test_4_substituted_agent_key_stops_sealing(self, scenario: Scenario) -> None:
        s = scenario
        s.agent.stop()
        try:
            real = s.agent_key()
            attacker = sealing.public_key_of(sealing.generate_private_key())
            # What a forged work with an Update strategy does to the agent's identity ConfigMap.
            s.spoke.apply_objects([{
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": c.AGENT_IDENTITY_CONFIGMAP, "namespace": c.AGENT_NAMESPACE},
                "data": {c.IDENTITY_PUBLIC_KEY: attacker,
                         c.IDENTITY_KEY_ID: sealing.key_id(attacker)},
            }])
            def changed() -> dict[str, Any]:
                entry = s.hub_entry()
                assert entry.get("reason") == "AgentKeyChanged", entry
                return entry

            entry = eventually(changed, timeout=60)
            assert sealing.key_id(attacker) in entry["message"]
            assert "approve." in entry["message"]  # how a hub admin approves it
            before = s.sealed()["spec"]
            s.set_secret("SK4")
            s.manager.wait_quiet(window=3, reconciles=False)
            assert s.sealed()["spec"] == before  # nothing new was sealed, to either key
            assert before["keyId"] == real[c.IDENTITY_KEY_ID]
            assert s.hub_entry().get("reason") == "AgentKeyChanged"
        finally:
            s.agent.start()  # it publishes its own key again: sealing resumes
        eventually(lambda: s.secret_key() == "SK4", timeout=90)

    @pytest.mark.needs("test_1_delivered_and_the_agent_key_pinned")
    def test_5_rotation_never_leaves_the_entry_missing(self, scenario: Scenario) -> None:
        s = scenario
        old_id = s.agent_key()[c.IDENTITY_KEY_ID]
        seen: list[tuple[bool, str]] = []
        stop = threading.Event()

        def poll() -> None:  # throughout the rotation: the entry and the delivery phase
            while not stop.is_set():
                phase = str((s.sealed().get("status") or {}).get("phase"))
                seen.append((s.entry() is not None, phase))
                time.sleep(0.1)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        try:
            s.spoke.kubectl("annotate", "secret", c.AGENT_KEY_SECRET, "-n", c.AGENT_STATE_NAMESPACE,
                            f"{c.ANNOTATION_ROTATE_KEY}=requested")
            next_id = str(eventually(lambda: s.agent_key().get(c.IDENTITY_NEXT_KEY_ID), timeout=30))
            assert s.sealed()["spec"]["keyId"] == old_id  # not resealed before the approval
            approve_agent_key(s.hub, "cluster1", next_id)

            def rotated() -> bool:
                key = s.agent_key()
                assert key[c.IDENTITY_KEY_ID] == next_id and c.IDENTITY_NEXT_KEY_ID not in key
                assert s.sealed()["spec"]["keyId"] == next_id
                return True

            eventually(rotated, timeout=120)
        finally:
            stop.set()
            poller.join(10)
        assert len(seen) > 10
        assert all(present for present, _ in seen), "the entry was missing during the rotation"
        assert "Failed" not in {phase for _, phase in seen}
        assert s.secret_key() == "SK4"
        secret = get_json(s.spoke, "secret", c.AGENT_KEY_SECRET, "-n", c.AGENT_STATE_NAMESPACE)
        assert set(secret["data"]) == {"privateKey"}  # the old key is gone
        state = get_json(s.hub, "configmap", sealkeys.STATE_CONFIGMAP, "-n",
                         identities.MANAGER_NAMESPACE)["data"]
        assert sealing.key_id(state[f"{sealkeys.PIN_PREFIX}cluster1"]) == next_id
        assert f"{sealkeys.APPROVE_PREFIX}cluster1" not in state
