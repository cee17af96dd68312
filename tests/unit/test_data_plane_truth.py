"""The hub tells the truth about a model's data plane (issue 30, item 4).

The agent's verdict on a predictor's Deployment and pods (:mod:`addon_agent.pure.dataplane`),
and the hub's judgement of a model work's feedback
(:func:`addon_manager.kinds.inference_service.report`): a Ready KServe has not re-earned
for the current spec never counts, a refused spec names KServe's error, and a failed
download, a crash-looping server and missing replicas are named.
"""

from __future__ import annotations

import json
from typing import Any

from addon_agent.pure import dataplane, kserve_plan
from addon_agent.pure.kserve_plan import configure_kserve
from addon_api import constants as c
from addon_api.reasons import ClusterReason as CR
from addon_api.spoke import ServingPlatformSpec
from addon_cli import explain
from addon_manager.facts.records import WorkFact
from addon_manager.kinds.inference_service import data_plane
from addon_manager.kinds.inference_service import report as inference_service_report
from addon_manager.kinds.render import owner_labels

Obj = dict[str, Any]
HASH = "0123456789abcdef"


def isvc(*, spec_hash: str = HASH, generation: int = 2, mode: str = "Standard",
         changed: str = "2026-12-02T10:00:00Z") -> Obj:
    return {"metadata": {
        "name": "iris", "namespace": "models", "generation": generation,
        "labels": owner_labels(c.KIND_INFERENCE_SERVICE, "team-a", "iris"),
        "annotations": {c.ANNOTATION_SPEC_HASH: spec_hash, c.DEPLOYMENT_MODE_ANNOTATION: mode},
        "managedFields": [
            {"manager": "work-agent", "operation": "Apply", "time": changed,
             "fieldsV1": {"f:metadata": {}, "f:spec": {}}},
            {"manager": "kserve", "operation": "Update", "subresource": "status",
             "time": "2026-12-02T11:00:00Z", "fieldsV1": {"f:status": {}}},
            {"manager": "agent", "operation": "Update", "time": "2026-12-02T12:00:00Z",
             "fieldsV1": {"f:metadata": {"f:annotations": {}}}},
        ]}}


def deployment(*, spec_hash: str = HASH, replicas: int = 1, generation: int = 3,
               observed: int = 3, verdict: str | None = None) -> Obj:
    annotations = {c.ANNOTATION_SPEC_HASH: spec_hash}
    if verdict is not None:
        annotations[c.ANNOTATION_DATAPLANE] = verdict
    return {"metadata": {"name": "iris-predictor", "namespace": "models",
                         "generation": generation, "annotations": annotations,
                         "labels": {kserve_plan.ISVC_LABEL: "iris"}},
            "spec": {"replicas": replicas},
            "status": {"observedGeneration": observed, "updatedReplicas": replicas}}


def pod(*, ready: bool = True, init: Obj | None = None, server: Obj | None = None,
        deleting: bool = False, spec_hash: str | None = None) -> Obj:
    meta: Obj = {"name": "iris-predictor-x", "namespace": "models",
                 "labels": {kserve_plan.ISVC_LABEL: "iris", "component": "predictor"}}
    if spec_hash is not None:
        meta["annotations"] = {c.ANNOTATION_SPEC_HASH: spec_hash}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T12:00:00Z"
    status: Obj = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if init is not None:
        status["initContainerStatuses"] = [{"name": "storage-initializer", **init}]
    if server is not None:
        status["containerStatuses"] = [{"name": "kserve-container", **server}]
    return {"metadata": meta, "status": status}


DENIED = {"state": {"terminated": {"exitCode": 1, "reason": "Error",
                                   "message": "403 Forbidden: HeadBucket"}},
          "restartCount": 0}
LOOPING = {"restartCount": 4,
           "state": {"waiting": {"reason": "CrashLoopBackOff"}},
           "lastState": {"terminated": {"exitCode": 137, "reason": "Error",
                                        "message": "killed\x1b[31m"}}}


def test_the_agent_names_a_refused_download_with_the_initializers_own_words() -> None:
    found = dataplane.verdict(isvc(), deployment(), [pod(ready=False, init=DENIED)], [])
    assert found.reason == CR.STORAGE_DOWNLOAD_FAILED and found.built is True
    assert found.message == "the model download failed (exit code 1: 403 Forbidden: HeadBucket)"
    assert (found.ready, found.replicas) == (0, 1)


def test_the_agent_names_a_crash_looping_server_with_restarts_and_a_clean_message() -> None:
    found = dataplane.verdict(isvc(), deployment(), [pod(ready=False, server=LOOPING)], [])
    assert found.reason == CR.CRASH_LOOPING and found.restarts == 4
    assert found.message == "the model server restarted 4 times; last exit code 137: killed[31m"
    body = json.loads(found.annotation())
    assert body == {"built": True, "generation": 2, "message": found.message, "ready": 0,
                    "reason": "CrashLooping", "replicas": 1, "restarts": 4}


def test_a_pod_being_deleted_and_a_server_still_starting_are_no_failures() -> None:
    starting = {"restartCount": 0, "state": {"running": {}}}
    found = dataplane.verdict(isvc(), deployment(replicas=2),
                              [pod(server=starting),
                               pod(ready=False, init=DENIED, deleting=True)], [])
    assert found.reason == CR.REPLICAS_NOT_READY and found.message == "1 of 2 replicas ready"
    assert dataplane.verdict(isvc(), deployment(), [pod(server=starting)], []).reason == ""


def test_kserve_not_having_built_the_spec_is_told_apart_from_kserve_refusing_it() -> None:
    old = deployment(spec_hash="ffffffffffffffff")
    assert dataplane.built(isvc(), old) is False
    assert dataplane.built(isvc(), None) is None
    assert dataplane.built(isvc(spec_hash=""), old) is None
    waiting = dataplane.verdict(isvc(), old, [pod()], [])
    assert waiting.reason == CR.SPEC_NOT_BUILT and waiting.built is False
    events = [
        {"type": "Warning", "reason": "InternalError", "lastTimestamp": "2026-12-02T09:00:00Z",
         "message": "about the spec before"},
        {"type": "Normal", "reason": "InternalError", "lastTimestamp": "2026-12-02T10:05:00Z",
         "message": "not a warning"},
        {"type": "Warning", "reason": "InternalError", "lastTimestamp": "2026-12-02T10:01:00Z",
         "message": "StorageURI not supported: ftp://x"},
    ]
    refused = dataplane.verdict(isvc(), old, [pod()], events)
    assert (refused.reason, refused.message) == (CR.SPEC_REJECTED,
                                                  "StorageURI not supported: ftp://x")
    # the spec changed again after the error: the error is about an older spec
    assert dataplane.verdict(isvc(changed="2026-12-02T10:02:00Z"), old, [pod()],
                             events).reason == CR.SPEC_NOT_BUILT


def test_the_agent_groups_only_its_own_standard_models_and_writes_only_changes() -> None:
    foreign = isvc()
    foreign["metadata"]["labels"] = {}
    mesh = isvc(mode="ModelMesh")
    other = deployment()
    other["metadata"]["name"] = "iris-transformer"
    grouped = dataplane.group([isvc(), foreign, mesh], [other, deployment()],
                              [pod(), {**pod(), "metadata": {**pod()["metadata"], "labels": {
                                  kserve_plan.ISVC_LABEL: "iris", "component": "transformer"}}}])
    assert len(grouped) == 1
    mine, dep, pods = grouped[0]
    assert dep is not None and dep["metadata"]["name"] == "iris-predictor" and len(pods) == 1
    found = dataplane.verdict(mine, dep, pods, [])
    patch = dataplane.annotation_patch(dep, found)
    assert patch == {"metadata": {"annotations": {c.ANNOTATION_DATAPLANE: found.annotation()}}}
    assert dataplane.annotation_patch(deployment(verdict=found.annotation()), found) is None


def test_a_rollout_of_the_same_spec_is_built_and_kserve_is_told_to_keep_it_off_pods() -> None:
    """A controller upgrade rebuilds the same spec (a new server image): the Deployment rolls
    while the model serves; that is no spec KServe has not built (found by the stack
    upgrade tests, which keep the model Ready throughout)."""
    moving = deployment(replicas=2, observed=2)
    moving["status"]["updatedReplicas"] = 1
    found = dataplane.verdict(isvc(), moving, [pod(), pod()], [])
    assert (found.built, found.reason) == (True, "")
    found = dataplane.verdict(isvc(), moving, [pod(), pod(ready=False, server=LOOPING)], [])
    assert found.reason == CR.CRASH_LOOPING
    config = {"data": {"inferenceService": json.dumps({"resource": {"cpuRequest": "1"}})}}
    assert not dataplane.kserve_keeps_it_off_pods([config])
    configure_kserve(config, ServingPlatformSpec.from_wire({"platform": "KServe"}))
    options = json.loads(config["data"]["inferenceService"])
    assert options["resource"] == {"cpuRequest": "1"}
    assert options["serviceAnnotationDisallowedList"] == [c.ANNOTATION_DATAPLANE]
    configure_kserve(config, ServingPlatformSpec.from_wire({"platform": "KServe"}))
    assert json.loads(config["data"]["inferenceService"])[
        "serviceAnnotationDisallowedList"] == [c.ANNOTATION_DATAPLANE]
    assert dataplane.kserve_keeps_it_off_pods([{"data": {"inferenceService": "nope"}}, config])


def test_while_the_deployment_rolls_to_a_new_spec_only_its_own_pods_count() -> None:
    """Found by the metric-gate rollout on the served fleet: KServe built the new spec, its
    pod was still loading the model, the previous spec's pod answered, and the cluster counted
    Ready, so minSuccessTime ran out on the previous model's answers and the failing
    revision went on to the next cluster."""
    old, new = pod(spec_hash="ffffffffffffffff"), pod(spec_hash=HASH)
    found = dataplane.verdict(isvc(), deployment(), [old, pod(ready=False, spec_hash=HASH)], [])
    assert (found.built, found.reason, found.ready) == (True, CR.REPLICAS_NOT_READY, 0)
    assert found.message == "0 of 1 replicas ready; 1 of the previous spec still answering"
    entry, cat = inference_service_report(work(json.loads(found.annotation())), False)
    assert (cat, entry.ready, entry.phase, entry.reason) == (
        "progressing", False, "Progressing", CR.REPLICAS_NOT_READY)
    assert entry.message == found.message
    # the new spec's pod is ready: the cluster serves it, the old pod going or not
    assert dataplane.verdict(isvc(), deployment(), [old, new], []).reason == ""
    # pods without the hash (a KServe that does not copy it) are not told apart
    assert dataplane.verdict(isvc(), deployment(), [pod()], []).reason == ""
    assert dataplane.current_spec(old, "") and not dataplane.current_spec(old, HASH)


def test_kserve_ready_with_no_replica_ready_is_not_serving() -> None:
    """KServe's Ready lags the pods: no replica ready is never a Ready cluster on the hub
    (found on the demo fleet: Ready beside '0 of 1 replicas ready')."""
    none = {**BUILT, "ready": 0, "reason": "ReplicasNotReady", "message": "0 of 1 replicas ready"}
    entry, cat = inference_service_report(work(none), False)
    assert (cat, entry.ready, entry.phase, entry.message) == (
        "progressing", False, "Progressing", "0 of 1 replicas ready")


def work(plane: Obj | None = None, **feedback: Any) -> WorkFact:
    base: dict[str, Any] = {"deploymentMode": "Standard", "generation": 2, "ready": "True",
                            "url": "http://iris.models"}
    if plane is not None:
        base["dataplane"] = json.dumps({"generation": 2, **plane})
    base.update(feedback)
    return WorkFact(name="w", cluster="c1", kind=c.KIND_INFERENCE_SERVICE,
                    intent_namespace="team-a", intent_name="iris", render_hash="h",
                    applied="True", available="True",
                    feedback=tuple(sorted((k, v) for k, v in base.items() if v is not None)))


BUILT = {"built": True, "ready": 1, "replicas": 1}


def test_a_ready_kserve_has_not_reearned_for_the_current_spec_never_counts() -> None:
    """Tried as a user would: an ftp:// storage URI, refused by KServe's controller, left
    Ready True from the old spec, and the hub counted it Ready for the new one."""
    entry, cat = inference_service_report(work({**BUILT, "built": False,
                                                "reason": "SpecNotBuilt"}), False)
    assert (cat, entry.ready, entry.phase, entry.reason) == (
        "progressing", False, "Progressing", CR.SPEC_NOT_BUILT)
    assert entry.message == ("KServe has not built the predictor from the current spec yet "
                             "(the previous spec still serves)")
    entry, cat = inference_service_report(work({
        **BUILT, "built": False, "reason": "SpecRejected",
        "message": "StorageURI not supported: ftp"}), False)
    assert (cat, entry.ready, entry.reason) == ("failed", False, CR.SPEC_REJECTED)
    assert entry.message.startswith("KServe refused the current spec: StorageURI not supported")
    # a verdict about the generation before: the agent has not looked at this spec yet
    entry, cat = inference_service_report(work(BUILT, generation=3), False)
    assert (cat, entry.reason) == ("progressing", CR.SPEC_NOT_BUILT)
    assert "has not judged generation 3 yet" in entry.message
    assert inference_service_report(work(BUILT), False)[1] == "ready"


def test_pod_failures_are_named_and_a_model_serving_on_fewer_replicas_says_so() -> None:
    denied = {**BUILT, "ready": 0, "reason": "StorageDownloadFailed",
              "message": "the model download failed (403)"}
    entry, cat = inference_service_report(work(denied, ready="False"), False)
    assert (cat, entry.phase, entry.reason) == ("failed", "Failed", CR.STORAGE_DOWNLOAD_FAILED)
    assert entry.message == "the model download failed (403) (0 of 1 replicas ready)"
    looping = {**BUILT, "replicas": 2, "reason": "CrashLooping", "message": "restarted 3 times"}
    entry, cat = inference_service_report(work(looping), False)
    assert (cat, entry.ready, entry.reason) == ("ready", True, CR.CRASH_LOOPING)
    assert entry.message == "restarted 3 times (1 of 2 replicas ready)"
    short = {**BUILT, "replicas": 2, "reason": "ReplicasNotReady",
             "message": "1 of 2 replicas ready"}
    entry, cat = inference_service_report(work(short), False)
    assert (cat, entry.reason, entry.message) == ("ready", CR.REPLICAS_NOT_READY,
                                                  "1 of 2 replicas ready")


def test_without_a_verdict_or_for_modelmesh_kserve_alone_judges() -> None:
    assert data_plane(work()) is None
    assert data_plane(work({**BUILT, "built": False}, deploymentMode="ModelMesh")) is None
    assert data_plane(work({"ready": 1})) is None  # not judged: no "built"
    assert inference_service_report(work(), False)[1] == "ready"
    # a hostile verdict is bounded and inert, never breaks the fold
    hostile = work({"built": True, "reason": "CrashLooping" + "x" * 500,
                    "message": "\x07" + "m" * 5000}, ready="False")
    entry, _ = inference_service_report(hostile, False)
    assert len(entry.message) <= 1024 and "\x07" not in entry.message
    assert inference_service_report(work(dataplane="{not json"), False)[1] == "ready"
    assert inference_service_report(work(dataplane="[1]"), False)[1] == "ready"


def test_explain_gives_the_next_step_for_each_data_plane_reason() -> None:
    for reason in (CR.STORAGE_DOWNLOAD_FAILED, CR.CRASH_LOOPING, CR.SPEC_REJECTED,
                   CR.SPEC_NOT_BUILT):
        step = explain.next_step({"cluster": "c1", "ready": False, "reason": reason,
                                  "phase": "Failed"})
        assert step is not None and step.summary, reason
    step = explain.next_step({"cluster": "c1", "ready": False,
                              "reason": CR.STORAGE_DOWNLOAD_FAILED})
    assert step is not None and "StorageConnection's Secret" in step.summary
    # serving, but on fewer replicas: still a step; serving and fine: none
    short = explain.next_step({"cluster": "c1", "ready": True, "reason": CR.REPLICAS_NOT_READY})
    assert short is not None and "predictor pods" in short.summary
    assert explain.next_step({"cluster": "c1", "ready": True, "reason": "Ready"}) is None
    assert explain.next_step({}) is None


def test_a_changed_generation_is_judged_again_at_once() -> None:
    fresh = isvc()
    assert dataplane.unjudged(fresh)  # no verdict yet
    found = dataplane.verdict(fresh, deployment(), [pod()], [])
    fresh["metadata"]["annotations"][c.ANNOTATION_DATAPLANE] = found.annotation()
    assert not dataplane.unjudged(fresh)
    fresh["metadata"]["generation"] = 3
    assert dataplane.unjudged(fresh)
    assert not dataplane.unjudged(isvc(mode="ModelMesh"))
    assert not dataplane.unjudged(isvc(spec_hash=""))


def _timed(obj: Obj, **conditions: tuple[str, str]) -> Obj:
    obj["status"]["conditions"] = [{"type": kind, "status": status, "lastTransitionTime": at}
                                   for kind, (status, at) in conditions.items()]
    return obj


def test_a_server_that_never_got_ready_is_a_model_that_did_not_load() -> None:
    """Restarted, and the pod not Ready once since its initializer finished (the kubelet keeps
    a condition's transition time until its status changes): the model did not load, in
    back-off or started once more. A server that was Ready before it crashed is CrashLooping."""
    start, downloaded, served = ("2026-12-04T10:00:00Z", "2026-12-04T10:00:05Z",
                                 "2026-12-04T10:01:00Z")
    loading = {**LOOPING, "lastState": {"terminated": {
        "exitCode": 1, "reason": "Error", "message": "FileNotFoundError: model.joblib"}}}
    never = _timed(pod(ready=False, server=loading), Initialized=("True", downloaded),
                   Ready=("False", start))
    found = dataplane.verdict(isvc(), deployment(), [never], [])
    assert found.reason == CR.MODEL_NOT_LOADED and found.restarts == 4
    assert found.message == ("the model server exited before it was ever ready: the model did "
                             "not load (restarted 4 times; last exit code 1: "
                             "FileNotFoundError: model.joblib)")
    # started once more after the back-off, not ready yet: still the load failing
    again = {**loading, "state": {"running": {}}, "ready": False}
    retried = _timed(pod(ready=False, server=again), Initialized=("True", downloaded),
                     Ready=("False", start))
    assert dataplane.verdict(isvc(), deployment(), [retried], []).reason == CR.MODEL_NOT_LOADED
    # Ready once (its Ready turned False after the initializer finished): crash-looping
    crashed = _timed(pod(ready=False, server=loading), Initialized=("True", downloaded),
                     Ready=("False", served))
    assert dataplane.verdict(isvc(), deployment(), [crashed], []).reason == CR.CRASH_LOOPING
    # no transition times: nothing claimed beyond what the pod says
    assert dataplane.verdict(isvc(), deployment(), [pod(ready=False, server=loading)],
                             []).reason == CR.CRASH_LOOPING
    # the hub judges it a failure of the model, with the next step
    entry, cat = inference_service_report(work({**BUILT, "reason": found.reason,
                                                "message": found.message, "ready": 0},
                                               ready="False"),
                                          False)
    assert (cat, entry.ready, entry.reason) == ("failed", False, CR.MODEL_NOT_LOADED)
    step = explain.next_step({"cluster": "c1", "ready": False, "reason": CR.MODEL_NOT_LOADED,
                              "phase": "Failed"})
    assert step is not None and "model file" in step.summary


def test_a_progressive_rollout_never_counts_a_spec_kserve_has_not_built() -> None:
    """The rollout's Ready gate reads the same judgement: a revision KServe refused (or has
    not built yet) is no Ready step, whatever KServe's Ready says; refused, it is the step's
    failure with KServe's words (issue 30: the ftp:// revision completed on every cluster)."""
    import dataclasses
    from datetime import UTC, datetime

    from addon_manager.engine.progressive import cluster_state

    now = datetime(2026, 12, 4, tzinfo=UTC)

    def state(plane: Obj) -> Any:
        fact = dataclasses.replace(work(plane, revision="2"), revision=2)
        return cluster_state(c.KIND_INFERENCE_SERVICE, "c1", fact, None, ("", 0), now, 600)

    served = state(BUILT)
    assert (served.revision, served.ready, served.failure) == (2, True, "")
    waiting = state({**BUILT, "built": False, "reason": "SpecNotBuilt"})
    assert (waiting.ready, waiting.failure) == (False, "")
    refused = state({**BUILT, "built": False, "reason": "SpecRejected",
                     "message": "StorageURI not supported: ftp"})
    assert not refused.ready
    assert refused.failure.startswith("SpecRejected: KServe refused the current spec: "
                                      "StorageURI not supported"), refused.failure


def test_a_write_conflict_in_kserves_reconcile_is_not_its_refusal_of_the_spec() -> None:
    """KServe records an ``InternalError`` for every failed reconcile, a status write from a
    stale copy too (seen in CI after its refusal of the spec): the refusal is still the one
    named; a conflict alone is no refusal."""

    def event(message: str, at: str) -> dict[str, Any]:
        return {"type": "Warning", "reason": dataplane.REJECTION_EVENT, "message": message,
                "lastTimestamp": at}

    refused = event('no runtime found to support predictor with model type: '
                    '{no-such-format <nil>}', "2026-12-07T10:00:01Z")
    conflict = event('fails to update InferenceService status: Operation cannot be fulfilled '
                     'on inferenceservices.serving.kserve.io "canary": the object has been '
                     'modified; please apply your changes to the latest version and try again',
                     "2026-12-07T10:00:02Z")
    since = "2026-12-07T10:00:00Z"
    assert "no-such-format" in dataplane.rejection([refused, conflict], since)
    assert dataplane.rejection([conflict], since) == ""
