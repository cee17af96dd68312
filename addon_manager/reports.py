"""What a cluster's work status says, per kind: the cluster's entry and its category.

Each function reads the feedback of one applied work (see the feedback rules in
:mod:`addon_manager.render`) and returns the per-cluster entry of the intent's status with
its category. The registry (:mod:`addon_manager.kinds`) names the one each kind uses.
"""

from __future__ import annotations

from typing import Literal

from addon_api.common import ClusterStatus
from addon_manager.facts import WorkFact

Category = Literal["ready", "progressing", "failed", "stale"]
FAILED_ISVC_TRANSITIONS = ("BlockedByFailedLoad", "InvalidSpec")
"""ModelMesh transition states of an InferenceService that mean it failed."""


def _s(value: object) -> str:
    return "" if value is None else str(value)


def platform_report(work: WorkFact, removed: bool) -> tuple[ClusterStatus, Category]:
    """A ServingPlatform's phase: Available is done (Removed when the stack is to be removed)."""
    phase = _s(work.value("phase")) or "Applied"
    msg = _s(work.value("message"))
    if phase in ("Degraded", "RemovalBlocked"):
        return ClusterStatus(cluster=work.cluster, phase=phase, reason=phase, message=msg), "failed"
    ok = phase == ("Removed" if removed else "Available")
    return ClusterStatus(
        cluster=work.cluster, phase=phase, ready=ok, reason=phase, message=msg
    ), ("ready" if ok else "progressing")


def storage_report(work: WorkFact, removed: bool) -> tuple[ClusterStatus, Category]:
    """A SealedStorageConnection's phase; the agent's own reason when it is not delivered."""
    del removed
    phase = _s(work.value("phase")) or "Applied"
    msg = _s(work.value("message"))
    cat: Category = (
        "ready" if phase == "Delivered" else "failed" if phase == "Failed" else "progressing"
    )
    # The agent's own reason (DecryptFailed, KeyMismatch, NamespaceMissing, ...) when not
    # delivered; the phase otherwise.
    reason = _s(work.value("reason")) if cat != "ready" else ""
    return ClusterStatus(
        cluster=work.cluster, phase=phase, ready=cat == "ready", reason=reason or phase,
        message=msg,
    ), cat


def runtime_report(work: WorkFact, removed: bool) -> tuple[ClusterStatus, Category]:
    """A ServingRuntime is ready once the work agent reports it Available."""
    del removed
    ok = work.available == "True"
    return ClusterStatus(
        cluster=work.cluster, phase="Available" if ok else "Applied", ready=ok,
        reason="Available" if ok else work.reason,
    ), "ready" if ok else "progressing"


def inference_service_report(work: WorkFact, removed: bool) -> tuple[ClusterStatus, Category]:
    """An InferenceService's readiness, URL and model state; its failure reason when failed."""
    del removed
    cl = work.cluster
    url = _s(work.value("url")) or _s(work.value("addressUrl"))
    state = _s(work.value("activeModelState"))
    failure = _s(work.value("failureReason"))
    transition = _s(work.value("transitionStatus"))
    if work.value("ready") == "True":
        return ClusterStatus(
            cluster=cl, phase="Ready", ready=True, reason="Ready", url=url, model_state=state
        ), "ready"
    if failure or transition in FAILED_ISVC_TRANSITIONS:
        return ClusterStatus(
            cluster=cl, phase="Failed", reason=failure or transition,
            message=_s(work.value("failureMessage")) or _s(work.value("readyMessage")),
            url=url, model_state=state,
        ), "failed"
    return ClusterStatus(
        cluster=cl, phase="Progressing", reason=_s(work.value("readyReason")) or "Applied",
        message=_s(work.value("readyMessage")), url=url, model_state=state,
    ), "progressing"
