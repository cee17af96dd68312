"""The testbed as the kubelet of the predictor pods it can run, on one spoke of a fleet.

kwok leaves these pods alone (:mod:`testbed.dataplane.kwok`); :class:`SpokeDataPlane` watches
the spoke's pods and, for each bound pod whose every image has a local runner
(:func:`~testbed.dataplane.podspec.runs_locally`), translates it (Secrets and ConfigMaps read
from the spoke) and runs it with a :class:`~testbed.dataplane.runner.PodRunner`, writing every
status the runner reports to the pod's ``status`` as a kubelet would (phase, conditions,
container statuses with exit codes, termination messages and restart counts). So the
Deployment's availability, and KServe's Ready, follow the real server.

A predictor pod it cannot run (Triton, vLLM, TorchServe, OVMS, ModelMesh's runtimes) keeps
kwok's simulated readiness and gets the label ``testbed.model-serving-addon/data-plane:
simulated`` (``served`` on those it runs), and a line in the testbed's output.

Everything is driven by watch events, in resourceVersion order, handled one at a time by one
thread: a pod marked for deletion (or deleted) has its processes stopped; a pod waiting for a
Secret or ConfigMap (the kubelet's ``CreateContainerConfigError``) is translated again when one
of its namespace changes; an InferenceService's URL hosts become the spoke's ingress routes
(:mod:`testbed.dataplane.ingress`) to the loopback ports of its ready pods. The ingress is
updated *before* a pod's status is written, so once the API shows a pod Ready its ingress route
exists, and once it shows it not ready no request is sent there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import queue
import signal
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from testbed.cluster import Cluster
from testbed.dataplane import podspec
from testbed.dataplane.ingress import Ingress
from testbed.dataplane.podspec import (
    SIMULATED_LABEL,
    ConfigError,
    Environments,
    Refused,
    StaticObjects,
)
from testbed.dataplane.runner import BackOff, PodRunner
from testbed.processes import free_port

Obj = dict[str, Any]

ISVC_LABEL = "serving.kserve.io/inferenceservice"
"""KServe's label on an InferenceService's pods (value: its name)."""
MODELMESH_LABEL = "modelmesh-service"
"""ModelMesh's label on its runtime pods."""
MAIN_CONTAINER = "kserve-container"
"""KServe's name for the container serving the model (the one a Service targets)."""
SERVED, SIMULATED, REFUSED = "served", "simulated", "refused"
"""Values of :data:`~testbed.dataplane.podspec.SIMULATED_LABEL`: run by the testbed; kwok's
simulated readiness, no server behind it; of a runner's image but not runnable here (not
ready, with the reason in its status)."""

ISVC_API = ("serving.kserve.io", "v1beta1", "inferenceservices")
FIELD_MANAGER = "testbed-dataplane"
"""The field manager of every write the testbed makes to a pod (its managedFields show whose
status a pod has: this one's, never kwok's, for the pods the testbed runs)."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclasses.dataclass
class ServedPod:
    """A pod the testbed runs (or tried to), and what it reported."""

    namespace: str
    name: str
    uid: str
    isvc: str
    """The InferenceService it serves (its :data:`ISVC_LABEL`), or ""."""
    runner: PodRunner | None = None
    error: str | None = None
    """Why it does not run (a Secret it waits for, or what the testbed cannot give it)."""
    upstream: str | None = None
    """``127.0.0.1:PORT`` its main container serves HTTP on."""
    ready: bool = False
    deleting: bool = False
    reports: list[tuple[float, Obj]] = dataclasses.field(default_factory=list)
    """Every status written, with the wall-clock time it was sent."""
    transitions: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    """Condition type -> (status, lastTransitionTime) as last written."""

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    def first_ready(self) -> float | None:
        """Wall-clock time of the first status written with Ready True, if any."""
        for sent, status in self.reports:
            if _condition(status, "Ready") == "True":
                return sent
        return None


def _condition(status: Obj, kind: str) -> str | None:
    return next((str(c.get("status")) for c in status.get("conditions") or []
                 if c.get("type") == kind), None)


class ApiObjects:
    """:class:`~testbed.dataplane.podspec.Objects` read from the spoke's API server."""

    def __init__(self, api: Any) -> None:
        from kubernetes import client

        self.core = client.CoreV1Api(api)

    def _read(self, call: Callable[..., Any], namespace: str, name: str) -> Obj | None:
        from kubernetes.client.exceptions import ApiException

        try:
            response = call(name, namespace, _preload_content=False)
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return dict(json.loads(response.data))

    def secret(self, namespace: str, name: str) -> dict[str, bytes] | None:
        """The Secret's data, or None."""
        obj = self._read(self.core.read_namespaced_secret, namespace, name)
        return None if obj is None else StaticObjects.secret_data(obj)

    def config_map(self, namespace: str, name: str) -> dict[str, str] | None:
        """The ConfigMap's data, or None."""
        obj = self._read(self.core.read_namespaced_config_map, namespace, name)
        return None if obj is None else dict(obj.get("data") or {})


class WatchGone(Exception):
    """The watched resource does not exist (an InferenceService CRD not installed yet)."""


def list_watch(
    list_call: Callable[..., Any],
    stopping: threading.Event,
    on_list: Callable[[list[Obj]], None],
    on_event: Callable[[str, Obj], None],
) -> None:
    """List, then watch from the list's resourceVersion, as an informer does, until stopped.

    ``on_list`` gets every object of a (re)list; ``on_event`` each later event's type and
    object, in order. A watch that expired (410 Gone) lists again; a watch the server ended
    resumes from the last resourceVersion seen. Raises :class:`WatchGone` on a 404.
    """
    from kubernetes.client.exceptions import ApiException
    from kubernetes.watch.watch import iter_resp_lines
    from urllib3.exceptions import HTTPError

    version: str | None = None
    while not stopping.is_set():
        try:
            if version is None:
                listing = json.loads(list_call(_preload_content=False).data)
                version = str(listing["metadata"]["resourceVersion"])
                on_list(list(listing.get("items") or []))
            response = list_call(watch=True, resource_version=version,
                                 allow_watch_bookmarks=True, timeout_seconds=240,
                                 _preload_content=False)
            try:
                for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                    if stopping.is_set():
                        return
                    event = json.loads(line)
                    kind, obj = str(event.get("type")), dict(event.get("object") or {})
                    if kind == "ERROR":
                        if obj.get("code") == 410:
                            version = None
                            break
                        raise RuntimeError(f"watch error: {obj}")
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if kind != "BOOKMARK":
                        on_event(kind, obj)
            finally:
                response.release_conn()
        except ApiException as err:
            if err.status == 404:
                raise WatchGone(str(err)) from None
            if err.status != 410:
                raise
            version = None
        except (OSError, HTTPError):
            # The API server ended the stream or went away (the fleet stopping, a restart
            # injected): resume from the last resourceVersion once it answers again.
            if stopping.wait(1.0):
                return


class SpokeDataPlane:
    """The kubelet of one spoke's runnable predictor pods, and the routes of its ingress."""

    def __init__(
        self,
        cluster: Cluster,
        root: Path,
        log_dir: Path,
        environments: Environments,
        ingress: Ingress | None = None,
        log: Callable[[str], None] = print,
        backoff: BackOff | None = None,
        runners: tuple[str, ...] | None = None,
        node: str | None = None,
    ) -> None:
        self.cluster = cluster
        self.node = node
        """When set, the node name it binds the pods it runs to when no scheduler bound them
        (a hub has no scheduler and no nodes): it acts as their scheduler too."""
        self.runners = runners
        """The runners whose pods this kubelet runs (None: every runner's); kwok must be given
        the same (:func:`testbed.dataplane.kwok.write_config`)."""
        self._rules = podspec.served_rules(runners)
        self.root = root
        self.log_dir = log_dir
        self.environments = environments
        self.ingress = ingress
        self.log = log
        self.backoff = backoff or BackOff()
        self._stopping = threading.Event()
        self._events: queue.Queue[tuple[str, str, Any]] = queue.Queue()
        self._lock = threading.RLock()
        self._pods: dict[str, ServedPod] = {}
        """By pod UID."""
        self._pending: dict[str, Obj] = {}
        """Pods waiting for a Secret or ConfigMap, by UID (their last object)."""
        self._hosts: dict[tuple[str, str], tuple[str, ...]] = {}
        """(namespace, InferenceService) -> the hosts of its URLs."""
        self._simulated_uids: set[str] = set()
        self.history: list[ServedPod] = []
        """Every pod it started, in order, kept after the pod is gone (what the tests read)."""
        self.simulated: dict[str, str] = {}
        """``namespace/name`` of each predictor pod left to kwok -> why."""
        self._threads: list[threading.Thread] = []
        self._isvc_watch: threading.Thread | None = None
        self._stoppers: list[threading.Thread] = []
        self.failed: str | None = None
        """Set when a watch or the event loop failed (the data plane is then stale)."""
        self._api = cluster.api_client()
        self._objects = ApiObjects(self._api)
        self._access = podspec.ApiAccess(cluster.server, _certificate_authority(cluster),
                                         self._pod_token)

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> SpokeDataPlane:
        """Watch the spoke's pods, Secrets and ConfigMaps (returns at once)."""
        from kubernetes import client

        core = client.CoreV1Api(self._api)
        self._spawn("events", self._loop)
        self._spawn("pods", self._watcher("pods", core.list_pod_for_all_namespaces))
        self._spawn("secrets", self._watcher("secrets", core.list_secret_for_all_namespaces))
        self._spawn("configmaps",
                    self._watcher("configmaps", core.list_config_map_for_all_namespaces))
        return self

    def _spawn(self, name: str, target: Callable[[], None]) -> threading.Thread:
        thread = threading.Thread(target=target, name=f"{self.cluster.name} dataplane {name}",
                                  daemon=True)
        thread.start()
        self._threads.append(thread)
        return thread

    def stop(self) -> None:
        """Stop watching and stop every pod's processes."""
        self._stopping.set()
        self._events.put(("stop", "", None))
        with self._lock:
            runners = [p.runner for p in self._pods.values() if p.runner is not None]
            self._pods.clear()
        stoppers = [threading.Thread(target=r.stop, daemon=True) for r in runners]
        for thread in stoppers:
            thread.start()
        for thread in [*stoppers, *self._stoppers]:
            thread.join(30)
        with contextlib.suppress(Exception):
            self._api.close()

    def _watcher(self, kind: str, list_call: Callable[..., Any]) -> Callable[[], None]:
        def run() -> None:
            try:
                list_watch(list_call, self._stopping,
                           lambda items: self._events.put((kind, "LIST", items)),
                           lambda event, obj: self._events.put((kind, event, obj)))
            except WatchGone:
                self._events.put((kind, "GONE", None))
            except Exception as exc:  # the data plane is stale from here: say so
                if not self._stopping.is_set():
                    self.failed = f"{kind} watch: {type(exc).__name__}: {exc}"
                    self.log(f"[dataplane] {self.cluster.name}: {self.failed}")
        return run

    def _ensure_isvc_watch(self) -> None:
        """Watch InferenceServices once a predictor pod shows that KServe's CRDs exist."""
        if self._isvc_watch is not None and self._isvc_watch.is_alive():
            return
        from kubernetes import client

        custom = client.CustomObjectsApi(self._api)

        def list_call(**kwargs: Any) -> Any:
            return custom.list_cluster_custom_object(*ISVC_API, **kwargs)

        self._isvc_watch = self._spawn("inferenceservices",
                                       self._watcher("inferenceservices", list_call))

    # -------------------------------------------------------------- event loop
    def _loop(self) -> None:
        while not self._stopping.is_set():
            kind, event, obj = self._events.get()
            if kind == "stop":
                return
            try:
                self._handle(kind, event, obj)
            except Exception as exc:  # one bad event must not stop the kubelet
                self.log(f"[dataplane] {self.cluster.name}: {kind} {event} failed: "
                         f"{type(exc).__name__}: {exc}")

    def _handle(self, kind: str, event: str, obj: Any) -> None:
        if kind == "pods":
            if event == "LIST":
                listed = {str(p["metadata"].get("uid")) for p in obj}
                with self._lock:
                    gone = [p for uid, p in self._pods.items() if uid not in listed]
                for pod in gone:
                    self._stop_pod(pod)
                for item in obj:
                    self._pod_event(item, deleted=False)
            else:
                self._pod_event(obj, deleted=event == "DELETED")
        elif kind in ("secrets", "configmaps"):
            namespaces = ({str(o["metadata"].get("namespace")) for o in obj}
                          if event == "LIST" else {str(obj["metadata"].get("namespace"))})
            for uid, waiting in list(self._pending.items()):
                if waiting["metadata"].get("namespace") in namespaces:
                    self._pending.pop(uid, None)
                    self._pod_event(waiting, deleted=False)
        elif kind == "inferenceservices":
            if event == "GONE":
                return
            items = obj if event == "LIST" else [obj]
            with self._lock:
                if event == "LIST":
                    self._hosts.clear()
                for isvc in items:
                    key = (str(isvc["metadata"].get("namespace")), str(isvc["metadata"]["name"]))
                    if event == "DELETED":
                        self._hosts.pop(key, None)
                    else:
                        self._hosts[key] = isvc_hosts(isvc)
            self._update_routes()

    def _pod_event(self, pod: Obj, deleted: bool) -> None:
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid"))
        labels = meta.get("labels") or {}
        predictor = ISVC_LABEL in labels or MODELMESH_LABEL in labels
        if predictor:
            self._ensure_isvc_watch()
        with self._lock:
            known = self._pods.get(uid)
        if deleted or meta.get("deletionTimestamp"):
            self._pending.pop(uid, None)
            if known is not None:
                self._stop_pod(known)
            return
        if known is not None or uid in self._pending:
            return  # running already, or waiting for a Secret or ConfigMap event
        if not (pod.get("spec") or {}).get("nodeName"):
            if self.node is not None and podspec.runs_locally(pod, self._rules):
                self._bind(pod, self.node)  # its MODIFIED event (bound) starts it
            return
        if not podspec.runs_locally(pod, self._rules):
            if predictor and uid not in self._simulated_uids:
                self._simulated_uids.add(uid)
                images = ", ".join(podspec.pod_images(pod))
                why = f"no local runner for every image ({images}): kwok's readiness, no server"
                self.simulated[f"{meta.get('namespace')}/{meta.get('name')}"] = why
                self.log(f"[dataplane] {self.cluster.name}: pod {meta.get('namespace')}/"
                         f"{meta.get('name')} is SIMULATED: {why}")
                self._label(pod, SIMULATED)
            return
        self._start_pod(pod)

    # ------------------------------------------------------------------ pods
    def _bind(self, pod: Obj, node: str) -> None:
        """Bind ``pod`` to ``node`` as a scheduler does (a Binding of the pod)."""
        from kubernetes import client

        meta = pod["metadata"]
        body: Any = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        client.CoreV1Api(self._api).create_namespaced_pod_binding(
            meta["name"], meta["namespace"], body, _preload_content=False)
        self.log(f"[dataplane] {self.cluster.name}: bound pod {meta['namespace']}/"
                 f"{meta['name']} to node {node}")

    def _start_pod(self, pod: Obj) -> None:
        meta = pod["metadata"]
        uid = str(meta["uid"])
        served = ServedPod(str(meta.get("namespace")), str(meta["name"]), uid,
                           str((meta.get("labels") or {}).get(ISVC_LABEL, "")))
        root = self.root / f"{served.namespace}_{served.name}"
        try:
            plan = podspec.translate(pod, root, self._objects, self.environments, free_port,
                                     self._access)
        except ConfigError as err:
            # The kubelet's CreateContainerConfigError: tried again when the namespace's
            # Secrets or ConfigMaps change.
            self._pending[uid] = pod
            self._write_waiting(pod, "CreateContainerConfigError", str(err))
            return
        except Refused as err:
            served.error = str(err)
            with self._lock:
                self._pods[uid] = served
            self.log(f"[dataplane] {self.cluster.name}: pod {served.key} not run: {err}")
            self._label(pod, REFUSED)
            self._write_waiting(pod, "CreateContainerError", err.reason)
            return
        main = next((c for c in plan.containers if c.name == MAIN_CONTAINER), plan.containers[0])
        declared = [int(p["containerPort"]) for c in pod["spec"]["containers"]
                    if c["name"] == main.name for p in c.get("ports") or []]
        port = main.ports.get(declared[0] if declared else 8080)
        if port is None and main.ports:
            port = next(iter(main.ports.values()))
        served.upstream = f"127.0.0.1:{port}" if port else None
        served.runner = PodRunner(plan, self.log_dir, backoff=self.backoff,
                                  on_change=lambda status: self._report(served, status))
        with self._lock:
            self._pods[uid] = served
            self.history.append(served)
        self._label(pod, SERVED)
        self.log(f"[dataplane] {self.cluster.name}: running pod {served.key} "
                 f"({', '.join(c.runner for c in plan.containers)}) on {served.upstream}")
        served.runner.start()

    def _pod_token(self, pod: Obj) -> str:
        """A token of the pod's ServiceAccount, bound to the pod (a TokenRequest).

        What the kubelet requests for the projected ``kube-api-access`` volume.
        """
        from kubernetes import client

        meta, spec = pod["metadata"], pod.get("spec") or {}
        request: Any = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "spec": {"expirationSeconds": 3607,
                            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                                               "name": meta["name"], "uid": meta["uid"]}}}
        response: Any = client.CoreV1Api(self._api).create_namespaced_service_account_token(
            str(spec.get("serviceAccountName") or "default"), str(meta.get("namespace")),
            request, _preload_content=False)
        return str(json.loads(response.data)["status"]["token"])

    def _stop_pod(self, served: ServedPod) -> None:
        with self._lock:
            served.deleting = True
            served.ready = False
            self._pods.pop(served.uid, None)
        self._update_routes()
        if served.runner is not None:
            self.log(f"[dataplane] {self.cluster.name}: pod {served.key} deleted: stopping it")
            stopper = threading.Thread(target=served.runner.stop, daemon=True,
                                       name=f"stop {served.key}")
            stopper.start()
            self._stoppers.append(stopper)

    def _report(self, served: ServedPod, status: Obj) -> None:
        """A runner's new status (its supervising thread): ingress first, then the API."""
        now = _now()
        status = dict(status)
        conditions = []
        for condition in status.get("conditions") or []:
            entry = dict(condition)
            previous = served.transitions.get(entry["type"])
            since = previous[1] if previous and previous[0] == entry["status"] else now
            served.transitions[entry["type"]] = (entry["status"], since)
            entry["lastTransitionTime"] = since
            conditions.append(entry)
        status["conditions"] = conditions
        status["hostIPs"] = [{"ip": status.get("hostIP", "127.0.0.1")}]
        with self._lock:
            if served.deleting:
                return
            served.ready = _condition(status, "Ready") == "True"
        self._update_routes()
        served.reports.append((time.time(), status))
        self._patch_status(served.namespace, served.name, served.uid, status)

    def _write_waiting(self, pod: Obj, reason: str, message: str) -> None:
        """A pod whose containers cannot start: every container waiting with ``reason``."""
        meta, spec = pod["metadata"], pod.get("spec") or {}

        def waiting(container: Obj) -> Obj:
            return {"name": container["name"], "image": container.get("image", ""),
                    "imageID": "", "ready": False, "started": False, "restartCount": 0,
                    "state": {"waiting": {"reason": reason, "message": message}},
                    "lastState": {}}

        def condition(kind: str, true: bool) -> Obj:
            entry: Obj = {"type": kind, "status": "True" if true else "False",
                          "lastTransitionTime": _now()}
            if not true:
                entry["reason"] = reason
                entry["message"] = message
            return entry

        status: Obj = {
            "phase": "Pending",
            "conditions": [condition("PodScheduled", True),
                           condition("Initialized", not spec.get("initContainers")),
                           condition("ContainersReady", False), condition("Ready", False)],
            "containerStatuses": [waiting(c) for c in spec.get("containers") or []],
        }
        if spec.get("initContainers"):
            status["initContainerStatuses"] = [waiting(c) for c in spec["initContainers"]]
        self._patch_status(str(meta.get("namespace")), str(meta["name"]), str(meta["uid"]),
                           status)

    def _patch_status(self, namespace: str, name: str, uid: str, status: Obj) -> None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        body = {"metadata": {"uid": uid}, "status": status}
        try:
            client.CoreV1Api(self._api).patch_namespaced_pod_status(
                name, namespace, body, field_manager=FIELD_MANAGER,
                _content_type="application/merge-patch+json")
        except ApiException as err:
            # Gone, or a new pod of the same name (the uid is a precondition): not ours.
            if err.status not in (404, 409):
                self.log(f"[dataplane] {self.cluster.name}: status of {namespace}/{name} "
                         f"not written: {err.status} {err.reason}: {err.body}")

    def _label(self, pod: Obj, value: str) -> None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        meta = pod["metadata"]
        body = {"metadata": {"uid": meta["uid"], "labels": {SIMULATED_LABEL: value}}}
        try:
            client.CoreV1Api(self._api).patch_namespaced_pod(
                meta["name"], meta.get("namespace"), body, field_manager=FIELD_MANAGER,
                _content_type="application/merge-patch+json")
        except ApiException as err:
            if err.status not in (404, 409):
                raise

    # ---------------------------------------------------------------- ingress
    def routes(self) -> dict[str, list[str]]:
        """Host -> upstreams of the ready pods of the InferenceService with that URL host."""
        with self._lock:
            out: dict[str, list[str]] = {}
            for (namespace, isvc), hosts in self._hosts.items():
                upstreams = sorted(
                    (p.name, p.upstream) for p in self._pods.values()
                    if p.namespace == namespace and p.isvc == isvc and p.ready
                    and not p.deleting and p.upstream)
                for host in hosts:
                    out[host] = [u for _, u in upstreams]
            return out

    def _update_routes(self) -> None:
        if self.ingress is not None:
            with self._lock:
                self.ingress.set_routes(self.routes())

    # ----------------------------------------------------------- for the tests
    def pods(self) -> list[ServedPod]:
        """The pods the testbed runs (or refused to run) now."""
        with self._lock:
            return list(self._pods.values())

    def pods_of(self, namespace: str, isvc: str) -> list[ServedPod]:
        """The served pods of one InferenceService."""
        return [p for p in self.pods() if p.namespace == namespace and p.isvc == isvc]

    def kill(self, namespace: str, name: str, container: str = MAIN_CONTAINER,
             sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` to a container of a served pod (fault injection); its old PID."""
        for pod in self.pods():
            if pod.namespace == namespace and pod.name == name and pod.runner is not None:
                return pod.runner.kill(container, sig)
        raise KeyError(f"{namespace}/{name} is not a pod the testbed runs")


def _certificate_authority(cluster: Cluster) -> str:
    """The CA file of the cluster's admin kubeconfig (what verifies its API server)."""
    import yaml

    config = yaml.safe_load(cluster.kubeconfig.read_text())
    return str(config["clusters"][0]["cluster"].get("certificate-authority", ""))


def isvc_hosts(isvc: Obj) -> tuple[str, ...]:
    """The hosts of an InferenceService's URLs (its own and each component's), sorted."""
    status = isvc.get("status") or {}
    urls = [status.get("url")]
    urls += [c.get("url") for c in (status.get("components") or {}).values()
             if isinstance(c, dict)]
    hosts = {urllib.parse.urlsplit(str(u)).hostname for u in urls if u}
    return tuple(sorted(h for h in hosts if h))
