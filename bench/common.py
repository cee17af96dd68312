"""What every benchmark needs: a testbed hub, a fleet of spoke-less clusters, the manager,
a watch over ManifestWorks, work-agent-style status reports, and /proc readings."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from addon_api import constants as c
from addon_api.hub import MultiClusterInferenceService
from addon_manager.facts import canonical, naming
from addon_manager.kinds import inference_service as isvc_kind
from testbed import identities
from testbed.fleet import Testbed
from testbed.support.fake_fleet import PLATFORM_META, FakeFleet
from testbed.support.fake_fleet import decided as fleet_decided
from testbed.support.manager import (
    Manager,
    model_serving,
    prepare,
    report_work_status,
)
from testbed.support.manager import inference_service as support_inference_service

WORK = ("work.open-cluster-management.io", "v1", "manifestworks")
MWRS = ("work.open-cluster-management.io", "v1alpha1", "manifestworkreplicasets")
CLUSTERS = ("cluster.open-cluster-management.io", "v1", "managedclusters")
DECISIONS = ("cluster.open-cluster-management.io", "v1beta1", "placementdecisions")
PLACEMENTS = ("cluster.open-cluster-management.io", "v1beta1", "placements")
INTENTS = (c.GROUP, "v1alpha1", "multiclusterinferenceservices")
MODEL_SERVINGS = (c.GROUP, "v1alpha1", "modelservings")
CLUSTERSET_LABEL = "cluster.open-cluster-management.io/clusterset"
FLEET_LABEL = "bench-fleet"
PLATFORM = "platform"
NAMESPACE = "bench"
TOLERATIONS = [
    {"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists"},
    {"key": "cluster.open-cluster-management.io/unavailable", "operator": "Exists"},
]
T = TypeVar("T")


def log(msg: str) -> None:
    """A timestamped progress line."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def wait_for(pred: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> float:
    """Poll ``pred`` until true; return the seconds it took (TimeoutError after ``timeout``)."""
    start = time.monotonic()
    while not pred():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{what}: not after {timeout:.0f}s")
        time.sleep(interval)
    return time.monotonic() - start


def parallel(fn: Callable[[T], Any], items: Iterable[T], threads: int = 16) -> None:
    """Run ``fn`` over ``items`` with a bounded thread pool; re-raise the first failure."""
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(fn, items))


# ---------------------------------------------------------------------------- the hub
def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def hub() -> Iterator[Testbed]:
    """A testbed hub (no spokes) with the add-on's CRDs and a bound ``bench`` namespace.
    SIGTERM and SIGINT unwind (so the manager and the testbed are stopped either way)."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _exit_on_signal)
    tb = Testbed(spokes=0, log=log)
    try:
        tb.start()
        prepare(tb)
        tb.bind_clusterset(NAMESPACE)
        yield tb
    finally:
        tb.cleanup()


def api_client(tb: Testbed, pool: int = 32) -> client.ApiClient:
    """A kubernetes client for the hub with a connection pool of ``pool``."""
    api = tb.hub.api_client()
    api.configuration.connection_pool_maxsize = pool
    return cast(client.ApiClient, api)


class Fleet(FakeFleet):
    """Spoke-less ManagedClusters (with hub namespaces) in the default cluster set."""

    def __init__(self, api: client.ApiClient) -> None:
        super().__init__(api, FLEET_LABEL)

    def grow(self, total: int) -> list[str]:
        """Create clusters until there are ``total``; return all names."""
        self.create(total - len(self.names), "c")
        return list(self.names)


def ensure_placement(api: client.ApiClient, name: str, clusters: int) -> float:
    """Create the Placement (all fleet clusters, unreachable tolerated) and wait until it
    decides ``clusters``; return the seconds the decisions took."""
    custom = client.CustomObjectsApi(api)
    selector = {"matchLabels": {FLEET_LABEL: "yes"}}
    body = {
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "clusterSets": ["default"],
            "tolerations": TOLERATIONS,
            "predicates": [{"requiredClusterSelector": {"labelSelector": selector}}],
        },
    }
    with contextlib.suppress(ApiException):
        custom.create_namespaced_custom_object(*PLACEMENTS[:2], NAMESPACE, PLACEMENTS[2], body)
    return wait_for(lambda: len(decided(custom, name)) == clusters, 600, f"{name} decisions")


def decided(custom: client.CustomObjectsApi, placement: str) -> set[str]:
    """Clusters the Placement's decisions name."""
    return fleet_decided(custom, NAMESPACE, placement)


# ---------------------------------------------------------------------------- intents
def inference_service(name: str, placement: str, replicas: int = 1) -> dict[str, Any]:
    """The benchmark's MultiClusterInferenceService (``replicas`` is what a change changes)."""
    return support_inference_service(name, NAMESPACE, placement, replicas)


def rendered(intent: dict[str, Any], cluster: str) -> dict[str, Any]:
    """The ManifestWork the manager renders for ``intent`` on ``cluster``."""
    model = MultiClusterInferenceService.from_object(intent)
    return isvc_kind.render(model, cluster, {}).body


def content(work: dict[str, Any]) -> str:
    """Digest of what a ManifestWork carries to the cluster (its workload)."""
    return canonical.canonical_hash((work.get("spec") or {}).get("workload") or {})


def isvc_work_name(name: str) -> str:
    """The manager's work name for the MultiClusterInferenceService ``name``."""
    return naming.work_name(c.KIND_INFERENCE_SERVICE, NAMESPACE, name)


def platform_work_name() -> str:
    """The manager's work name for the benchmark's ModelServing."""
    return naming.work_name(c.KIND_MODEL_SERVING, NAMESPACE, PLATFORM)


# ---------------------------------------------------------------------------- watching
class WorkWatch:
    """ManifestWorks of one name in every cluster namespace, kept current by a watch:
    cluster -> digest of the content (``content``)."""

    def __init__(self, api: client.ApiClient, name: str) -> None:
        self.api = api
        self.name = name
        self.seen: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> WorkWatch:
        self._thread.start()
        if not self._ready.wait(60):
            raise TimeoutError(f"watch of {self.name} did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _run(self) -> None:
        custom = client.CustomObjectsApi(self.api)
        selector = f"metadata.name={self.name}"
        while not self._stop.is_set():
            try:
                found = cast(
                    dict[str, Any],
                    custom.list_cluster_custom_object(*WORK, field_selector=selector),
                )
                with self._lock:
                    self.seen = {w["metadata"]["namespace"]: content(w) for w in found["items"]}
                self._ready.set()
                self._follow(custom, selector, found["metadata"]["resourceVersion"])
            except Exception:  # relist after any watch failure
                time.sleep(0.5)

    def _follow(self, custom: client.CustomObjectsApi, selector: str, rv: str) -> None:
        stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
            custom.list_cluster_custom_object, *WORK, field_selector=selector,
            resource_version=rv, timeout_seconds=300,
        )
        for event in stream:
            if self._stop.is_set():
                return
            obj = event["object"]
            if event["type"] == "ERROR" or not isinstance(obj, dict):
                return
            ns = obj["metadata"]["namespace"]
            with self._lock:
                if event["type"] == "DELETED":
                    self.seen.pop(ns, None)
                else:
                    self.seen[ns] = content(obj)

    def count(self, digest: str | None = None) -> int:
        """Works seen (with content ``digest`` if given)."""
        with self._lock:
            return sum(1 for d in self.seen.values() if digest is None or d == digest)

    def wait_content(self, clusters: int, digest: str, timeout: float = 900) -> float:
        """Seconds until ``clusters`` works carry ``digest``."""
        return wait_for(lambda: self.count(digest) >= clusters, timeout, f"{self.name} content")

    def wait_gone(self, timeout: float = 900) -> float:
        """Seconds until no work of this name is left."""
        return wait_for(lambda: self.count() == 0, timeout, f"{self.name} gone")


# ---------------------------------------------------------------------------- the manager
def start_manager(tb: Testbed, log_path: Path, *args: str) -> tuple[Manager, float]:
    """Start the manager; return it and the seconds until it reports ready."""
    mgr = Manager(
        identities.manager_kubeconfig(tb.hub), log_path, "--no-addon-enablement",
        "--log-format=text", *args,
    ).start()
    ready = wait_for(
        lambda: _ready(mgr), 900, "manager ready", interval=0.2
    )
    return mgr, ready


def _ready(mgr: Manager) -> bool:
    if mgr.proc is not None and mgr.proc.poll() is not None:
        raise RuntimeError(f"manager exited:\n{mgr.tail()}")
    try:
        return mgr.total("model_serving_manager_ready") == 1
    except OSError:
        return False


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (``/proc/<pid>/stat`` utime + stime)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_mib(pid: int, field: str = "VmHWM") -> float:
    """A memory figure of ``/proc/<pid>/status`` (VmHWM = peak RSS) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


# ---------------------------------------------------------------------------- the work agent
ISVC_META = {
    "group": "serving.kserve.io", "version": "v1beta1", "kind": "InferenceService",
    "resource": "inferenceservices", "namespace": "models",
}


class Platforms:
    """The ordering gate opened: a ModelServing whose work on every cluster reports its
    ServingPlatform Available (written as the work agent would)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.reported: set[str] = set()

    def ensure(self, placement: str, clusters: list[str]) -> float:
        """Create the ModelServing once; report Available on clusters not reported yet;
        return the seconds it took (the manager must be running)."""
        start = time.monotonic()
        custom = client.CustomObjectsApi(self.api)
        with contextlib.suppress(ApiException):
            custom.create_namespaced_custom_object(
                *MODEL_SERVINGS[:2], NAMESPACE, MODEL_SERVINGS[2],
                model_serving(PLATFORM, NAMESPACE, placement),
            )
        with WorkWatch(self.api, platform_work_name()) as works:
            wait_for(lambda: works.count() >= len(clusters), 900, "platform works")
        todo = [n for n in clusters if n not in self.reported]
        parallel(
            lambda n: report_work_status(self.api, n, platform_work_name(), PLATFORM_META,
                             {"phase": "Available", "readyComponents": 1, "totalComponents": 1}),
            todo,
        )
        self.reported.update(todo)
        wait_for(lambda: self.ready(custom) >= len(clusters), 900, "platform ready")
        return time.monotonic() - start

    def ready(self, custom: client.CustomObjectsApi) -> int:
        """Clusters the ModelServing's status counts ready."""
        return int(summary(custom, MODEL_SERVINGS, PLATFORM).get("ready", 0))


def summary(custom: client.CustomObjectsApi, plural: tuple[str, str, str], name: str) -> Any:
    """``status.summary`` of an intent ({} while it has none)."""
    try:
        obj = custom.get_namespaced_custom_object(*plural[:2], NAMESPACE, plural[2], name)
    except ApiException:
        return {}
    return (cast(dict[str, Any], obj).get("status") or {}).get("summary") or {}


def table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- a settled fleet
def scrape(mgr: Manager, prefix: str, label: str = "") -> float:
    """Sum of the manager's samples starting with ``prefix`` (and containing ``label``);
    retried, since a busy manager can be slow to answer /metrics."""
    for attempt in range(6):
        try:
            return sum(
                v for k, v in mgr.metrics().items() if k.startswith(prefix) and label in k
            )
        except OSError:
            if attempt == 5:
                raise
            time.sleep(1)
    raise AssertionError("unreachable")


def writes(mgr: Manager, verb: str = "") -> float:
    """API writes the manager made (only ``verb`` if given: apply, delete, patch-status)."""
    return scrape(mgr, "model_serving_api_writes_total{", f'verb="{verb}"' if verb else "")


def quiesce(mgr: Manager, quiet: float = 10, timeout: float = 600) -> float:
    """Seconds until the manager made no write for ``quiet`` seconds."""
    start = time.monotonic()
    last, since = writes(mgr), time.monotonic()
    while time.monotonic() - since < quiet:
        if time.monotonic() - start > timeout:
            raise TimeoutError("the manager keeps writing")
        time.sleep(1)
        now = writes(mgr)
        if now != last:
            last, since = now, time.monotonic()
    return time.monotonic() - start


@contextlib.contextmanager
def settled(
    tb: Testbed, api: client.ApiClient, log_path: Path, clusters: int, intents: int
) -> Iterator[tuple[Manager, list[str], list[str]]]:
    """``clusters`` clusters, the ModelServing (platform Available everywhere) and
    ``intents`` MultiClusterInferenceServices, every work written; yields the running
    manager, the cluster names and the intent names; stops the manager afterwards."""
    custom = client.CustomObjectsApi(api)
    t0 = time.monotonic()
    names = Fleet(api).grow(clusters)
    log(f"{clusters} clusters in {time.monotonic() - t0:.1f}s")
    log(f"placement decided in {ensure_placement(api, 'fleet', clusters):.1f}s")
    mgr, ready = start_manager(tb, log_path)
    try:
        log(f"manager ready after {ready:.1f}s")
        log(f"platforms Available after {Platforms(api).ensure('fleet', names):.1f}s")
        isvcs = [f"isvc{i}" for i in range(intents)]
        start = time.monotonic()
        for name in isvcs:
            custom.create_namespaced_custom_object(
                *INTENTS[:2], NAMESPACE, INTENTS[2], inference_service(name, "fleet")
            )
        wait_for(partial(_written, mgr, intents * clusters), 1800, "intents written", 1)
        for name in isvcs:
            if _work_count(custom, name) != clusters:
                raise RuntimeError(f"{name}: not one work per cluster")
        log(f"{intents} intents x {clusters} works written in {time.monotonic() - start:.1f}s")
        yield mgr, names, isvcs
    finally:
        mgr.stop()


def _written(mgr: Manager, works: int) -> bool:
    applied = scrape(
        mgr, "model_serving_manifestwork_applies_total{", f'kind="{c.KIND_INFERENCE_SERVICE}"'
    )
    return applied >= works


def _work_count(custom: client.CustomObjectsApi, name: str) -> int:
    found = cast(dict[str, Any], custom.list_cluster_custom_object(
        *WORK, field_selector=f"metadata.name={isvc_work_name(name)}",
    ))
    return len(found["items"])
