"""The agent's background loops: keys, model metrics, data-plane verdicts, the policy (shell).

Each loop is a daemon thread started once by the
handlers' startup (:mod:`addon_agent.shell.handlers`); what it computes comes from the pure layer
(:mod:`addon_agent.pure.dataplane`, :mod:`addon_agent.io.metrics`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from addon_agent.io import metrics
from addon_agent.io.kube import Kube
from addon_agent.pure import dataplane, kserve_plan
from addon_agent.pure.kserve_plan import ISVC_API
from addon_api import constants as c

log = logging.getLogger(__name__)

_loops_stop = threading.Event()


def start_identity_loop(refresh: Callable[[], None], interval: float) -> threading.Thread:
    """Call ``refresh`` (the agent's keys: rotation requests, promotion) every ``interval`` s."""

    def run() -> None:
        while not _loops_stop.wait(max(interval, 1.0)):
            try:
                refresh()
            except Exception as err:  # retried at the next interval
                log.warning("identity refresh failed: %s", err)

    thread = threading.Thread(target=run, name="identity", daemon=True)
    thread.start()
    return thread


MODEL_METRICS_SECONDS = 10.0
"""How often the InferenceService gauges are refreshed from the cluster's InferenceServices
(their one source: the platform reconcile runs only once per resync)."""


def record_data_plane(kube: Kube, isvcs: list[dict[str, Any]]) -> None:
    """Write each model's data-plane verdict on its InferenceService (when it changed).

    Only where KServe keeps the verdict off the predictor pods. Three lists (KServe's
    config, the predictors' Deployments and pods, by KServe's label), and a model's events
    only while KServe has not built its current spec (:mod:`addon_agent.pure.dataplane`).
    """
    configs = kube.list("v1", "ConfigMap",
                        field_selector=f"metadata.name={kserve_plan.KSERVE_CONFIG}")
    if not dataplane.kserve_keeps_it_off_pods(configs):
        return  # the verdict would restart the pods whenever it changes
    selector = kserve_plan.ISVC_LABEL
    deployments = kube.list("apps/v1", "Deployment", label_selector=selector)
    pods = kube.list("v1", "Pod", label_selector=selector)
    for isvc, deployment, own in dataplane.group(isvcs, deployments, pods):
        if deployment is None:
            continue
        meta = isvc.get("metadata") or {}
        ns, name = str(meta.get("namespace")), str(meta.get("name"))
        events: list[dict[str, Any]] = []
        if dataplane.built(isvc, deployment) is False:
            events = kube.list("v1", "Event", namespace=ns, field_selector=(
                f"involvedObject.kind=InferenceService,involvedObject.name={name}"))
        patch = dataplane.annotation_patch(
            isvc, dataplane.verdict(isvc, deployment, own, events))
        if patch is not None:
            kube.patch(ISVC_API, "InferenceService", name, patch, ns)


DATA_PLANE_TICK = 2.0
"""How often the InferenceServices are looked at for a spec the agent has not judged yet (a
changed generation): judged at once, so a rollout waits seconds for the verdict, not the
metrics interval."""


def start_model_metrics_loop(kube: Kube, interval: float = MODEL_METRICS_SECONDS) -> (
        threading.Thread):
    """Refresh the InferenceService gauges and data-plane verdicts every ``interval`` seconds.

    In between, every :data:`DATA_PLANE_TICK` seconds, one list of the InferenceServices
    judges again as soon as one has a generation its verdict is not about.
    """

    def run() -> None:
        last = 0.0
        while True:
            try:
                if kube.served(ISVC_API, "InferenceService"):
                    isvcs = kube.list(ISVC_API, "InferenceService")
                    due = time.monotonic() - last >= interval
                    if due:
                        metrics.record_inference_services(isvcs)
                    if due or any(dataplane.unjudged(i) for i in isvcs):
                        record_data_plane(kube, isvcs)
                    if due:
                        last = time.monotonic()
            except Exception as err:  # retried at the next interval
                log.warning("refreshing the model metrics failed: %s", err)
            if _loops_stop.wait(min(interval, DATA_PLANE_TICK)):
                return

    thread = threading.Thread(target=run, name="model-metrics", daemon=True)
    thread.start()
    return thread


POLICY_WATCH_SECONDS = 300
"""How long one watch of the namespace policy ConfigMap lasts before it is started again."""


def start_policy_watch(kube: Kube, namespace: str, on_change: Callable[[], None]
                       ) -> threading.Thread:
    """Call ``on_change`` whenever the namespace policy ConfigMap in ``namespace`` changes.

    One watch of that one object (a field selector on its name): what waited for the policy,
    or was refused by the one before, is judged again at once instead of at the next resync.
    Each (re)start of the watch reports the object as it is, so nothing is missed between two.
    """

    def run() -> None:
        seen = ""
        while not _loops_stop.is_set():
            try:
                # Through the dynamic client (plain dicts), not CoreV1Api: that module alone
                # costs the agent about 0.7 CPU-seconds to import, at every start.
                stream = kube.resource("v1", "ConfigMap").watch(
                    namespace=namespace,
                    field_selector=f"metadata.name={c.NAMESPACE_POLICY_CONFIGMAP}",
                    timeout=POLICY_WATCH_SECONDS)
                for event in stream:
                    version = "" if event["type"] == "DELETED" else str(
                        event["raw_object"]["metadata"]["resourceVersion"])
                    if version != seen:
                        seen = version
                        on_change()
            except Exception as err:  # watched again after a pause
                log.warning("watching the namespace policy failed: %s", err)
                if _loops_stop.wait(5.0):
                    return

    thread = threading.Thread(target=run, name="namespace-policy", daemon=True)
    thread.start()
    return thread
