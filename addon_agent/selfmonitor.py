"""The agent's own scrape target: a ServiceMonitor for the Service the add-on deploys with it.

The AddOnTemplate deploys the Service ``model-serving-agent-metrics`` (port ``metrics``) beside
the agent's Deployment; prometheus-operator (or OpenShift's user-workload monitoring, which
ACM's metrics collector federates from) finds it through this ServiceMonitor. The agent
applies it at start when the cluster serves the ServiceMonitor kind; without that CRD there is
nothing to apply and nothing fails.
"""

from __future__ import annotations

import logging
from typing import Any

from addon_api import constants as c

log = logging.getLogger(__name__)

SERVICE = "model-serving-agent-metrics"
"""The agent's metrics Service (the chart's AddOnTemplate)."""
SELECTOR = {"app.kubernetes.io/name": "model-serving-agent"}
"""The labels of the agent's pods and of its metrics Service."""
MONITOR_API = "monitoring.coreos.com/v1"


def service_monitor(namespace: str) -> dict[str, Any]:
    """The ServiceMonitor that scrapes the agent's ``/metrics`` in ``namespace``."""
    return {
        "apiVersion": MONITOR_API,
        "kind": "ServiceMonitor",
        "metadata": {
            "name": "model-serving-agent",
            "namespace": namespace,
            "labels": {c.LABEL_MANAGED_BY: c.FIELD_MANAGER},
        },
        "spec": {
            "selector": {"matchLabels": dict(SELECTOR)},
            "endpoints": [{"port": "metrics", "path": "/metrics"}],
        },
    }


def ensure(kube: Any, namespace: str) -> bool:
    """Apply the agent's ServiceMonitor if the kind is served; True when applied.

    A failure is logged, not raised: the agent serves models without being scraped.
    """
    if not kube.served(MONITOR_API, "ServiceMonitor"):
        return False
    try:
        kube.apply(service_monitor(namespace))
    except Exception as err:  # monitoring must not stop the agent
        log.warning("could not apply the agent's ServiceMonitor in %s: %s", namespace, err)
        return False
    return True
