"""What a cluster's work status says, per kind: the cluster's entry and its category.

Each function reads the feedback of one applied work (see the feedback rules in
:mod:`addon_manager.kinds.render`) and returns the per-cluster entry of the intent's status with
its category. The registry (:mod:`addon_manager.kinds.registry`) names the one each kind uses. The
agent's phases (ServingPlatform, SealedStorageConnection) are read as the spoke enums of
:mod:`addon_api.reasons`; a phase the enum does not know is passed through as it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, TypeVar

from addon_api.base import sanitized
from addon_api.common import ClusterStatus
from addon_api.reasons import ClusterPhase, ClusterReason, SealedPhase, ServingPlatformPhase
from addon_manager.facts.records import FeedbackValue, WorkFact

Category = Literal["ready", "progressing", "failed", "stale"]
FAILED_ISVC_TRANSITIONS = (ClusterReason.BLOCKED_BY_FAILED_LOAD, ClusterReason.INVALID_SPEC)
MOVING_ISVC_TRANSITIONS = ("UpToDate", "InProgress")
"""KServe's transitionStatus values that say the current spec is loaded or loading: a
lastFailureInfo beside them is about an earlier spec."""
"""ModelMesh transition states of an InferenceService that mean it failed."""

E = TypeVar("E", bound=StrEnum)


def _s(value: object) -> str:
    return "" if value is None else str(value)


def spoke_phase(enum: type[E], value: FeedbackValue | None) -> E | None:
    """The member of ``enum`` a fed-back phase is (None: no phase, or one ``enum`` lacks)."""
    try:
        return enum(value) if isinstance(value, str) else None
    except ValueError:
        return None


def platform_report(work: WorkFact, removed: bool) -> tuple[ClusterStatus, Category]:
    """A ServingPlatform's phase: Available is done (Removed when the stack is to be removed).

    What the agent left for an admin to clean up (namespaces it kept) is carried in the
    entry's ``leftovers`` whatever the phase: it never makes the cluster not ready.
    """
    reported = spoke_phase(ServingPlatformPhase, work.value("phase"))
    phase = reported or _s(work.value("phase")) or ClusterPhase.APPLIED
    msg = _s(work.value("message"))
    left = _s(work.value("leftovers"))
    if reported in (ServingPlatformPhase.DEGRADED, ServingPlatformPhase.REMOVAL_BLOCKED):
        return ClusterStatus(cluster=work.cluster, phase=phase, reason=phase, message=msg,
                             leftovers=left), "failed"
    ok = reported is (ServingPlatformPhase.REMOVED if removed else ServingPlatformPhase.AVAILABLE)
    seen, wanted = work.value("observedGeneration"), work.value("generation")
    if ok and isinstance(seen, int) and isinstance(wanted, int) and seen < wanted:
        # The work agent applied a newer spec than the one the agent's status describes (a
        # version change, say): what it reports is about the spec before.
        return ClusterStatus(
            cluster=work.cluster, phase=ClusterPhase.APPLIED, reason=ClusterReason.APPLIED,
            message=f"the agent has not reported on generation {wanted} yet (its status is of "
                    f"generation {seen}: {phase})",
            version=_s(work.value("stackVersion")), leftovers=left,
        ), "progressing"
    return ClusterStatus(
        cluster=work.cluster, phase=phase, ready=ok, reason=phase, message=msg,
        version=_s(work.value("stackVersion")), target_version=_s(work.value("targetVersion")),
        leftovers=left,
    ), ("ready" if ok else "progressing")


def storage_report(work: WorkFact, removed: bool) -> tuple[ClusterStatus, Category]:
    """A SealedStorageConnection's phase; the agent's own reason when it is not delivered."""
    del removed
    reported = spoke_phase(SealedPhase, work.value("phase"))
    phase = reported or _s(work.value("phase")) or ClusterPhase.APPLIED
    msg = _s(work.value("message"))
    cat: Category = (
        "ready" if reported is SealedPhase.DELIVERED
        else "failed" if reported is SealedPhase.FAILED else "progressing"
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
        cluster=work.cluster, phase=ClusterPhase.AVAILABLE if ok else ClusterPhase.APPLIED,
        ready=ok, reason=ClusterReason.AVAILABLE if ok else work.reason,
    ), "ready" if ok else "progressing"


@dataclass(frozen=True)
class DataPlane:
    """The agent's verdict on a model's predictor, as fed back (:mod:`addon_agent.dataplane`).

    ``built``: KServe built the predictor from the InferenceService's current spec, and the
    verdict is about its current generation; ``reason``/``message``: why not, or what is
    wrong with its pods ("" when nothing is); ``ready``/``replicas``: the predictor's pods
    ready, and asked for.
    """

    built: bool
    reason: str
    message: str
    ready: int
    replicas: int


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def data_plane(work: WorkFact) -> DataPlane | None:
    """The agent's verdict from the work's feedback; None when there is none to judge by.

    None without a verdict (an agent that writes none: ModelMesh, a stack it does not
    configure) or with one the agent did not judge (no ``built``). A verdict about an older
    generation of the InferenceService than the one fed back is not built yet: the agent
    has not looked at the current spec.
    """
    raw = work.value("dataplane")
    if _s(work.value("deploymentMode")) == "ModelMesh" or not isinstance(raw, str):
        return None
    try:
        found = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(found, dict) or not isinstance(found.get("built"), bool):
        return None
    generation = _int(work.value("generation"))
    judged = _int(found.get("generation"))
    reason = sanitized(str(found.get("reason") or ""), 64)
    message = sanitized(str(found.get("message") or ""), 1024)
    built = bool(found["built"])
    if generation and judged != generation:
        built, reason = False, ClusterReason.SPEC_NOT_BUILT
        message = (f"the agent has not judged generation {generation} yet (its verdict is "
                   f"of {judged})")
    return DataPlane(built=built, reason=reason, message=message,
                     ready=_int(found.get("ready")), replicas=_int(found.get("replicas")))


POD_FAILURES = (ClusterReason.STORAGE_DOWNLOAD_FAILED, ClusterReason.CRASH_LOOPING)
"""The agent's verdicts on a predictor's pods that are failures of the model."""


def inference_service_report(work: WorkFact, removed: bool) -> tuple[ClusterStatus, Category]:
    """An InferenceService's readiness, URL and model state; its failure reason when failed.

    Judged by the agent's data-plane verdict first (:func:`data_plane`): a Ready that KServe
    has not re-earned for the current spec never counts, and a failed download or a
    crash-looping server is named as such; then by KServe's status.
    """
    del removed
    url = _s(work.value("url")) or _s(work.value("addressUrl"))
    external = external_url(work)
    state = _s(work.value("activeModelState"))

    def entry(phase: str, reason: str, message: str = "", ready: bool = False) -> ClusterStatus:
        return ClusterStatus(cluster=work.cluster, phase=phase, ready=ready, reason=reason,
                             message=message, url=url, external_url=external,
                             model_state=state)

    failure = _s(work.value("failureReason"))
    transition = _s(work.value("transitionStatus"))
    plane = data_plane(work)
    serving = work.value("ready") == "True"
    previous = " (the previous spec still serves)" if serving else ""
    if plane is not None and not plane.built:
        if plane.reason == ClusterReason.SPEC_REJECTED:
            return entry(ClusterPhase.FAILED, ClusterReason.SPEC_REJECTED,
                         f"KServe refused the current spec: {plane.message}{previous}"), "failed"
        if not (failure and transition not in MOVING_ISVC_TRANSITIONS):
            return entry(ClusterPhase.PROGRESSING, ClusterReason.SPEC_NOT_BUILT,
                         (plane.message or "KServe has not built the predictor from the "
                          "current spec yet") + previous), "progressing"
    if plane is not None and plane.reason in POD_FAILURES:
        message = f"{plane.message} ({plane.ready} of {plane.replicas} replicas ready)"
        if serving and plane.ready > 0:
            return entry(ClusterPhase.READY, plane.reason, message, ready=True), "ready"
        return entry(ClusterPhase.FAILED, plane.reason, message), "failed"
    # KServe keeps an InferenceService Ready on its previous model while it rejects a new spec
    # (InvalidSpec) or fails to load the new model (BlockedByFailedLoad): the intent as it
    # stands is not in effect there, so the cluster is Failed, and the message says the
    # previous model still serves.
    rejected = transition in FAILED_ISVC_TRANSITIONS
    if transition in MOVING_ISVC_TRANSITIONS:
        failure = ""  # KServe keeps lastFailureInfo after the model it was about is gone
    if serving and not rejected:
        if plane is not None and plane.reason == ClusterReason.REPLICAS_NOT_READY:
            return entry(ClusterPhase.READY, ClusterReason.REPLICAS_NOT_READY,
                         f"{plane.ready} of {plane.replicas} replicas ready", ready=True), "ready"
        return entry(ClusterPhase.READY, ClusterReason.READY, ready=True), "ready"
    if failure or rejected:
        message = _s(work.value("failureMessage")) or _s(work.value("readyMessage"))
        if serving:
            message = f"{message} (the previous model still serves)".strip()
        return entry(ClusterPhase.FAILED, failure or transition, message), "failed"
    return entry(ClusterPhase.PROGRESSING, _s(work.value("readyReason")) or ClusterReason.APPLIED,
                 _s(work.value("readyMessage"))), "progressing"


def external_url(work: WorkFact) -> str:
    """Where callers outside the cluster reach the model.

    Its Route's host once the router admitted it; "" without a Route, or before.
    """
    host = _s(work.value("routeHost"))
    if not host or work.value("routeAdmitted") != "True":
        return ""
    return f"{'https' if work.value('routeTermination') else 'http'}://{host}"
