"""Prometheus metrics of the agent (served on /metrics)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

PLATFORM_READY = Gauge(
    "model_serving_platform_ready", "1 when the serving platform is Available.", ["platform"]
)
COMPONENT_READY = Gauge(
    "model_serving_component_ready", "1 when a stack Deployment is Available.", ["component"]
)
INFERENCE_SERVICES = Gauge(
    "model_serving_inferenceservices",
    "InferenceServices on this cluster by Ready state.",
    ["state"],
)
RECONCILE_SECONDS = Histogram(
    "model_serving_agent_reconcile_duration_seconds", "Duration of agent reconciles.", ["kind"]
)
RECONCILE_ERRORS = Counter(
    "model_serving_agent_reconcile_errors_total", "Agent reconciles that failed.", ["kind"]
)

STATES = ("Ready", "NotReady", "Unknown")


def isvc_state(isvc: dict[str, Any]) -> str:
    """Ready, NotReady or Unknown from the InferenceService's Ready condition."""
    for cond in (isvc.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return {"True": "Ready", "False": "NotReady"}.get(str(cond.get("status")), "Unknown")
    return "Unknown"


def record_inference_services(items: Iterable[dict[str, Any]]) -> None:
    """Set the InferenceService gauges from a list of InferenceServices."""
    counts = Tally(isvc_state(i) for i in items)
    for state in STATES:
        INFERENCE_SERVICES.labels(state=state).set(counts.get(state, 0))


def record_platform(platform: str, available: bool, components: dict[str, bool]) -> None:
    """Set platform and component readiness gauges."""
    for name in ("KServe", "ModelMesh"):
        PLATFORM_READY.labels(platform=name).set(1 if (name == platform and available) else 0)
    COMPONENT_READY.clear()
    for name, ready in components.items():
        COMPONENT_READY.labels(component=name).set(1 if ready else 0)
