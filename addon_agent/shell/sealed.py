"""SealedStorageConnections: open each one, deliver its storage-config entries, write its status.

The delivery itself is :mod:`addon_agent.io.delivery`; the agent's policy check
:mod:`addon_agent.pure.tenancy`; the status :func:`addon_agent.pure.status.sealed_status`,
written once per delivery.
"""

from __future__ import annotations

import logging
import threading
from typing import cast

import kopf

from addon_agent.config import AgentConfig
from addon_agent.io import delivery, identity, ledger, metrics, namespace_waits, policy_source
from addon_agent.io.kube import Kube
from addon_agent.pure import status as st
from addon_agent.pure import tenancy
from addon_api import constants as c
from addon_api.base import plain
from addon_api.reasons import SEALED_WAITS, SealedReason
from addon_api.spoke import SealedStorageConnectionSpec, SealedStorageConnectionStatus

log = logging.getLogger(__name__)

SPOKE_API = f"{c.GROUP}/{c.VERSION}"


class SealedConnections:
    """The deliveries of one agent: its keys, its seal ledger, the connections that wait."""

    def __init__(self, config: AgentConfig, kube: Kube) -> None:
        self.config = config
        self.kube = kube
        self.keyring: identity.Keyring | None = None
        """The agent's private keys (current, and next during a rotation)."""
        self.ledger = ledger.Ledger(kube, config.state_namespace)
        self.waits = namespace_waits.NamespaceWaits()
        """Sealed connections Pending until a target namespace exists."""
        self.delivery_lock = threading.Lock()
        """One delivery at a time (kopf's handlers and the namespace watch may overlap)."""

    def deliver(self, body: kopf.Body) -> None:
        """Decrypt a SealedStorageConnection into storage-config entries; write its status."""
        if body.metadata.get("deletionTimestamp"):
            return
        ns, name = body.metadata["namespace"], body.metadata["name"]
        generation = body.metadata.get("generation")
        previous = list((body.get("status") or {}).get("conditions") or [])
        self.waits.done((ns, name))
        status: SealedStorageConnectionStatus
        with self.delivery_lock, \
                metrics.RECONCILE_SECONDS.labels(kind="SealedStorageConnection").time():
            try:
                spec = SealedStorageConnectionSpec.from_wire(plain(body["spec"]))
                read = policy_source.read(self.kube, self.config.namespace,
                                          self.config.target_namespaces)
                missing = tenancy.without_policy(read, spec.target_namespaces, sealed=True)
                if missing is not None:
                    raise delivery.DeliveryError(SealedReason(missing[0]), missing[1])
                refused = "" if read.policy is None else tenancy.refused_targets(
                    read.policy, name, spec.source.namespace if spec.source else None,
                    spec.target_namespaces, self.config.namespace,
                )
                if refused:
                    raise delivery.DeliveryError(SealedReason.NAMESPACE_NOT_ALLOWED, refused)
                delivery.deliver(
                    self.kube, self.opener(spec.key_id), self.ledger, ns, name, spec
                )
            except delivery.DeliveryError as err:
                metrics.RECONCILE_ERRORS.labels(kind="SealedStorageConnection").inc()
                if err.reason in SEALED_WAITS:  # delivered again once a target appears
                    self.waits.wait((ns, name), spec.target_namespaces)
                status = st.sealed_status(err.reason, str(err), generation, previous)
            else:
                message = "entry delivered to " + ", ".join(spec.target_namespaces)
                status = st.sealed_status(SealedReason.DELIVERED, message, generation, previous)
        self.kube.patch_status(
            SPOKE_API, c.KIND_SEALED_STORAGE_CONNECTION, name, status.to_patch(),
            namespace=ns,
        )

    def deliver_waiting(self, namespace: str) -> None:
        """Deliver again every sealed connection that waited for ``namespace``."""
        for ns, name in self.waits.take(namespace):
            sealed = self.kube.get(SPOKE_API, c.KIND_SEALED_STORAGE_CONNECTION, name, ns)
            if sealed is not None:
                log.info("namespace %s is there: delivering %s/%s", namespace, ns, name)
                self.deliver(kopf.Body(cast(kopf.RawBody, sealed)))

    def opener(self, key_id: str = "") -> delivery.Opener:
        """The keys, verify keys and cluster name payloads are opened with.

        The keys are read again when ``key_id`` is not among them (a rotation just started).
        """
        keys = self.keyring
        if keys is None or (key_id and key_id not in keys.by_id()):
            keys = self.keyring = identity.load_keyring(
                self.kube, self.config.namespace, self.config.state_namespace
            )
        return delivery.Opener(keys.by_id(), self.config.seal_verify_keys, self.config.cluster_name)

    def refresh_identity(self) -> None:
        """Reload the keys: start a requested rotation, promote a finished one."""
        self.keyring = identity.refresh(
            self.kube, self.config.namespace, self.config.state_namespace
        )

    def forget(self, body: kopf.Body) -> None:
        """Remove the connection's entries (its deletion)."""
        delivery.remove(self.kube, body.metadata["namespace"], body.metadata["name"])
