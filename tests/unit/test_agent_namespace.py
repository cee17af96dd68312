"""The agent's own namespace: from --namespace, else its pod's (POD_NAMESPACE), else OCM's
default; its identity and the sealed payloads it opens follow that namespace, its private key
and seal ledger live in a state namespace of its own."""

from __future__ import annotations

import base64
import json
from typing import Any, cast

import pytest

from addon_agent.io import delivery, identity
from addon_agent.io.kube import Kube
from addon_agent.main import default_namespace, parse
from addon_api import constants as c
from addon_api import sealing
from addon_api.spoke import SealedStorageConnectionSpec

Obj = dict[str, Any]


def test_namespace_comes_from_the_flag_else_the_pod_else_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    assert parse([]).namespace == c.AGENT_NAMESPACE
    monkeypatch.setenv("POD_NAMESPACE", "custom-ns")
    assert parse([]).namespace == "custom-ns"
    assert parse(["--namespace="]).namespace == "custom-ns"  # an empty template variable
    assert parse(["--namespace=other-ns"]).namespace == "other-ns"
    assert default_namespace({"POD_NAMESPACE": ""}) == c.AGENT_NAMESPACE
    assert default_namespace({}) == c.AGENT_NAMESPACE


class _Resource:
    """The dynamic-client resource of one kind, enough for create and replace."""

    namespaced = True

    def __init__(self, kube: FakeKube, kind: str) -> None:
        self.kube, self.kind = kube, kind

    def create(self, body: Obj, namespace: str | None = None, **_: Any) -> Any:
        return self._put(body)

    def replace(self, body: Obj, name: str, namespace: str | None = None, **_: Any) -> Any:
        return self._put(body)

    def _put(self, body: Obj) -> Obj:
        """As the client answers when told to keep the JSON (``serializer``): the object."""
        self.kube.apply({**body, "kind": self.kind})
        return body


class FakeKube:
    """Namespaced objects in memory by (kind, namespace, name)."""

    def __init__(self, *namespaces: str) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {
            ("Namespace", "", ns): {"metadata": {"name": ns}} for ns in namespaces
        }

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        found = self.objects.get((kind, namespace or "", name))
        return json.loads(json.dumps(found)) if found is not None else None

    def apply(self, obj: Obj, *, force: bool = True) -> Obj:
        meta = obj["metadata"]
        self.objects[(obj["kind"], meta.get("namespace") or "", meta["name"])] = obj
        return obj

    def list(self, api_version: str, kind: str, **_: Any) -> list[Obj]:
        return [o for (k, _ns, _n), o in self.objects.items() if k == kind]

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        return self.objects.pop((kind, namespace or "", name), None) is not None

    def resource(self, api_version: str, kind: str) -> _Resource:
        return _Resource(self, kind)


def test_identity_is_published_in_the_agent_namespace_and_the_key_kept_in_the_state_one() -> None:
    kube = FakeKube()
    key = identity.ensure_identity(cast(Kube, kube), "custom-ns", "custom-state")
    secret = kube.get("v1", "Secret", c.AGENT_KEY_SECRET, "custom-state")
    published = kube.get("v1", "ConfigMap", c.AGENT_IDENTITY_CONFIGMAP, "custom-ns")
    assert secret is not None and published is not None
    assert published["data"][c.IDENTITY_PUBLIC_KEY] == sealing.public_key_of(key)
    # Nothing private in the add-on namespace other add-ons may share.
    assert kube.get("v1", "Secret", c.AGENT_KEY_SECRET, "custom-ns") is None
    assert kube.get("v1", "ConfigMap", c.AGENT_IDENTITY_CONFIGMAP, c.AGENT_NAMESPACE) is None
    assert identity.ensure_identity(cast(Kube, kube), "custom-ns", "custom-state") == key


def test_a_key_an_older_agent_kept_in_the_addon_namespace_moves_to_the_state_namespace() -> None:
    kube = FakeKube()
    old = identity.ensure_identity(cast(Kube, kube), "addon-ns", "addon-ns")  # the old layout
    before = kube.get("v1", "Secret", c.AGENT_KEY_SECRET, "addon-ns")
    before["metadata"]["annotations"] = {c.ANNOTATION_ROTATE_KEY: "requested"}
    kube.apply(before)
    keys = identity.load_keyring(cast(Kube, kube), "addon-ns", "state-ns")
    assert keys.current == old  # the same key: every sealed entry stays delivered
    assert keys.next is not None  # the pending rotation request came along
    assert kube.get("v1", "Secret", c.AGENT_KEY_SECRET, "addon-ns") is None
    moved = kube.get("v1", "Secret", c.AGENT_KEY_SECRET, "state-ns")
    assert base64.b64decode(moved["data"]["privateKey"]) == old


def test_the_state_namespace_defaults_to_its_own_and_is_never_a_tenants_target() -> None:
    from addon_api import tenancy

    assert parse([]).state_namespace == c.AGENT_STATE_NAMESPACE != c.AGENT_NAMESPACE
    assert parse(["--state-namespace=x"]).state_namespace == "x"
    star = tenancy.NamespacePolicy({"*": frozenset({"*"})})
    assert "never a tenant's target" in star.refusal("team-a", c.AGENT_STATE_NAMESPACE,
                                                     c.AGENT_NAMESPACE)


def test_the_seal_ledger_is_carried_over_once_and_never_lowered() -> None:
    from addon_agent.io import ledger

    kube = FakeKube()
    old = ledger.Ledger(cast(Kube, kube), "addon-ns")
    old.record("ns/a", 7)
    old.record("ns/b", 3)
    new = ledger.Ledger(cast(Kube, kube), "state-ns")
    new.adopt("addon-ns")
    assert (new.last("ns/a"), new.last("ns/b")) == (7, 3)
    # Once the state namespace has its ledger, the shared namespace's is never read again:
    # raising a record there cannot make the agent refuse a delivery.
    old.record("ns/a", 99)
    new.adopt("addon-ns")
    assert new.last("ns/a") == 7


SIGNER = sealing.generate_signing_key()


class MemoryLedger:
    """The agent's ledger in memory."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def last(self, binding: str) -> int | None:
        return self.seen.get(binding)

    def record(self, binding: str, sequence: int) -> None:
        self.seen[binding] = max(sequence, self.seen.get(binding, sequence))


def _spec(public: str, namespace: str, name: str, payload: Obj, seq: int = 1,
          cluster: str = "c1", signer: bytes = SIGNER) -> SealedStorageConnectionSpec:
    binding = sealing.Binding(cluster, namespace, name, ("models",), "s3", "s3")
    return SealedStorageConnectionSpec.model_validate({
        "keyId": sealing.key_id(public),
        "sealed": sealing.seal(public, binding, seq, payload, signer),
        "type": "s3",
        "targetNamespaces": ["models"],
        "entryName": "s3",
        "source": {"namespace": "ns", "name": "s3"},
    })


def _opener(private: bytes, cluster: str = "c1") -> delivery.Opener:
    public = sealing.public_key_of(private)
    return delivery.Opener({sealing.key_id(public): private}, (sealing.verify_key_of(SIGNER),),
                           cluster)


def _entry(kube: FakeKube) -> Any:
    written = kube.get("v1", "Secret", c.STORAGE_CONFIG_SECRET, "models")
    return None if written is None else json.loads(base64.b64decode(written["data"]["s3"]))


def test_sealed_payload_opens_only_in_the_namespace_it_was_sealed_for() -> None:
    private = sealing.generate_private_key()
    public = sealing.public_key_of(private)
    name = "ns.s3"
    payload = {"type": "s3", "access_key_id": "AK1"}
    spec = _spec(public, "custom-ns", name, payload)
    kube = FakeKube("models")
    with pytest.raises(delivery.DeliveryError) as err:
        delivery.deliver(cast(Kube, kube), _opener(private), MemoryLedger(), c.AGENT_NAMESPACE,
                         name, spec)
    assert err.value.reason == "SealMismatch" and "binding" in str(err.value)
    assert kube.get("v1", "Secret", c.STORAGE_CONFIG_SECRET, "models") is None
    with pytest.raises(delivery.DeliveryError) as err:  # sealed for another cluster
        delivery.deliver(cast(Kube, kube), _opener(private, "c2"), MemoryLedger(), "custom-ns",
                         name, spec)
    assert err.value.reason == "SealMismatch" and "cluster" in str(err.value)
    delivery.deliver(cast(Kube, kube), _opener(private), MemoryLedger(), "custom-ns", name, spec)
    assert _entry(kube) == payload


def test_replayed_or_foreign_payload_is_refused_and_the_entry_kept() -> None:
    private = sealing.generate_private_key()
    public = sealing.public_key_of(private)
    kube, book, name = FakeKube("models"), MemoryLedger(), "ns.s3"
    old = _spec(public, c.AGENT_NAMESPACE, name, {"type": "s3", "v": "old"}, seq=10)
    new = _spec(public, c.AGENT_NAMESPACE, name, {"type": "s3", "v": "new"}, seq=11)
    delivery.deliver(cast(Kube, kube), _opener(private), book, c.AGENT_NAMESPACE, name, old)
    delivery.deliver(cast(Kube, kube), _opener(private), book, c.AGENT_NAMESPACE, name, new)
    assert book.seen == {f"{c.AGENT_NAMESPACE}/{name}": 11}
    with pytest.raises(delivery.DeliveryError) as err:
        delivery.deliver(cast(Kube, kube), _opener(private), book, c.AGENT_NAMESPACE, name, old)
    assert err.value.reason == "SealReplayed"
    foreign = _spec(public, c.AGENT_NAMESPACE, name, {"type": "s3", "v": "evil"}, seq=99,
                    signer=sealing.generate_signing_key())
    with pytest.raises(delivery.DeliveryError) as err:
        delivery.deliver(cast(Kube, kube), _opener(private), book, c.AGENT_NAMESPACE, name,
                         foreign)
    assert err.value.reason == "SealUnsigned"
    assert _entry(kube) == {"type": "s3", "v": "new"}  # the newer credential stays
    assert book.seen == {f"{c.AGENT_NAMESPACE}/{name}": 11}


def test_no_storage_is_written_into_a_terminating_namespace() -> None:
    private = sealing.generate_private_key()
    public = sealing.public_key_of(private)
    name = "ns.s3"
    spec = _spec(public, c.AGENT_NAMESPACE, name, {"type": "s3"})
    kube = FakeKube("models")
    meta = kube.objects[("Namespace", "", "models")]["metadata"]
    meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    with pytest.raises(delivery.DeliveryError) as err:
        delivery.deliver(cast(Kube, kube), _opener(private), MemoryLedger(), c.AGENT_NAMESPACE,
                         name, spec)
    assert err.value.reason == "NamespaceTerminating" and "models" in str(err.value)
    assert kube.get("v1", "Secret", c.STORAGE_CONFIG_SECRET, "models") is None
