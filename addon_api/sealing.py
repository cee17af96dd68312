"""Sealed storage credentials: what the manager seals and signs and only one agent can open.

Each agent holds an X25519 key pair; the manager holds an Ed25519 signing key on the hub.
Sealing (envelope version 2):

1. The envelope is canonical JSON: ``v`` (2), ``cluster``, ``binding`` (the spoke
   SealedStorageConnection ``namespace/name``), ``targetNamespaces``, ``entryName``, ``type``,
   ``seq`` (a sequence number that only grows, see :mod:`addon_manager.shell.sealkeys`) and
   ``payload`` (the storage-config entry).
2. The manager signs those bytes with its Ed25519 key; the plaintext of the box is
   ``signature (64 bytes) || envelope``.
3. That plaintext is sealed to the agent's public key with a libsodium sealed box (anonymous
   sender, authenticated encryption) and base64-encoded.

The signature sits inside the box: anyone may know the manager's verify key, and a signature
in the clear would let a reader of ManifestWorks test guesses of the plaintext offline. The
agent opens the box, verifies the signature with the verify key it was configured with (a
valid box without a valid signature was sealed by someone else: ``SealUnsigned``), then checks
every bound field against the object the ciphertext was found in and its own cluster name
(``SealMismatch``, naming the field), and the sequence against the last one it accepted for
that binding (``SealReplayed``).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from nacl.exceptions import BadSignatureError, CryptoError
from nacl.public import PrivateKey, PublicKey, SealedBox
from nacl.signing import SigningKey, VerifyKey

from addon_api.hashing import short_hash
from addon_api.reasons import SealedReason

ENVELOPE_VERSION = 2
SIGNATURE_BYTES = 64

REASON_DECRYPT_FAILED = SealedReason.DECRYPT_FAILED
"""The payload does not open with the agent's key (not for it, damaged, not base64)."""
REASON_UNSIGNED = SealedReason.SEAL_UNSIGNED
"""The box opened but carries no valid signature of a configured manager key."""
REASON_MISMATCH = SealedReason.SEAL_MISMATCH
"""A bound field differs from the object (or cluster) the ciphertext was found in."""
REASON_REPLAYED = SealedReason.SEAL_REPLAYED
"""The sequence is lower than the last one the agent accepted for that binding."""


class SealError(ValueError):
    """A payload could not be sealed or opened; ``reason`` is the condition reason."""

    def __init__(self, message: str, reason: SealedReason = REASON_DECRYPT_FAILED) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Binding:
    """Where a sealed entry may be delivered: every field is inside the signed envelope."""

    cluster: str
    """Name of the managed cluster (the agent's ``--cluster-name``)."""
    namespace: str
    """Namespace of the spoke SealedStorageConnection (the agent's namespace)."""
    name: str
    """Name of the spoke SealedStorageConnection."""
    target_namespaces: tuple[str, ...]
    entry_name: str
    type: str

    @property
    def object(self) -> str:
        """``namespace/name`` of the SealedStorageConnection (the binding string)."""
        return binding_for(self.namespace, self.name)

    def fields(self) -> dict[str, Any]:
        """The envelope fields of this binding."""
        return {
            "cluster": self.cluster,
            "binding": self.object,
            "targetNamespaces": list(self.target_namespaces),
            "entryName": self.entry_name,
            "type": self.type,
        }


@dataclass(frozen=True)
class Opened:
    """A verified envelope: its bound fields, sequence and payload."""

    fields: dict[str, Any]
    sequence: int
    payload: dict[str, Any]


# keys ---------------------------------------------------------------------------------------


def generate_private_key() -> bytes:
    """A new X25519 private key (32 raw bytes)."""
    return bytes(PrivateKey.generate())


def public_key_of(private_key: bytes) -> str:
    """Base64 of the public key that belongs to ``private_key``."""
    return base64.b64encode(bytes(PrivateKey(private_key).public_key)).decode()


def key_id(public_key_b64: str) -> str:
    """Short stable id of a public key: the first 16 hex digits of its SHA-256."""
    return short_hash(_decode_key(public_key_b64), length=16)


def generate_signing_key() -> bytes:
    """A new Ed25519 signing key (its 32-byte seed)."""
    return bytes(SigningKey.generate())


def verify_key_of(signing_key: bytes) -> str:
    """Base64 of the Ed25519 verify key of ``signing_key`` (what agents are configured with)."""
    return base64.b64encode(bytes(SigningKey(signing_key).verify_key)).decode()


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


def parse_verify_keys(text: str) -> tuple[str, ...]:
    """Verify keys from a comma-separated list of base64 Ed25519 keys (blank entries skipped).

    Raises :class:`SealError` naming the first key that is not 32 bytes of base64. A value
    still holding an unrendered template variable (``{{...}}``) counts as no key.
    """
    out: list[str] = []
    for item in text.split(","):
        item = item.strip()
        if not item or item.startswith("{{"):
            continue
        _decode_key(item)
        out.append(item)
    return tuple(out)


# seal / open --------------------------------------------------------------------------------


def envelope_bytes(binding: Binding, sequence: int, payload: dict[str, Any]) -> bytes:
    """The canonical envelope that is signed and sealed."""
    envelope = {"v": ENVELOPE_VERSION, **binding.fields(), "seq": sequence, "payload": payload}
    return json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode()


def seal(
    public_key_b64: str, binding: Binding, sequence: int, payload: dict[str, Any],
    signing_key: bytes,
) -> str:
    """Sign and seal ``payload`` for the holder of ``public_key_b64``; return base64."""
    message = envelope_bytes(binding, sequence, payload)
    signature = SigningKey(signing_key).sign(message).signature
    box = SealedBox(PublicKey(_decode_key(public_key_b64)))
    return base64.b64encode(box.encrypt(signature + message)).decode()


def seal_unsigned(public_key_b64: str, plaintext: bytes) -> str:
    """Seal raw ``plaintext`` (no signature): what anyone holding the public key can do.

    Only tests use it, to show that such a payload is refused.
    """
    box = SealedBox(PublicKey(_decode_key(public_key_b64)))
    return base64.b64encode(box.encrypt(plaintext)).decode()


def open_sealed(
    private_keys: tuple[bytes, ...] | bytes, sealed_b64: str, verify_keys: tuple[str, ...]
) -> Opened:
    """Open with any of ``private_keys`` and verify with any of ``verify_keys``.

    Raises :class:`SealError` with reason ``DecryptFailed`` (no key opens it) or
    ``SealUnsigned`` (no configured manager key signed it, or an unsigned v1 envelope).
    Bound fields are checked by :func:`check_binding`, the sequence by :func:`check_sequence`.
    """
    keys = (private_keys,) if isinstance(private_keys, bytes) else private_keys
    try:
        ciphertext = base64.b64decode(sealed_b64, validate=True)
    except (binascii.Error, ValueError) as err:
        raise SealError("sealed payload is not valid base64") from err
    plaintext: bytes | None = None
    for key in keys:
        try:
            plaintext = SealedBox(PrivateKey(key)).decrypt(ciphertext)
            break
        except CryptoError:
            continue
    if plaintext is None:
        raise SealError("payload does not decrypt with this agent's key")
    if not verify_keys:
        raise SealError(
            "the agent has no manager verify key configured (--seal-verify-key): "
            "no sealed payload is accepted", REASON_UNSIGNED,
        )
    signature, message = plaintext[:SIGNATURE_BYTES], plaintext[SIGNATURE_BYTES:]
    if not any(_verifies(vk, message, signature) for vk in verify_keys):
        raise SealError(
            "payload opens with this agent's key but is not signed by the manager: "
            "it was sealed by someone else", REASON_UNSIGNED,
        )
    try:
        envelope = json.loads(message)
    except ValueError as err:
        raise SealError("signed envelope is not JSON", REASON_UNSIGNED) from err
    if not isinstance(envelope, dict) or envelope.get("v") != ENVELOPE_VERSION:
        raise SealError("unknown envelope version", REASON_UNSIGNED)
    payload, sequence = envelope.get("payload"), envelope.get("seq")
    if not isinstance(payload, dict):
        raise SealError("payload is not an object", REASON_MISMATCH)
    if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 0:
        raise SealError("envelope has no valid sequence (field seq)", REASON_MISMATCH)
    fields = {k: envelope.get(k) for k in ("cluster", "binding", "targetNamespaces",
                                           "entryName", "type")}
    return Opened(fields, sequence, payload)


def _verifies(verify_key_b64: str, message: bytes, signature: bytes) -> bool:
    try:
        VerifyKey(base64.b64decode(verify_key_b64)).verify(message, signature)
    except (BadSignatureError, ValueError, CryptoError):
        return False
    return True


FIELD_NAMES = {
    "cluster": "cluster",
    "binding": "binding (SealedStorageConnection namespace/name)",
    "targetNamespaces": "spec.targetNamespaces",
    "entryName": "spec.entryName",
    "type": "spec.type",
}


def mismatches(opened: Opened, expected: Binding) -> list[str]:
    """The bound fields of ``opened`` that differ from ``expected`` (envelope field names)."""
    want = expected.fields()
    return [k for k in FIELD_NAMES if opened.fields.get(k) != want[k]]


def check_binding(opened: Opened, expected: Binding) -> None:
    """Raise ``SealMismatch`` naming every bound field that differs from ``expected``."""
    wrong = mismatches(opened, expected)
    if wrong:
        detail = "; ".join(
            f"{FIELD_NAMES[k]}: sealed for {opened.fields.get(k)!r}, found {expected.fields()[k]!r}"
            for k in wrong
        )
        raise SealError(f"sealed envelope does not match where it was found: {detail}",
                        REASON_MISMATCH)


def check_sequence(opened: Opened, last_accepted: int | None, binding: str) -> None:
    """Raise ``SealReplayed`` when the sequence is below the last one accepted for ``binding``.

    The same sequence again is accepted (the same ciphertext read again on a resync).
    """
    if last_accepted is not None and opened.sequence < last_accepted:
        raise SealError(
            f"sequence {opened.sequence} is older than {last_accepted}, the last accepted for "
            f"{binding}: an old ciphertext was replayed; the delivered entry is kept",
            REASON_REPLAYED,
        )


def unseal(
    private_keys: tuple[bytes, ...] | bytes, expected: Binding, sealed_b64: str,
    verify_keys: tuple[str, ...], last_accepted: int | None = None,
) -> Opened:
    """Open, verify the signature, the binding and the sequence (see the module docstring)."""
    opened = open_sealed(private_keys, sealed_b64, verify_keys)
    check_binding(opened, expected)
    check_sequence(opened, last_accepted, expected.object)
    return opened
