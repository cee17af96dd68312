"""Deliver a SealedStorageConnection: decrypt it and maintain its storage-config entries."""

from __future__ import annotations

import base64
from typing import Any

from kubernetes.dynamic.exceptions import ConflictError, ForbiddenError

from addon_agent import kube as kio
from addon_agent import labels as lb
from addon_agent import storage
from addon_agent.kube import Kube
from addon_api import constants as c
from addon_api import sealing
from addon_api.spoke import SealedStorageConnectionSpec

Obj = dict[str, Any]


class DeliveryError(RuntimeError):
    """Delivery failed; ``reason`` is the condition reason."""

    def __init__(self, reason: str, message: str) -> None:
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
        "NamespaceTerminating",
        "target namespaces are being deleted, nothing is written into them: "
        + ", ".join(namespaces),
    )


def deliver(
    kube: Kube, private_key: bytes, namespace: str, name: str, spec: SealedStorageConnectionSpec
) -> None:
    """Write the entry into every target namespace; remove it from namespaces no longer listed."""
    public = sealing.public_key_of(private_key)
    if spec.key_id != sealing.key_id(public):
        raise DeliveryError(
            "KeyMismatch", f"sealed for key {spec.key_id}, agent holds {sealing.key_id(public)}"
        )
    binding = sealing.binding_for(namespace, name)
    try:
        payload = sealing.unseal(private_key, binding, spec.sealed)
    except sealing.SealError as err:
        raise DeliveryError("DecryptFailed", str(err)) from err
    found = {ns: kube.get("v1", "Namespace", ns) for ns in spec.target_namespaces}
    missing = [ns for ns, obj in found.items() if obj is None]
    if missing:
        raise DeliveryError(
            "NamespaceMissing", "target namespaces do not exist: " + ", ".join(missing)
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
                raise DeliveryError("EntryConflict", f"{target}: {err}") from err
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
