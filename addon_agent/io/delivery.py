"""Deliver a SealedStorageConnection: decrypt it and maintain its storage-config entries."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes.dynamic.exceptions import ConflictError, ForbiddenError

from addon_agent import labels as lb
from addon_agent.io import kube as kio
from addon_agent.io.kube import Kube
from addon_agent.pure import storage
from addon_api import constants as c
from addon_api import sealing
from addon_api.reasons import SealedReason
from addon_api.spoke import SealedStorageConnectionSpec

Obj = dict[str, Any]


class DeliveryError(RuntimeError):
    """Delivery failed; ``reason`` is the condition reason."""

    def __init__(self, reason: SealedReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _write(kube: Kube, namespace: str, existing: Obj | None, edit: storage.SecretEdit) -> None:
    annotations = {lb.ANNOTATION_OWNED_ENTRIES: storage.json_owners(edit.owners)}
    if existing is None:
        kio.create(
            kube,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": c.STORAGE_CONFIG_SECRET,
                    "namespace": namespace,
                    "labels": {**lb.ours(), lb.LABEL_STORAGE_CONFIG: "true"},
                    "annotations": {**annotations, lb.ANNOTATION_CREATED_BY_AGENT: "true"},
                },
                "type": "Opaque",
                "data": edit.data or {},
            },
        )
        return
    if edit.data is None:
        kube.delete("v1", "Secret", c.STORAGE_CONFIG_SECRET, namespace)
        return
    meta = existing["metadata"]
    meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    meta.setdefault("labels", {})
    meta["labels"] = {**(meta["labels"] or {}), lb.LABEL_STORAGE_CONFIG: "true"}
    existing["data"] = edit.data
    existing.pop("status", None)
    kio.replace(kube, existing)


def _created_by_agent(secret: Obj | None) -> bool:
    annotations = ((secret or {}).get("metadata") or {}).get("annotations") or {}
    return annotations.get(lb.ANNOTATION_CREATED_BY_AGENT) == "true"


def _retry(fn: Any, attempts: int = 5) -> None:
    for attempt in range(attempts):
        try:
            fn()
            return
        except ConflictError:
            if attempt == attempts - 1:
                raise


def terminating(namespace: Obj | None) -> bool:
    """Whether a Namespace is being deleted (nothing new can be created in it)."""
    if not namespace:
        return False
    return bool((namespace.get("metadata") or {}).get("deletionTimestamp")) or (
        (namespace.get("status") or {}).get("phase") == "Terminating"
    )


def _terminating(namespaces: list[str]) -> DeliveryError:
    return DeliveryError(
        SealedReason.NAMESPACE_TERMINATING,
        "target namespaces are being deleted, nothing is written into them: "
        + ", ".join(namespaces),
    )


class LedgerLike(Protocol):
    """Where the last accepted sequence per binding is kept (see :mod:`addon_agent.io.ledger`)."""

    def last(self, binding: str) -> int | None:
        """The last sequence accepted for ``binding``."""

    def record(self, binding: str, sequence: int) -> None:
        """Raise the record of ``binding`` to ``sequence``."""


@dataclass(frozen=True)
class Opener:
    """What the agent opens sealed payloads with."""

    keys: dict[str, bytes]
    """Private keys by key id: the current one and, during a rotation, the next one."""
    verify_keys: tuple[str, ...]
    """Base64 Ed25519 keys of the manager (``--seal-verify-key``)."""
    cluster: str
    """This cluster's name (``--cluster-name``), bound in every envelope."""


def open_spec(
    opener: Opener, ledger: LedgerLike, namespace: str, name: str,
    spec: SealedStorageConnectionSpec,
) -> sealing.Opened:
    """Open and verify the payload of SealedStorageConnection ``namespace/name``.

    Every bound field is checked against this object and the agent's cluster name, and the
    sequence against the ledger. Raises :class:`DeliveryError` with the reason
    (``KeyMismatch``, ``DecryptFailed``, ``SealUnsigned``, ``SealMismatch``, ``SealReplayed``);
    nothing is written then, so what was delivered before stays.
    """
    key = opener.keys.get(spec.key_id)
    if key is None:
        raise DeliveryError(
            SealedReason.KEY_MISMATCH,
            f"sealed for key {spec.key_id}, agent holds {', '.join(sorted(opener.keys))}",
        )
    expected = sealing.Binding(
        cluster=opener.cluster, namespace=namespace, name=name,
        target_namespaces=tuple(spec.target_namespaces), entry_name=spec.entry_name,
        type=spec.type,
    )
    try:
        return sealing.unseal(
            key, expected, spec.sealed, opener.verify_keys, ledger.last(expected.object)
        )
    except sealing.SealError as err:
        raise DeliveryError(err.reason, str(err)) from err


def deliver(
    kube: Kube, opener: Opener, ledger: LedgerLike, namespace: str, name: str,
    spec: SealedStorageConnectionSpec,
) -> None:
    """Write the entry into every target namespace; remove it from namespaces no longer listed.

    The sequence is recorded in the ledger once every entry is written.
    """
    binding = sealing.binding_for(namespace, name)
    opened = open_spec(opener, ledger, namespace, name, spec)
    payload = opened.payload
    found = {ns: kube.get("v1", "Namespace", ns) for ns in spec.target_namespaces}
    missing = [ns for ns, obj in found.items() if obj is None]
    if missing:
        raise DeliveryError(
            SealedReason.NAMESPACE_MISSING, "target namespaces do not exist: " + ", ".join(missing)
        )
    going = [ns for ns, obj in found.items() if terminating(obj)]
    if going:
        raise _terminating(going)
    for target in spec.target_namespaces:

        def put(target: str = target) -> None:
            secret = kube.get("v1", "Secret", c.STORAGE_CONFIG_SECRET, target)
            try:
                edit = storage.put_entry(secret, spec.entry_name, binding, payload)
            except storage.EntryConflict as err:
                raise DeliveryError(SealedReason.ENTRY_CONFLICT, f"{target}: {err}") from err
            if (
                secret is not None
                and (secret.get("data") or {}) == edit.data
                and storage.owners_of(secret) == edit.owners
            ):
                return
            _write(kube, target, secret, edit)

        try:
            _retry(put)
        except ForbiddenError as err:
            if "being terminated" not in str(err.body or err):
                raise
            raise _terminating([target]) from err
    remove(kube, namespace, name, keep=set(spec.target_namespaces))
    ledger.record(binding, opened.sequence)


def remove(kube: Kube, namespace: str, name: str, keep: set[str] | None = None) -> None:
    """Remove this connection's entries from every storage-config Secret (except in ``keep``)."""
    binding = sealing.binding_for(namespace, name)
    for secret in kube.list("v1", "Secret", label_selector=f"{lb.LABEL_STORAGE_CONFIG}=true"):
        target = secret["metadata"]["namespace"]
        if secret["metadata"]["name"] != c.STORAGE_CONFIG_SECRET or (keep and target in keep):
            continue
        for entry in storage.entries_owned_by(secret, binding):

            def drop(target: str = target, entry: str = entry) -> None:
                current = kube.get("v1", "Secret", c.STORAGE_CONFIG_SECRET, target)
                edit = storage.remove_entry(current, entry, binding, _created_by_agent(current))
                if edit is not None:
                    _write(kube, target, current, edit)

            _retry(drop)


def decode_entry(secret: Obj, entry: str) -> Any:
    """The JSON value of one storage-config entry (tests and debugging)."""
    import json

    return json.loads(base64.b64decode(secret["data"][entry]))
