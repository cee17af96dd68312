"""The agent's record of the last sealed sequence it accepted, per binding.

It is a Lease (``model-serving-seal-ledger``) in the agent's state namespace (which no other
add-on shares) whose annotation holds a JSON map binding -> sequence. An agent whose older
release kept it in the add-on namespace carries its records over once, at start
(:meth:`Ledger.adopt`). Why there, and not on the SealedStorageConnection:

* A forged ManifestWork can delete and re-create a SealedStorageConnection, and with it
  anything kept on that object (status included): a record kept there would be reset by the
  very replay it must stop. The ledger outlives the objects it speaks of (deleting a
  connection does not clear its record), so a re-created object with an old ciphertext is
  still refused.
* OCM's work agent applies ManifestWorks with the rights of its ``admin`` binding and the
  ``aggregate-to-work`` roles (ConfigMaps, Secrets and our kinds in every namespace);
  ``coordination.k8s.io`` Leases are in neither, so a plain forged work cannot overwrite the
  ledger, while the agent's own role may (it renews its health Lease there already).
  A forged work that first grants the work agent more RBAC defeats any record on the spoke;
  that is stopped on the hub (per-tenant work executors and OCM's executor validation).

Writes are compare-and-swap on the Lease's resourceVersion and only ever raise a sequence.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes.dynamic.exceptions import ConflictError

from addon_agent import labels as lb
from addon_agent.io import kube as kio
from addon_agent.io.kube import Kube
from addon_api import constants as c

ANNOTATION = f"{c.GROUP}/accepted-sequences"
LEASE_API = "coordination.k8s.io/v1"


def parse(lease: dict[str, Any] | None) -> dict[str, int]:
    """Binding -> last accepted sequence, from the Lease (empty when absent or unreadable)."""
    raw = (((lease or {}).get("metadata") or {}).get("annotations") or {}).get(ANNOTATION, "{}")
    try:
        found = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(k): v for k, v in found.items() if isinstance(v, int) and not isinstance(v, bool)}


def raised(record: dict[str, int], binding: str, sequence: int) -> dict[str, int] | None:
    """The record with ``binding`` raised to ``sequence``; None when it is not higher."""
    last = record.get(binding)
    if last is not None and last >= sequence:
        return None
    return {**record, binding: sequence}


class Ledger:
    """The Lease-backed ledger of one agent namespace."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace

    def _lease(self, namespace: str | None = None) -> dict[str, Any] | None:
        return self.kube.get(LEASE_API, "Lease", c.AGENT_SEAL_LEDGER, namespace or self.namespace)

    def adopt(self, old_namespace: str) -> None:
        """Carry over the records an older agent kept in ``old_namespace`` (once).

        Only while the state namespace has no ledger yet: once it has one, the old Lease
        (left in place: the agent may not delete Leases) is never read again, so whoever can
        write the shared namespace cannot raise a record to refuse a delivery.
        """
        if old_namespace == self.namespace or self._lease() is not None:
            return
        for binding, sequence in sorted(parse(self._lease(old_namespace)).items()):
            self.record(binding, sequence)

    def last(self, binding: str) -> int | None:
        """The last sequence accepted for ``binding``, None if none was."""
        return parse(self._lease()).get(binding)

    def record(self, binding: str, sequence: int, attempts: int = 5) -> None:
        """Raise the record of ``binding`` to ``sequence`` (never lowers it)."""
        for attempt in range(attempts):
            lease = self._lease()
            new = raised(parse(lease), binding, sequence)
            if new is None:
                return
            value = json.dumps(new, sort_keys=True, separators=(",", ":"))
            try:
                if lease is None:
                    kio.create(self.kube, {
                        "apiVersion": LEASE_API,
                        "kind": "Lease",
                        "metadata": {
                            "name": c.AGENT_SEAL_LEDGER,
                            "namespace": self.namespace,
                            "labels": lb.ours(),
                            "annotations": {ANNOTATION: value},
                        },
                        "spec": {},
                    })
                else:
                    lease["metadata"].setdefault("annotations", {})
                    lease["metadata"]["annotations"] = {
                        **(lease["metadata"]["annotations"] or {}), ANNOTATION: value
                    }
                    kio.replace(self.kube, lease)
                return
            except ConflictError:
                if attempt == attempts - 1:
                    raise
