"""What a model's predictor really does on this cluster: the data-plane verdict.

KServe's status of an InferenceService says Ready or not, and when it fails, one reason
(``ModelLoadFailed``) for a download that was refused, a model that would not load and a
server that keeps crashing alike. It also keeps ``Ready: True`` from the previous spec when it
cannot build the current one (an ``ftp://`` storage URI: "StorageURI not supported"), because
its reconcile returns before it writes anything. The agent reads what KServe built and what
the pods say, and writes its verdict on the InferenceService as one annotation
(:data:`addon_api.constants.ANNOTATION_DATAPLANE`), which the model's ManifestWork feeds back
to the hub.

Whether KServe built the current spec: the manager marks every InferenceService it renders with
a hash of its spec (:data:`addon_api.constants.ANNOTATION_SPEC_HASH`), and KServe copies an
InferenceService's annotations onto the predictor Deployment it builds from it. The Deployment
carrying the InferenceService's hash is KServe having acted on this spec; a Deployment with
another hash is the previous spec still serving. The pods carry the hash too (KServe copies the
annotations onto the pod template): while the Deployment rolls to a new spec, only the pods of
the current spec count as its ready replicas, never the previous spec's pods still answering
(:func:`current_spec`).

KServe would copy the verdict annotation onto the Deployment's pod template too, restarting the
pods at every change of verdict; the agent writes it only where KServe's
``serviceAnnotationDisallowedList`` names it (:func:`kserve_keeps_it_off_pods`), as the
stacks the agent installs have it (:func:`addon_agent.pure.kserve_plan.configure_kserve`).

Pure functions; the loop that lists and patches is in :mod:`addon_agent.shell.handlers`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from addon_agent.pure.kserve_plan import ISVC_LABEL, MODEL_CONTAINER
from addon_agent.pure.manifests import json_of
from addon_api import constants as c
from addon_api.base import sanitized
from addon_api.reasons import ClusterReason

Obj = dict[str, Any]

STORAGE_INITIALIZER: Final = "storage-initializer"
"""KServe's name of the init container that downloads the model."""
REJECTION_EVENT: Final = "InternalError"
"""The reason of the Warning event KServe's controller records when its reconcile fails."""
CONFLICT: Final = "the object has been modified"
"""What Kubernetes says of a write from a stale copy (409 Conflict): when KServe's reconcile
fails on one, the event says nothing of the spec, and KServe reconciles again."""
MESSAGE_LIMIT: Final = 512
"""At most this many characters of a fed-back message (what containers write is bounded)."""


@dataclass(frozen=True)
class Verdict:
    """What the predictor of one InferenceService does, as the agent saw it.

    ``built`` is None when the agent cannot tell (no Deployment: ModelMesh or Knative, or an
    InferenceService the manager did not mark); ``reason`` is empty while nothing is wrong.
    """

    generation: int
    built: bool | None
    reason: str = ""
    message: str = ""
    ready: int = 0
    replicas: int = 0
    restarts: int = 0

    def annotation(self) -> str:
        """The verdict as the annotation's value (compact JSON, keys sorted)."""
        body: Obj = {"generation": self.generation, "ready": self.ready,
                     "replicas": self.replicas}
        if self.built is not None:
            body["built"] = self.built
        if self.reason:
            body["reason"] = self.reason
        if self.message:
            body["message"] = self.message
        if self.restarts:
            body["restarts"] = self.restarts
        return json.dumps(body, sort_keys=True, separators=(",", ":"))


def _annotations(obj: Obj | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("annotations") or {})


def built(isvc: Obj, deployment: Obj | None) -> bool | None:
    """Whether KServe built the predictor Deployment from the InferenceService's current spec.

    The Deployment carries the spec's hash. Its own rollout does not count: KServe rebuilding
    the same spec (a controller upgrade changing the server's image) rolls it while the model
    serves, and KServe's Ready follows that. None when there is nothing to judge by: no
    Deployment, or no spec hash on the InferenceService (one the manager did not render).
    """
    want = _annotations(isvc).get(c.ANNOTATION_SPEC_HASH)
    if not want or deployment is None:
        return None
    return _annotations(deployment).get(c.ANNOTATION_SPEC_HASH) == want


def kserve_keeps_it_off_pods(configs: list[Obj]) -> bool:
    """Whether KServe's ``inferenceservice-config`` keeps the verdict off the predictor pods.

    ``configs`` are the ConfigMaps of that name on the cluster; the verdict annotation must be
    in the ``serviceAnnotationDisallowedList`` of its ``inferenceService`` key.
    """
    for config in configs:
        listed = json_of(config.get("data") or {}, "inferenceService").get(
            "serviceAnnotationDisallowedList")
        if isinstance(listed, list) and c.ANNOTATION_DATAPLANE in listed:
            return True
    return False


def spec_changed_at(isvc: Obj) -> str:
    """When the InferenceService's spec was last written (RFC 3339; "" when unknown).

    The newest ``managedFields`` entry that owns part of ``spec``; status writes (KServe's)
    and metadata-only writes (this agent's annotation) do not count.
    """
    times = [str(entry.get("time") or "")
             for entry in (isvc.get("metadata") or {}).get("managedFields") or []
             if entry.get("subresource") != "status"
             and "f:spec" in (entry.get("fieldsV1") or {})]
    return max(times, default="")


def _event_time(event: Obj) -> str:
    series = (event.get("series") or {}).get("lastObservedTime")
    return str(event.get("lastTimestamp") or series or event.get("eventTime") or "")


def rejection(events: list[Obj], since: str) -> str:
    """KServe's newest reconcile error about the current spec ("" when there is none).

    ``events`` are the InferenceService's; only Warning ``InternalError`` events at or after
    ``since`` (the spec's last change) are about the spec as it is, and of those not the ones
    of a write conflict (:data:`CONFLICT`).
    """
    found = [e for e in events
             if e.get("type") == "Warning" and e.get("reason") == REJECTION_EVENT
             and _event_time(e) >= since and CONFLICT not in str(e.get("message") or "")]
    if not found:
        return ""
    newest = max(found, key=_event_time)
    return sanitized(str(newest.get("message") or ""), MESSAGE_LIMIT)


def _status(pod: Obj, name: str, init: bool) -> Obj:
    key = "initContainerStatuses" if init else "containerStatuses"
    for status in (pod.get("status") or {}).get(key) or []:
        if status.get("name") == name:
            return dict(status)
    return {}


def _terminated(status: Obj) -> Obj:
    """The container's failed run: its current state, else the last one."""
    for state in (status.get("state") or {}, status.get("lastState") or {}):
        done = state.get("terminated")
        if done and int(done.get("exitCode") or 0) != 0:
            return dict(done)
    return {}


def _times(count: int) -> str:
    return f"{count} time" if count == 1 else f"{count} times"


def _exit_text(done: Obj) -> str:
    code = done.get("exitCode")
    text = str(done.get("message") or done.get("reason") or "").strip()
    return f"exit code {code}: {text}" if text else f"exit code {code}"


def _ready(pod: Obj) -> bool:
    return any(cond.get("type") == "Ready" and cond.get("status") == "True"
               for cond in (pod.get("status") or {}).get("conditions") or [])


def _transition(pod: Obj, kind: str) -> tuple[str, str] | None:
    """A pod condition's (status, lastTransitionTime), None when it has none."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("lastTransitionTime"):
            return str(cond.get("status")), str(cond["lastTransitionTime"])
    return None


def never_ready(pod: Obj) -> bool:
    """Whether the pod has not been Ready once since its init containers finished.

    A kubelet keeps a condition's ``lastTransitionTime`` until its status changes: a Ready
    condition ``False`` since no later than ``Initialized`` turned ``True`` never changed after
    the model server started. Without both times nothing is claimed (False).
    """
    ready, initialized = _transition(pod, "Ready"), _transition(pod, "Initialized")
    if ready is None or initialized is None or initialized[0] != "True" or ready[0] != "False":
        return False
    return ready[1] <= initialized[1]  # RFC 3339 in UTC, as the API writes them: sortable


def current_spec(pod: Obj, want: str | None) -> bool:
    """Whether ``pod`` runs the InferenceService's current spec (hash ``want``).

    A pod with another hash is the previous spec's, still answering while the Deployment rolls
    to the new one. A pod without a hash, or an InferenceService without one, cannot be told
    apart and counts.
    """
    have = _annotations(pod).get(c.ANNOTATION_SPEC_HASH)
    return not want or not have or have == want


def _live(pods: list[Obj]) -> list[Obj]:
    """The pods not being deleted."""
    return [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]


def pod_failure(live: list[Obj]) -> tuple[str, str, int]:
    """The worst of the live predictor pods: (reason, message, restarts); ("", "", 0): none.

    A storage initializer that failed (the download) comes first, then a model server that
    never got ready and keeps exiting (the model does not load: :func:`never_ready`), then one
    that crash-loops (restarted with back-off), with the container's own exit code and
    termination message.
    """
    for pod in live:
        init = _status(pod, STORAGE_INITIALIZER, init=True)
        done = _terminated(init)
        if done:
            restarts = int(init.get("restartCount") or 0)
            return (ClusterReason.STORAGE_DOWNLOAD_FAILED,
                    sanitized(f"the model download failed ({_exit_text(done)})", MESSAGE_LIMIT),
                    restarts)
    for pod in live:
        server = _status(pod, MODEL_CONTAINER, init=False)
        waiting = (server.get("state") or {}).get("waiting") or {}
        restarts = int(server.get("restartCount") or 0)
        done = _terminated(server)
        last = f"; last {_exit_text(done)}" if done else ""
        if restarts and done and never_ready(pod) and not server.get("ready"):
            # Exited while starting, every time: in back-off or started once more (and no
            # readier than before), the model has not loaded.
            return (ClusterReason.MODEL_NOT_LOADED,
                    sanitized("the model server exited before it was ever ready: the model "
                              f"did not load (restarted {_times(restarts)}{last})",
                              MESSAGE_LIMIT),
                    restarts)
        if waiting.get("reason") == "CrashLoopBackOff":
            return (ClusterReason.CRASH_LOOPING,
                    sanitized(f"the model server restarted {_times(restarts)}{last}",
                              MESSAGE_LIMIT),
                    restarts)
    return "", "", 0


def verdict(isvc: Obj, deployment: Obj | None, pods: list[Obj], events: list[Obj]) -> Verdict:
    """The data-plane verdict of one InferenceService from its Deployment, pods and events.

    Order: KServe has not built the current spec (with its reconcile error when it refused
    it), the download failed, the server crash-loops, fewer replicas of the current spec ready
    than asked for.
    """
    generation = int((isvc.get("metadata") or {}).get("generation") or 0)
    made = built(isvc, deployment)
    replicas = int(((deployment or {}).get("spec") or {}).get("replicas") or 0)
    live = _live(pods)
    want = _annotations(isvc).get(c.ANNOTATION_SPEC_HASH)
    ready = sum(1 for p in live if _ready(p) and current_spec(p, want))
    base = Verdict(generation=generation, built=made, ready=ready, replicas=replicas)
    if made is False:
        refused = rejection(events, spec_changed_at(isvc))
        if refused:
            return Verdict(generation, False, ClusterReason.SPEC_REJECTED, refused, ready,
                           replicas)
        return Verdict(generation, False, ClusterReason.SPEC_NOT_BUILT,
                       "KServe has not built the predictor from the current spec yet",
                       ready, replicas)
    reason, message, restarts = pod_failure(live)
    if reason:
        return Verdict(generation, made, reason, message, ready, replicas, restarts)
    if deployment is not None and ready < replicas:
        older = sum(1 for p in live if _ready(p) and not current_spec(p, want))
        message = f"{ready} of {replicas} replicas ready"
        if older:
            message += f"; {older} of the previous spec still answering"
        return Verdict(generation, made, ClusterReason.REPLICAS_NOT_READY, message, ready,
                       replicas)
    return base


def judged(isvc: Obj) -> bool:
    """Whether the agent judges the InferenceService.

    Those a hub intent of the add-on put here, but ModelMesh's (no Deployment of their own).
    """
    labels = (isvc.get("metadata") or {}).get("labels") or {}
    return (labels.get(c.LABEL_INTENT_KIND) == c.KIND_INFERENCE_SERVICE
            and _annotations(isvc).get(c.DEPLOYMENT_MODE_ANNOTATION) != "ModelMesh")


def unjudged(isvc: Obj) -> bool:
    """Whether a judged InferenceService's verdict is missing or about another generation."""
    if not judged(isvc) or not _annotations(isvc).get(c.ANNOTATION_SPEC_HASH):
        return False
    try:
        found = json.loads(_annotations(isvc).get(c.ANNOTATION_DATAPLANE) or "{}")
    except ValueError:
        return True
    generation = int((isvc.get("metadata") or {}).get("generation") or 0)
    return not isinstance(found, dict) or found.get("generation") != generation


def annotation_patch(target: Obj, found: Verdict) -> Obj | None:
    """The merge patch that records ``found`` on ``target`` (None: it is there already)."""
    value = found.annotation()
    if _annotations(target).get(c.ANNOTATION_DATAPLANE) == value:
        return None
    return {"metadata": {"annotations": {c.ANNOTATION_DATAPLANE: value}}}


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str((meta.get("labels") or {}).get(ISVC_LABEL, ""))


def group(isvcs: list[Obj], deployments: list[Obj], pods: list[Obj]
          ) -> list[tuple[Obj, Obj | None, list[Obj]]]:
    """Each :func:`judged` InferenceService with its predictor Deployment and pods.

    ``deployments`` and ``pods`` are those labelled with an InferenceService's name
    (KServe's label), from any namespace.
    """
    by_deployment: dict[tuple[str, str], Obj] = {}
    for dep in deployments:
        name = str((dep.get("metadata") or {}).get("name") or "")
        ns, owner = _key(dep)
        if name == owner + c.PREDICTOR_SUFFIX:
            by_deployment[(ns, owner)] = dep
    by_pods: dict[tuple[str, str], list[Obj]] = {}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get("component", "predictor") == "predictor":
            by_pods.setdefault(_key(pod), []).append(pod)
    out: list[tuple[Obj, Obj | None, list[Obj]]] = []
    for isvc in (i for i in isvcs if judged(i)):
        meta = isvc.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        out.append((isvc, by_deployment.get(key), by_pods.get(key, [])))
    return out
