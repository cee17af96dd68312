"""Prometheus metrics of the agent (served on /metrics).

A model's namespace is the label ``model_namespace``, never ``namespace``: a scrape through
prometheus-operator (``honorLabels: false``) sets ``namespace`` to the agent's own.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from addon_api.reasons import ClusterReason

AGENT_UP = Gauge(
    "model_serving_agent_up",
    "1 while the add-on's agent runs (federated: which clusters' agents report at all).",
)
PLATFORM_READY = Gauge(
    "model_serving_platform_ready",
    "1 when the serving platform is Available, labelled with the stack version it runs.",
    ["platform", "version"],
)
COMPONENT_READY = Gauge(
    "model_serving_component_ready", "1 when a stack Deployment is Available.", ["component"]
)
INFERENCE_SERVICES = Gauge(
    "model_serving_inferenceservices",
    "InferenceServices on this cluster by Ready state.",
    ["state"],
)
MODEL_READY = Gauge(
    "model_serving_model_ready",
    "1 when the InferenceService's Ready condition is True, else 0.",
    ["model_namespace", "name"],
)
MODEL_LOAD_FAILED = Gauge(
    "model_serving_model_load_failed",
    "1 while KServe reports the InferenceService's model failed to load "
    "(status.modelStatus: transitionStatus or lastFailureInfo), labelled with its reason.",
    ["model_namespace", "name", "reason"],
)
RECONCILE_SECONDS = Histogram(
    "model_serving_agent_reconcile_duration_seconds", "Duration of agent reconciles.", ["kind"]
)
RECONCILE_ERRORS = Counter(
    "model_serving_agent_reconcile_errors_total", "Agent reconciles that failed.", ["kind"]
)

STATES = ("Ready", "NotReady", "Unknown")

KINDS = ("ServingPlatform", "SealedStorageConnection")
"""What the agent reconciles (the ``kind`` label of its reconcile metrics)."""


def start() -> None:
    """Mark the agent up; give its error counters a zero series per kind.

    A rate of errors then reads 0, not "no data", on a healthy cluster.
    """
    AGENT_UP.set(1)
    for kind in KINDS:
        RECONCILE_ERRORS.labels(kind=kind)


def isvc_state(isvc: dict[str, Any]) -> str:
    """Ready, NotReady or Unknown from the InferenceService's Ready condition."""
    for cond in (isvc.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return {"True": "Ready", "False": "NotReady"}.get(str(cond.get("status")), "Unknown")
    return "Unknown"


FAILED_TRANSITIONS = (ClusterReason.BLOCKED_BY_FAILED_LOAD, ClusterReason.INVALID_SPEC)
"""KServe's ``status.modelStatus.transitionStatus`` values that mean the model will not load."""


def load_failure(isvc: dict[str, Any]) -> str | None:
    """Why KServe says the model failed to load (its reason), or None when it did not."""
    model = (isvc.get("status") or {}).get("modelStatus") or {}
    info = model.get("lastFailureInfo") or {}
    transition = str(model.get("transitionStatus") or "")
    if transition in FAILED_TRANSITIONS or (info and transition != "UpToDate"):
        return str(info.get("reason") or transition or "Unknown")
    return None


def record_inference_services(items: Iterable[dict[str, Any]]) -> None:
    """Set the InferenceService gauges from every InferenceService on the cluster.

    Counts by Ready state, and per model its readiness and load failure.
    """
    items = list(items)
    counts = Tally(isvc_state(i) for i in items)
    for state in STATES:
        INFERENCE_SERVICES.labels(state=state).set(counts.get(state, 0))
    MODEL_READY.clear()
    MODEL_LOAD_FAILED.clear()
    for isvc in items:
        meta = isvc.get("metadata") or {}
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        ready = 1 if isvc_state(isvc) == "Ready" else 0
        MODEL_READY.labels(model_namespace=ns, name=name).set(ready)
        reason = load_failure(isvc)
        if reason is not None:
            MODEL_LOAD_FAILED.labels(model_namespace=ns, name=name, reason=reason).set(1)


def record_platform(platform: str, available: bool, components: dict[str, bool],
                    version: str = "") -> None:
    """Set the readiness gauges of the asked platform ("" for none) and its components.

    ``version`` is the stack version the platform runs ("" while none is installed).

    Only that platform has a ``model_serving_platform_ready`` series: a platform the
    cluster does not run is not "not ready" (a 0 for it made the platform alert fire on
    every cluster), and a removed stack leaves no series.
    """
    PLATFORM_READY.clear()
    if platform:
        PLATFORM_READY.labels(platform=platform, version=version).set(1 if available else 0)
    COMPONENT_READY.clear()
    for name, ready in components.items():
        COMPONENT_READY.labels(component=name).set(1 if ready else 0)
