"""Sealing v2: envelope binding, signature, replay, pinning decisions, the ledger, the keys."""

from __future__ import annotations

import base64
import dataclasses
import json

import pytest

from addon_agent.io import identity, ledger
from addon_api import sealing
from addon_api.hashing import keyed_hash, short_hash
from addon_manager.facts.sealing import AgentKey
from addon_manager.kinds import pinning
from addon_manager.shell import sealkeys
from testbed.support.sealing import MemoryStore

ENTRY = {"type": "s3", "access_key_id": "AKIA-demo", "secret_access_key": "s3cr3t-demo"}
BINDING = sealing.Binding("cluster1", "agent-ns", "team-a.s3", ("models", "other"), "s3", "s3")
SIGNER = sealing.generate_signing_key()
VERIFY = (sealing.verify_key_of(SIGNER),)


def _pair() -> tuple[bytes, str]:
    private = sealing.generate_private_key()
    return private, sealing.public_key_of(private)


def test_round_trip_carries_binding_sequence_and_payload() -> None:
    priv, pub = _pair()
    assert sealing.key_id(pub) == sealing.key_id(pub) and len(sealing.key_id(pub)) == 16
    sealed = sealing.seal(pub, BINDING, 42, ENTRY, SIGNER)
    assert "s3cr3t-demo" not in base64.b64decode(sealed).decode("latin-1")
    opened = sealing.unseal(priv, BINDING, sealed, VERIFY)
    assert (opened.payload, opened.sequence) == (ENTRY, 42)
    assert opened.fields["cluster"] == "cluster1"
    assert opened.fields["targetNamespaces"] == ["models", "other"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"cluster": "cluster2"}, "cluster"),
        ({"namespace": "other-ns"}, "binding"),
        ({"name": "team-b.s3"}, "binding"),
        ({"target_namespaces": ("models", "kube-system")}, "spec.targetNamespaces"),
        ({"entry_name": "other"}, "spec.entryName"),
        ({"type": "gcs"}, "spec.type"),
    ],
)
def test_every_bound_field_is_checked_and_named(change: dict[str, object], field: str) -> None:
    priv, pub = _pair()
    sealed = sealing.seal(pub, BINDING, 1, ENTRY, SIGNER)
    found = dataclasses.replace(BINDING, **change)  # type: ignore[arg-type]
    with pytest.raises(sealing.SealError) as err:
        sealing.unseal(priv, found, sealed, VERIFY)
    assert err.value.reason == "SealMismatch" and field in str(err.value)


def test_lower_sequence_is_a_replay_same_or_higher_is_not() -> None:
    priv, pub = _pair()
    old = sealing.seal(pub, BINDING, 5, ENTRY, SIGNER)
    assert sealing.unseal(priv, BINDING, old, VERIFY, last_accepted=5).sequence == 5
    assert sealing.unseal(priv, BINDING, old, VERIFY, last_accepted=None).sequence == 5
    with pytest.raises(sealing.SealError) as err:
        sealing.unseal(priv, BINDING, old, VERIFY, last_accepted=6)
    assert err.value.reason == "SealReplayed" and "sequence 5" in str(err.value)


def test_payload_sealed_by_someone_else_is_refused() -> None:
    priv, pub = _pair()
    # Valid encryption to the agent's key, signed by another key:
    forged = sealing.seal(pub, BINDING, 99, ENTRY, sealing.generate_signing_key())
    with pytest.raises(sealing.SealError) as err:
        sealing.unseal(priv, BINDING, forged, VERIFY)
    assert err.value.reason == "SealUnsigned"
    # ... or not signed at all (an envelope of the old format, or just JSON):
    for plaintext in (
        json.dumps({"v": 1, "binding": BINDING.object, "payload": ENTRY}).encode(),
        b"\x00" * 64 + sealing.envelope_bytes(BINDING, 99, ENTRY),
    ):
        unsigned = sealing.seal_unsigned(pub, plaintext)
        with pytest.raises(sealing.SealError) as err:
            sealing.unseal(priv, BINDING, unsigned, VERIFY)
        assert err.value.reason == "SealUnsigned"
    # No verify key configured: nothing is accepted.
    good = sealing.seal(pub, BINDING, 1, ENTRY, SIGNER)
    with pytest.raises(sealing.SealError, match="no manager verify key") as err:
        sealing.unseal(priv, BINDING, good, ())
    assert err.value.reason == "SealUnsigned"
    # Any configured key verifies (a manager signing key being replaced).
    another = sealing.verify_key_of(sealing.generate_signing_key())
    assert sealing.unseal(priv, BINDING, good, (another, *VERIFY)).payload == ENTRY


def test_other_key_or_tampering_does_not_decrypt() -> None:
    priv, pub = _pair()
    other, _ = _pair()
    sealed = sealing.seal(pub, BINDING, 1, ENTRY, SIGNER)
    with pytest.raises(sealing.SealError, match="does not decrypt") as err:
        sealing.unseal(other, BINDING, sealed, VERIFY)
    assert err.value.reason == "DecryptFailed"
    raw = bytearray(base64.b64decode(sealed))
    raw[-1] ^= 0x01
    with pytest.raises(sealing.SealError, match="does not decrypt"):
        sealing.unseal(priv, BINDING, base64.b64encode(bytes(raw)).decode(), VERIFY)
    with pytest.raises(sealing.SealError, match="base64"):
        sealing.unseal(priv, BINDING, "not base64!", VERIFY)
    # Either key of a rotating agent opens what was sealed to it.
    assert sealing.unseal((other, priv), BINDING, sealed, VERIFY).payload == ENTRY


def test_bad_keys_are_refused() -> None:
    with pytest.raises(sealing.SealError, match="32 bytes"):
        sealing.seal(base64.b64encode(b"short").decode(), BINDING, 1, ENTRY, SIGNER)
    assert sealing.parse_verify_keys(f" {VERIFY[0]} ,,") == VERIFY
    assert sealing.parse_verify_keys("{{SEAL_VERIFY_KEY}}") == ()
    with pytest.raises(sealing.SealError):
        sealing.parse_verify_keys("bm90LWEta2V5")


def test_keyed_hash_needs_the_key() -> None:
    assert keyed_hash(b"k1", "a", "b", length=32) == keyed_hash(b"k1", "a", "b", length=32)
    assert keyed_hash(b"k1", "a", length=32) != keyed_hash(b"k2", "a", length=32)
    assert keyed_hash(b"k1", "a", length=32) != short_hash("a", length=32)


# pinning ----------------------------------------------------------------------------------------


def _key() -> AgentKey:
    public = sealing.public_key_of(sealing.generate_private_key())
    return AgentKey(public, sealing.key_id(public))


def test_first_key_is_pinned_then_a_changed_key_stops_sealing_until_approved() -> None:
    a, b = _key(), _key()
    first = pinning.decide("c1", None, "", pinning.Published(a))
    assert (first.key, first.pin) == (a, a)
    same = pinning.decide("c1", a, "", pinning.Published(a))
    assert (same.key, same.pin) == (a, None)
    changed = pinning.decide("c1", a, "", pinning.Published(b), "kubectl ...")
    assert changed.key is None and changed.reason == "AgentKeyChanged"
    assert b.key_id in changed.message and a.key_id in changed.message
    assert pinning.decide("c1", a, a.key_id, pinning.Published(b)).key is None
    approved = pinning.decide("c1", a, b.key_id, pinning.Published(b))
    assert (approved.key, approved.pin) == (b, b)


def test_rotation_reseals_to_the_next_key_only_once_approved() -> None:
    old, new = _key(), _key()
    rotating = pinning.Published(old, new)
    waiting = pinning.decide("c1", old, "", rotating)
    assert (waiting.key, waiting.pin) == (old, None)  # the next key alone changes nothing
    approved = pinning.decide("c1", old, new.key_id, rotating)
    assert (approved.key, approved.pin) == (new, new)
    during = pinning.decide("c1", new, "", rotating)  # pinned, agent not yet switched
    assert (during.key, during.pin) == (new, None)
    after = pinning.decide("c1", new, "", pinning.Published(new))
    assert (after.key, after.pin) == (new, None)
    # An agent that reports another next key than the approved one gets nothing new.
    other = _key()
    assert pinning.decide("c1", new, "", pinning.Published(other, _key())).key is None


def test_sealer_pins_and_sequences() -> None:
    import asyncio

    store = MemoryStore()
    sealer = sealkeys.Sealer(sealkeys.SealingKeys.generate(), store, "mgr", block=3)
    a = _key()
    sealer.pin("c1", a)
    assert sealer.pinned("c1") == a and "pin.c1" not in store.data  # pending until flushed
    asyncio.run(sealer.flush())
    assert store.data["pin.c1"] == a.public_key
    seqs = [asyncio.run(sealer.next_sequence()) for _ in range(7)]
    assert seqs == sorted(set(seqs))
    # A restarted manager (or a new leader) continues above everything handed out.
    again = sealkeys.Sealer(sealer.keys, store, "mgr", block=3)
    assert asyncio.run(again.next_sequence()) > seqs[-1]
    assert again.pinned("c1") == a
    store.data["approve.c1"] = "abc"
    assert asyncio.run(again.refresh()) == {"c1"} and again.approved("c1") == "abc"
    assert "approve.c1" in sealer.approve_hint("c1", "abc")


def test_sequence_blocks_survive_restarts_and_clock_skew() -> None:
    assert sealkeys.next_block(stored=500, now_us=100, size=10) == (500, 510)  # clock behind
    assert sealkeys.next_block(stored=500, now_us=900, size=10) == (900, 910)  # state lost


def test_sealing_keys_are_never_printed() -> None:
    keys = sealkeys.SealingKeys.generate()
    secret = base64.b64encode(keys.signing_key).decode()
    assert secret not in repr(keys) and secret not in str(keys)
    assert sealkeys.SealingKeys.from_secret_data(keys.secret_data()) == keys
    with pytest.raises(ValueError):
        sealkeys.SealingKeys.from_secret_data({"signingKey": "eA=="})


def test_verify_key_variable_is_set_once() -> None:
    out = sealkeys.with_verify_key([{"name": "LOG_LEVEL", "value": "INFO"},
                                    {"name": "SEAL_VERIFY_KEY", "value": "old"}], "new")
    assert out == [{"name": "LOG_LEVEL", "value": "INFO"},
                   {"name": "SEAL_VERIFY_KEY", "value": "new"}]


# the agent's ledger and rotation ----------------------------------------------------------------


def test_ledger_only_ever_raises() -> None:
    assert ledger.raised({}, "ns/a", 3) == {"ns/a": 3}
    assert ledger.raised({"ns/a": 5}, "ns/a", 3) is None
    assert ledger.raised({"ns/a": 5}, "ns/a", 5) is None
    assert ledger.raised({"ns/a": 5}, "ns/b", 1) == {"ns/a": 5, "ns/b": 1}
    lease = {"metadata": {"annotations": {ledger.ANNOTATION: '{"ns/a": 5, "x": "bad"}'}}}
    assert ledger.parse(lease) == {"ns/a": 5}
    assert ledger.parse(None) == {}


def test_rotation_is_done_only_when_every_connection_is_resealed_and_delivered() -> None:
    old, new = sealing.generate_private_key(), sealing.generate_private_key()
    keys = identity.Keyring(old, new)
    new_id = keys.next_id

    def obj(key_id: str, phase: str = "Delivered", seen: int = 2) -> dict[str, object]:
        return {"metadata": {"generation": 2}, "spec": {"keyId": key_id},
                "status": {"phase": phase, "observedGeneration": seen}}

    assert identity.rotation_done(keys, [obj(new_id), obj(new_id)])
    assert not identity.rotation_done(keys, [obj(new_id), obj("old")])
    assert not identity.rotation_done(keys, [obj(new_id, "Failed")])
    assert not identity.rotation_done(keys, [obj(new_id, seen=1)])  # not yet delivered
    assert not identity.rotation_done(identity.Keyring(old), [])
    data = identity.identity_data(keys)
    assert data["nextKeyId"] == new_id and len(keys.by_id()) == 2
