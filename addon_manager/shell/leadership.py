"""Leader election on a coordination.k8s.io Lease: several manager replicas, one acting.

Uses the Kubernetes client's own elector (``kubernetes.leaderelection``) in a background
thread. A replica blocks in :func:`wait_until_leading` until it holds the Lease; if it later
fails to renew it within the renew deadline, another replica may already be acting, so the
process exits at once (the Deployment restarts it as a standby). On a clean shutdown the Lease
is handed back, so a standby takes over without waiting for it to expire.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from addon_manager.shell import metrics

log = logging.getLogger(__name__)

LEASE_NAME = "model-serving-addon-manager"
"""Name of the Lease the manager replicas compete for."""
EXIT_LOST_LEASE = 3
"""Exit code of a replica that could not renew its Lease."""


@dataclass(frozen=True)
class ElectionSettings:
    """Where the Lease lives, who this replica is, and the election's timings (seconds)."""

    namespace: str
    identity: str
    lease_duration: int = 15
    renew_deadline: int = 10
    retry_period: int = 2


class _StoppableLease(LeaseLock):
    """A LeaseLock that refuses to renew once the manager is shutting down."""

    def __init__(self, api: client.ApiClient, namespace: str, identity: str) -> None:
        super().__init__(LEASE_NAME, namespace, identity)  # type: ignore[no-untyped-call]
        self.api_instance = client.CoordinationV1Api(api)
        self.stopped = threading.Event()

    def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        if self.stopped.is_set():
            return False
        return bool(super().update(name, namespace, updated_record))  # type: ignore[no-untyped-call]


class Elector:
    """One replica's part in the election."""

    def __init__(self, api: client.ApiClient, settings: ElectionSettings) -> None:
        self.settings = settings
        self.leading = threading.Event()
        self._lock = _StoppableLease(api, settings.namespace, settings.identity)
        self._coordination = client.CoordinationV1Api(api)
        self._config = electionconfig.Config(  # type: ignore[no-untyped-call]
            self._lock,
            lease_duration=settings.lease_duration,
            renew_deadline=settings.renew_deadline,
            retry_period=settings.retry_period,
            onstarted_leading=self._started,
            onstopped_leading=self._lost,
        )

    def _started(self) -> None:
        log.info("%s holds Lease %s/%s: acting as the manager",
                 self.settings.identity, self.settings.namespace, LEASE_NAME)
        metrics.LEADER.set(1)
        self.leading.set()

    def _lost(self) -> None:
        metrics.LEADER.set(0)
        if self._lock.stopped.is_set():
            return
        log.critical("%s could not renew Lease %s/%s within %ss: exiting so that only one "
                     "manager acts", self.settings.identity, self.settings.namespace,
                     LEASE_NAME, self.settings.renew_deadline)
        logging.shutdown()
        os._exit(EXIT_LOST_LEASE)

    def start(self) -> None:
        """Start competing for the Lease in a background thread."""
        metrics.LEADER.set(0)
        election = leaderelection.LeaderElection(self._config)  # type: ignore[no-untyped-call]
        threading.Thread(target=election.run, name="leader-election", daemon=True).start()
        log.info("%s waiting for Lease %s/%s", self.settings.identity,
                 self.settings.namespace, LEASE_NAME)

    def wait_until_leading(self, timeout: float | None = None) -> bool:
        """Block until this replica holds the Lease (or ``timeout`` passes)."""
        return self.leading.wait(timeout)

    def release(self) -> None:
        """Stop renewing and hand the Lease back if this replica holds it."""
        self._lock.stopped.set()
        if not self.leading.is_set():
            return
        metrics.LEADER.set(0)
        with contextlib.suppress(ApiException):
            lease = self._coordination.read_namespaced_lease(LEASE_NAME, self.settings.namespace)
            if lease.spec is not None and lease.spec.holder_identity == self.settings.identity:
                lease.spec.holder_identity = None
                lease.spec.lease_duration_seconds = 1
                self._coordination.replace_namespaced_lease(
                    LEASE_NAME, self.settings.namespace, lease
                )
                log.info("released Lease %s/%s", self.settings.namespace, LEASE_NAME)


def default_identity() -> str:
    """The replica's name in the election: the pod name, else the host name and PID."""
    pod = os.environ.get("POD_NAME")
    if pod:
        return pod
    return f"{os.uname().nodename}-{os.getpid()}"
