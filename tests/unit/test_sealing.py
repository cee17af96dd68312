from __future__ import annotations

import base64

import pytest

from addon_api import sealing

ENTRY = {"type": "s3", "access_key_id": "AKIA-demo", "secret_access_key": "s3cr3t-demo"}


def test_round_trip_and_key_id_is_stable() -> None:
    priv = sealing.generate_private_key()
    pub = sealing.public_key_of(priv)
    assert sealing.key_id(pub) == sealing.key_id(pub) and len(sealing.key_id(pub)) == 16
    sealed = sealing.seal(pub, "ns/conn", ENTRY)
    assert "s3cr3t-demo" not in sealed and "s3cr3t-demo" not in base64.b64decode(sealed).decode(
        "latin-1"
    )
    assert sealing.unseal(priv, "ns/conn", sealed) == ENTRY


def test_other_key_binding_or_tampering_is_refused() -> None:
    priv, other = sealing.generate_private_key(), sealing.generate_private_key()
    sealed = sealing.seal(sealing.public_key_of(priv), "ns/conn", ENTRY)
    with pytest.raises(sealing.SealError, match="does not decrypt"):
        sealing.unseal(other, "ns/conn", sealed)
    with pytest.raises(sealing.SealError, match="sealed for 'ns/conn'"):
        sealing.unseal(priv, "ns/other", sealed)
    raw = bytearray(base64.b64decode(sealed))
    raw[-1] ^= 0x01
    with pytest.raises(sealing.SealError, match="does not decrypt"):
        sealing.unseal(priv, "ns/conn", base64.b64encode(bytes(raw)).decode())
    with pytest.raises(sealing.SealError, match="base64"):
        sealing.unseal(priv, "ns/conn", "not base64!")


def test_bad_public_key_is_refused() -> None:
    with pytest.raises(sealing.SealError, match="32 bytes"):
        sealing.seal(base64.b64encode(b"short").decode(), "ns/c", ENTRY)
