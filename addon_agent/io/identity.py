"""The agent's X25519 identity: private key Secret, published identity ConfigMap, rotation.

The key Secret lives in the agent's state namespace (``--state-namespace``), which no other
add-on shares; the identity ConfigMap (public keys only) in the add-on namespace, where the
manager's identity work reads it. An agent that finds its key in the add-on namespace (an
older agent kept it there) moves it to the state namespace, so the key, and with it every
sealed entry, survives the upgrade.

Rotation (see docs/user-guide.md#rotating-an-agent-key):

1. A spoke admin annotates the key Secret ``modelserving.opendatahub.io/rotate-key=requested``.
   The agent generates a next key, keeps it in the same Secret (``nextPrivateKey``) and
   publishes it beside the current one (``nextPublicKey``/``nextKeyId``).
2. The manager keeps sealing to the key pinned on the hub until a hub admin approves the next
   key id; then it pins it and reseals every connection of the cluster to it.
3. Meanwhile the agent opens payloads sealed to either key, so every entry stays delivered.
4. Once every SealedStorageConnection is sealed to the next key and delivered
   (:func:`rotation_done`), the agent promotes it to current and drops the old key.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from addon_agent import labels as lb
from addon_agent.io import kube as kio
from addon_agent.io.kube import Kube
from addon_api import constants as c
from addon_api import sealing

PRIVATE_KEY_FIELD = "privateKey"
NEXT_PRIVATE_KEY_FIELD = "nextPrivateKey"
ROTATE_REQUESTED = "requested"


@dataclass(frozen=True)
class Keyring:
    """The agent's current private key and, during a rotation, its next one."""

    current: bytes
    next: bytes | None = None

    def by_id(self) -> dict[str, bytes]:
        """Private keys by the id of their public key."""
        keys = [self.current] + ([self.next] if self.next is not None else [])
        return {sealing.key_id(sealing.public_key_of(k)): k for k in keys}

    @property
    def next_id(self) -> str:
        """Id of the next key ("" outside a rotation)."""
        return sealing.key_id(sealing.public_key_of(self.next)) if self.next else ""


def ensure_namespace(kube: Kube, namespace: str) -> None:
    """Create an agent namespace when it does not exist (never takes it over)."""
    if kube.get("v1", "Namespace", namespace) is None:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})


def _field(secret: dict[str, Any] | None, name: str) -> bytes | None:
    raw = ((secret or {}).get("data") or {}).get(name)
    return base64.b64decode(raw) if raw else None


def identity_data(keys: Keyring) -> dict[str, str]:
    """What the identity ConfigMap publishes for ``keys``."""
    public = sealing.public_key_of(keys.current)
    data = {c.IDENTITY_PUBLIC_KEY: public, c.IDENTITY_KEY_ID: sealing.key_id(public)}
    if keys.next is not None:
        nxt = sealing.public_key_of(keys.next)
        data |= {c.IDENTITY_NEXT_PUBLIC_KEY: nxt, c.IDENTITY_NEXT_KEY_ID: sealing.key_id(nxt)}
    return data


def _publish(kube: Kube, namespace: str, keys: Keyring) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": c.AGENT_IDENTITY_CONFIGMAP,
            "namespace": namespace,
            "labels": lb.ours(),
        },
        "data": identity_data(keys),
    }
    current = kube.get("v1", "ConfigMap", c.AGENT_IDENTITY_CONFIGMAP, namespace)
    if current is not None and (current.get("data") or {}) == body["data"]:
        return
    if current is not None:  # replace, so that next-key fields dropped at promotion go
        current["data"] = body["data"]
        kio.replace(kube, current)
        return
    kube.apply(body)


def _secret_body(namespace: str, keys: Keyring, annotations: dict[str, str]) -> dict[str, Any]:
    data = {PRIVATE_KEY_FIELD: base64.b64encode(keys.current).decode()}
    if keys.next is not None:
        data[NEXT_PRIVATE_KEY_FIELD] = base64.b64encode(keys.next).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": c.AGENT_KEY_SECRET,
            "namespace": namespace,
            "labels": lb.ours(),
            "annotations": annotations,
        },
        "type": "Opaque",
        "data": data,
    }


def _moved_secret(kube: Kube, namespace: str, state_namespace: str) -> dict[str, Any] | None:
    """The key Secret an older agent kept in ``namespace``, moved to ``state_namespace``.

    Created there first (never overwriting a key that is already there), then deleted from
    the add-on namespace; None when there is nothing to move.
    """
    old = kube.get("v1", "Secret", c.AGENT_KEY_SECRET, namespace)
    if old is None or _field(old, PRIVATE_KEY_FIELD) is None:
        return None
    meta = old.get("metadata") or {}
    kube.apply({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": c.AGENT_KEY_SECRET, "namespace": state_namespace,
                     "labels": lb.ours(), "annotations": dict(meta.get("annotations") or {})},
        "data": dict(old.get("data") or {}),
    }, force=False)
    kube.delete("v1", "Secret", c.AGENT_KEY_SECRET, namespace)
    return kube.get("v1", "Secret", c.AGENT_KEY_SECRET, state_namespace)


def load_keyring(kube: Kube, namespace: str, state_namespace: str) -> Keyring:
    """Load (or create) the keys, start a requested rotation, publish the identity ConfigMap.

    The key Secret is read in ``state_namespace`` (moved there from ``namespace`` if an older
    agent kept it there); the identity is published in ``namespace``.
    """
    secret = kube.get("v1", "Secret", c.AGENT_KEY_SECRET, state_namespace)
    if secret is None and state_namespace != namespace:
        secret = _moved_secret(kube, namespace, state_namespace)
    current = _field(secret, PRIVATE_KEY_FIELD)
    nxt = _field(secret, NEXT_PRIVATE_KEY_FIELD)
    annotations = dict(((secret or {}).get("metadata") or {}).get("annotations") or {})
    if current is None:
        keys = Keyring(sealing.generate_private_key())
        kube.apply(_secret_body(state_namespace, keys, {}), force=False)
    else:
        keys = Keyring(current, nxt)
        if nxt is None and annotations.get(c.ANNOTATION_ROTATE_KEY) == ROTATE_REQUESTED:
            keys = Keyring(current, sealing.generate_private_key())
            assert secret is not None
            secret["data"] = _secret_body(state_namespace, keys, annotations)["data"]
            kio.replace(kube, secret)  # compare-and-swap: two agents never make two keys
    _publish(kube, namespace, keys)
    return keys


def ensure_identity(kube: Kube, namespace: str, state_namespace: str) -> bytes:
    """Load or create the private key and publish the identity ConfigMap; return the key."""
    return load_keyring(kube, namespace, state_namespace).current


def rotation_done(keys: Keyring, sealed_objects: Iterable[dict[str, Any]]) -> bool:
    """Whether every SealedStorageConnection is sealed to the next key and delivered.

    Delivered means phase Delivered for the object's current generation: the entry written
    from the payload sealed to the next key. Only then may the old key go.
    """
    if keys.next is None:
        return False
    want = keys.next_id
    for obj in sealed_objects:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        status = obj.get("status") or {}
        if meta.get("deletionTimestamp"):
            continue
        if spec.get("keyId") != want or status.get("phase") != "Delivered":
            return False
        if status.get("observedGeneration") != meta.get("generation"):
            return False
    return True


def promote(kube: Kube, namespace: str, state_namespace: str, keys: Keyring) -> Keyring:
    """Make the next key current, drop the old one and the rotation request; publish."""
    assert keys.next is not None
    secret = kube.get("v1", "Secret", c.AGENT_KEY_SECRET, state_namespace)
    assert secret is not None
    new = Keyring(keys.next)
    annotations = dict((secret.get("metadata") or {}).get("annotations") or {})
    annotations.pop(c.ANNOTATION_ROTATE_KEY, None)
    secret["metadata"]["annotations"] = annotations
    secret["data"] = _secret_body(state_namespace, new, annotations)["data"]
    kio.replace(kube, secret)
    _publish(kube, namespace, new)
    return new


def refresh(kube: Kube, namespace: str, state_namespace: str) -> Keyring:
    """One pass of the identity loop: load the keys, promote a finished rotation."""
    keys = load_keyring(kube, namespace, state_namespace)
    if keys.next is not None and rotation_done(
        keys, kube.list(f"{c.GROUP}/{c.VERSION}", c.KIND_SEALED_STORAGE_CONNECTION)
    ):
        keys = promote(kube, namespace, state_namespace, keys)
    return keys
