"""Sealed storage credentials: what the manager seals and only one agent can open.

Each agent holds an X25519 key pair; the manager seals a storage-config entry to
that cluster's public key with a libsodium sealed box (anonymous sender,
authenticated encryption). The plaintext is an envelope that also names the
SealedStorageConnection it was sealed for (``binding``), so a ciphertext copied
into another object, even on the same cluster, is refused.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, PublicKey, SealedBox

from addon_api.hashing import short_hash

ENVELOPE_VERSION = 1


class SealError(ValueError):
    """A payload could not be sealed or opened; the message says why."""


def generate_private_key() -> bytes:
    """A new X25519 private key (32 raw bytes)."""
    return bytes(PrivateKey.generate())


def public_key_of(private_key: bytes) -> str:
    """Base64 of the public key that belongs to ``private_key``."""
    return base64.b64encode(bytes(PrivateKey(private_key).public_key)).decode()


def key_id(public_key_b64: str) -> str:
    """Short stable id of a public key: the first 16 hex digits of its SHA-256."""
    return short_hash(_decode_key(public_key_b64), length=16)


def binding_for(namespace: str, name: str) -> str:
    """The binding string of the spoke SealedStorageConnection ``namespace/name``."""
    return f"{namespace}/{name}"


def _decode_key(public_key_b64: str) -> bytes:
    try:
        raw = base64.b64decode(public_key_b64, validate=True)
    except (binascii.Error, ValueError) as err:
        raise SealError("public key is not valid base64") from err
    if len(raw) != 32:
        raise SealError(f"public key must be 32 bytes, got {len(raw)}")
    return raw


def seal(public_key_b64: str, binding: str, payload: dict[str, Any]) -> str:
    """Seal ``payload`` for the holder of ``public_key_b64``; return base64 ciphertext."""
    envelope = {"v": ENVELOPE_VERSION, "binding": binding, "payload": payload}
    plaintext = json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode()
    box = SealedBox(PublicKey(_decode_key(public_key_b64)))
    return base64.b64encode(box.encrypt(plaintext)).decode()


def unseal(private_key: bytes, binding: str, sealed_b64: str) -> dict[str, Any]:
    """Open a sealed payload; raise SealError when it is not for this key or binding."""
    try:
        ciphertext = base64.b64decode(sealed_b64, validate=True)
    except (binascii.Error, ValueError) as err:
        raise SealError("sealed payload is not valid base64") from err
    try:
        plaintext = SealedBox(PrivateKey(private_key)).decrypt(ciphertext)
    except CryptoError as err:
        raise SealError("payload does not decrypt with this agent's key") from err
    try:
        envelope = json.loads(plaintext)
    except ValueError as err:
        raise SealError("decrypted payload is not JSON") from err
    if not isinstance(envelope, dict) or envelope.get("v") != ENVELOPE_VERSION:
        raise SealError("unknown envelope version")
    if envelope.get("binding") != binding:
        raise SealError(
            f"payload was sealed for {envelope.get('binding')!r}, not for {binding!r}"
        )
    payload = envelope.get("payload")
    if not isinstance(payload, dict):
        raise SealError("payload is not an object")
    return payload
