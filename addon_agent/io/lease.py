"""The add-on health Lease (OCM's lease-based health check), renewed in a thread."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

from addon_agent import labels as lb
from addon_agent.io.kube import Kube
from addon_api import constants as c

log = logging.getLogger(__name__)
_stop = threading.Event()


def lease_body(namespace: str, duration: float, now: dt.datetime) -> dict[str, Any]:
    """The Lease as the agent applies it."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": c.ADDON_NAME, "namespace": namespace, "labels": lb.ours()},
        "spec": {
            "holderIdentity": c.ADDON_NAME,
            "leaseDurationSeconds": max(int(duration * 3), 1),
            "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        },
    }


def start(kube: Kube, namespace: str, interval: float) -> threading.Thread:
    """Renew the Lease every ``interval`` seconds until :func:`stop`."""

    def run() -> None:
        while not _stop.is_set():
            try:
                kube.apply(lease_body(namespace, interval, dt.datetime.now(dt.UTC)))
            except Exception as err:  # keep renewing; a failed renewal is retried
                log.warning("lease renewal failed: %s", err)
            _stop.wait(interval)

    thread = threading.Thread(target=run, name="lease", daemon=True)
    thread.start()
    return thread


def stop() -> None:
    """Stop renewing."""
    _stop.set()
