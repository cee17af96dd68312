"""Progressive rollouts (issue 17) on the demo's fleet of two spokes with KServe's real controller.

A model with ``maxConcurrency: 1`` takes every change to one cluster at a time: a cluster gets
the new revision only once every cluster before it was Ready on it (read from the works on the
hub: the revision each carries and the Ready KServe reports about it, watched as the rollout
runs); a change KServe rejects rolls back at the first step and never reaches the others; a
metric gate on a real Prometheus (scraping an exporter the test controls) decides; the manager
SIGKILLed mid-step resumes without writing a cluster twice; pause, resume and undo act. A
serving runtime rolls out per OCM Placement decision group, the mandatory canary group first.

What is real: as in ``test_e2e`` (kube-apiservers, etcd, OCM's agents and controllers, the
manager and agents with their production identities, KServe's controller); the pods kwok
marks Running, so a model is Ready when KServe's controller says so.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from addon_agent.stacks import KSERVE
from addon_api import constants as c
from addon_manager.facts import naming
from addon_manager.facts.records import WorkFact
from addon_manager.kinds.registry import parse as parse_work
from testbed import demo, observability
from testbed.fleet import Testbed
from testbed.processes import Process, free_port
from testbed.support import fleetcli, watching
from testbed.support.serving import hub_entry_serving
from testbed.support.waiting import eventually, on_fleet

NS = demo.NAMESPACE
CLUSTERS = ("cluster1", "cluster2")
"""Two are enough for every order the tests check (the second cluster waits for the first;
a decision group of the last one goes first) and cost half the CPU and steps of four."""
CANARY = "canary"
ISVC = c.KIND_INFERENCE_SERVICE
RUNTIME = "rings-runtime"
Fleet = tuple[Testbed, Callable[[], None]]
SAMPLED_SUCCESS = "3s"
"""minSuccessTime of the rollouts whose every step the tests follow (History). It was 10s
while History sampled the works every second: with 3s, a CI run once saw a whole step pass
between two samples. History now watches them, so no step is missed however short."""


@pytest.fixture(scope="module")
def fleet(testbed: Testbed) -> Iterator[Fleet]:
    """The shared demo fleet (``tests/conftest.py``: two spokes, the agents in
    ``DEMO_AGENT_NAMESPACE``) with the example Placement and ModelServing: the KServe stack on each.

    Afterwards it puts back what the rollouts changed, for the next module on that fleet
    (``test_e2e``): their intents removed from the clusters, the cluster labels and the
    Placement they added gone, the stack's ModelServing and the manager's flags as before.
    """
    bed = testbed
    manager_argv = list(_manager(bed).argv)
    bed.bind_clusterset(NS)
    for name in ("placement.yaml", "modelserving-kserve.yaml"):
        bed.hub.kubectl("apply", "-n", NS, "-f", str(demo.REPO / "examples" / name))
    step = demo.start_kserve_when_stack_ready(bed)
    _until((bed, step), lambda: all("kserve-controller" in s.processes for s in bed.spokes),
           timeout=300)
    yield bed, step
    _put_back(bed, step, manager_argv)


def _put_back(bed: Testbed, step: Callable[[], None], manager_argv: list[str]) -> None:
    """Undo what this module's tests did to the shared demo fleet (see :func:`fleet`)."""
    hub = bed.hub
    for plural, name in (("mcisvc", CANARY), ("mcisvc", "steady"), ("mcsr", RUNTIME)):
        hub.kubectl("delete", plural, name, "-n", NS, "--ignore-not-found", "--wait=false")
    hub.kubectl("delete", "placement", "rings", "-n", NS, "--ignore-not-found")
    for cl in CLUSTERS:
        hub.kubectl("label", "managedcluster", cl, "ring-")
    manager = _manager(bed)
    if manager.argv != manager_argv:
        manager.kill()
        manager.argv = list(manager_argv)
        manager.start()
    hub.kubectl("apply", "-n", NS, "-f", str(demo.REPO / "examples" / "modelserving-kserve.yaml"))
    works = [naming.work_name(ISVC, NS, name) for name in (CANARY, "steady")]
    works.append(naming.work_name(c.KIND_SERVING_RUNTIME, NS, RUNTIME))
    _until((bed, step), lambda: not any(_works(hub, work) for work in works))
    _until((bed, step), lambda: not _rollout(hub, "msv", "kserve") and all(
        e["phase"] == "Available" and e["version"] == KSERVE.version
        for e in _entries(hub, "msv", "kserve").values()))


def _until(fleet: Fleet, check: Callable[[], Any], timeout: float = 240) -> Any:
    return on_fleet(*fleet, check, timeout)


def _model(strategy: str = "Progressive", **predictor: Any) -> dict[str, Any]:
    base = demo.public_model(CANARY)
    spec = base["spec"]
    spec["template"]["predictor"].update(predictor)
    spec["rollout"] = {"strategy": strategy, "maxConcurrency": 1, "minSuccessTime": "3s",
                       "progressDeadline": "90s"}
    return base


def _apply(hub: Any, obj: dict[str, Any]) -> None:
    hub.kubectl("apply", "-n", NS, "-f", "-", input=yaml.safe_dump(obj))


_CLIENTS: dict[str, Any] = {}


def _api(hub: Any) -> client.CustomObjectsApi:
    """A client of the hub kept for the module: the rollout samples read every second, and a
    kubectl process each time cost the loaded machine more than the reads themselves."""
    key = str(hub.kubeconfig)
    if key not in _CLIENTS:
        _CLIENTS[key] = client.CustomObjectsApi(hub.api_client())
    return _CLIENTS[key]


PLURALS = {"mcisvc": "multiclusterinferenceservices", "mcsr": "multiclusterservingruntimes",
           "msv": "modelservings"}


def _get(hub: Any, plural: str, name: str) -> dict[str, Any]:
    out: dict[str, Any] = _api(hub).get_namespaced_custom_object(
        c.GROUP, c.VERSION, NS, PLURALS[plural], name)
    return out


def _rollout(hub: Any, plural: str = "mcisvc", name: str = CANARY) -> dict[str, Any]:
    return dict((_get(hub, plural, name).get("status") or {}).get("rollout") or {})


def _entries(hub: Any, plural: str = "mcisvc", name: str = CANARY) -> dict[str, dict[str, Any]]:
    return {e["cluster"]: e for e in (_get(hub, plural, name).get("status") or {}).get(
        "clusters") or []}


def _works(hub: Any, work: str) -> dict[str, tuple[WorkFact, int]]:
    """Each cluster's work ``work`` as the hub has it, with its metadata.generation."""
    out: dict[str, tuple[WorkFact, int]] = {}
    got = _api(hub).list_cluster_custom_object(
        "work.open-cluster-management.io", "v1", "manifestworks",
        field_selector=f"metadata.name={work}")
    for body in got["items"]:
        fact = parse_work(body)
        assert fact is not None
        out[fact.cluster] = (fact, int(body["metadata"]["generation"]))
    return out


def _revisions(hub: Any, work: str) -> dict[str, int | None]:
    return {cl: w.revision for cl, (w, _) in _works(hub, work).items()}


class History:
    """Every state of every cluster's (revision, ready) over a rollout, checked as they come.

    A cluster may get the target revision only once every cluster that had it before was seen
    ready on it, unless it is one of the at most ``step`` clusters of the step under way: with
    ``maxConcurrency: 1``, never two clusters on it before the first passed its gates.
    ``ready`` is what the gate reads: KServe's Ready fed back about the work's current
    generation (for a runtime: the work agent's Available).

    The works are watched (:mod:`testbed.support.watching`), not polled: every write of each
    is seen, in the hub's order, however short the state it left (a sampled history missed a
    whole step on a loaded machine unless each lasted longer than the gaps between samples).
    Used as a context manager around the rollout; :meth:`sample` takes in what came so far.
    """

    def __init__(self, hub: Any, work: str, ready: Callable[[WorkFact], bool],
                 step: int = 1) -> None:
        self.hub = hub
        self.work = work
        self.ready = ready
        self.step = step
        """Clusters one step may move at once (``maxConcurrency``)."""
        self.samples: list[dict[str, tuple[int | None, bool]]] = []
        """The state after each write, the first one the works as they were listed."""
        self.moving: list[str] = []
        """The clusters that got the target since every earlier one was seen ready on it."""
        self._watch: contextlib.ExitStack | None = None
        self._recorder: watching.Recorder | None = None
        self._taken = 0

    def __enter__(self) -> History:
        api = _api(self.hub)
        self._watch = contextlib.ExitStack()
        self._recorder = self._watch.enter_context(watching.recording({"work": (
            api.list_cluster_custom_object,
            {"group": "work.open-cluster-management.io", "version": "v1",
             "plural": "manifestworks", "field_selector": f"metadata.name={self.work}"})}))
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._watch is not None
        self._watch.close()

    def sample(self, target: int) -> dict[str, tuple[int | None, bool]]:
        """Check every write seen since the last call against the rules above; the state now."""
        assert self._recorder is not None, "use History as a context manager"
        with self._recorder.lock:
            events = self._recorder.events[self._taken:]
            self._taken += len(events)
        if not self.samples:  # the works as listed when the watch began: one state
            listed = [e for e in events if e.type == "ADDED"]
            self.samples.append({f.cluster: self._state(f) for f in map(parse_work,
                                 (e.object for e in listed)) if f is not None})
            events = events[len(listed):]
        for event in events:
            now = dict(self.samples[-1])
            fact = parse_work(event.object)
            assert fact is not None
            if event.type == "DELETED":
                now.pop(fact.cluster, None)
            else:
                now[fact.cluster] = self._state(fact)
            self._check(now, target)
            self.samples.append(now)
        return self.samples[-1]

    def _state(self, work: WorkFact) -> tuple[int | None, bool]:
        return work.revision, self.ready(work) and not work.unobserved

    def _check(self, now: dict[str, tuple[int | None, bool]], target: int) -> None:
        before = self.samples[-1]
        arrived = [cl for cl, (rev, _) in now.items()
                   if rev == target and before.get(cl, (None, False))[0] != target]
        if not arrived:
            return
        had = [cl for cl, (rev, _) in before.items() if rev == target]
        if all(self.seen_ready(cl, target) for cl in had):
            self.moving = []  # a new step
        self.moving += arrived
        assert len(self.moving) <= self.step, (
            f"{self.moving} got revision {target} before the ones before them were ready "
            f"(at most {self.step} at once): {self.samples[-3:]}")

    def seen_ready(self, cluster: str, revision: int) -> bool:
        return any(s.get(cluster) == (revision, True) for s in self.samples)

    def ever(self, cluster: str, revision: int) -> bool:
        return any(s.get(cluster, (None, False))[0] == revision for s in self.samples)

    def order(self, revision: int) -> list[str]:
        """Clusters in the order they got ``revision``."""
        seen: list[str] = []
        for s in self.samples:
            seen += sorted(cl for cl, (rev, _) in s.items() if rev == revision and cl not in seen)
        return seen


def _isvc_ready(w: WorkFact) -> bool:
    return w.value("ready") == "True"


def _complete_on(fleet: Fleet, revision: int, history: History | None = None,
                 plural: str = "mcisvc", name: str = CANARY) -> dict[str, Any]:
    hub = fleet[0].hub

    def done() -> dict[str, Any] | None:
        if history is not None:
            history.sample(revision)
        roll = _rollout(hub, plural, name)
        ok = (roll.get("phase"), roll.get("stableRevision")) == ("Complete", revision)
        return roll if ok else None

    out: dict[str, Any] = _until(fleet, done)
    return out


CANARY_WORK = naming.work_name(ISVC, NS, CANARY)
STACK_WORK = naming.work_name(c.KIND_MODEL_SERVING, NS, "kserve")


def test_a_good_change_reaches_the_clusters_one_at_a_time(fleet: Fleet) -> None:
    hub = fleet[0].hub
    # Everywhere at once first (no revisions): every cluster Ready.
    _apply(hub, _model("All"))
    _until(fleet, lambda: len(_entries(hub)) == len(CLUSTERS) and all(
        e["ready"] for e in _entries(hub).values()))
    assert _revisions(hub, CANARY_WORK) == dict.fromkeys(CLUSTERS)
    # A good change, progressively: revision 1 reaches one cluster at a time, each only after
    # the ones before were Ready on it; the others keep their work from before until then.
    with History(hub, CANARY_WORK, _isvc_ready) as history:
        _apply(hub, _model(minReplicas=2))
        roll = _complete_on(fleet, 1, history)
    assert roll["steps"] == len(CLUSTERS) and sorted(history.order(1)) == list(CLUSTERS)
    assert any(s.get(CLUSTERS[-1], (0, False))[0] is None for s in history.samples)
    revisions = json.loads(hub.kubectl(
        "get", "controllerrevisions", "-n", NS, "-l", f"{c.LABEL_INTENT_NAME}={CANARY}",
        "-o", "json").stdout)["items"]
    assert [r["revision"] for r in revisions] == [1]
    assert revisions[0]["metadata"]["ownerReferences"][0]["kind"] == ISVC
    assert _revisions(hub, CANARY_WORK) == dict.fromkeys(CLUSTERS, 1)
    # The rollout is complete once every cluster was Ready on revision 1; the intent's phase
    # follows the clusters' latest reports (KServe may flip a cluster's Ready while it scales
    # to the new minReplicas), so wait for it rather than read it once.
    intent = _until(fleet, lambda: (lambda i: i if i["status"]["phase"] == "Ready" else None)(
        _get(hub, "mcisvc", CANARY)))
    conds = {x["type"]: x for x in intent["status"]["conditions"]}
    assert conds["RolledOut"]["status"] == "True"


def test_a_change_kserve_rejects_rolls_back_at_the_first_step(fleet: Fleet) -> None:
    hub = fleet[0].hub
    before = _works(hub, CANARY_WORK)
    bad = _model(minReplicas=2)
    bad["spec"]["template"]["predictor"]["model"]["modelFormat"] = {"name": "no-such-format"}

    def rolled_back() -> dict[str, Any] | None:
        history.sample(2)
        roll = _rollout(hub)
        return roll if roll.get("phase") == "RolledBack" else None

    with History(hub, CANARY_WORK, _isvc_ready) as history:
        _apply(hub, bad)
        roll = _until(fleet, rolled_back)
    print(f"rolled back: {roll['message']}")
    assert roll["failedRevision"] == 2 and roll["stableRevision"] == 1
    assert "no-such-format" in roll["message"] or "NoSupportingRuntime" in roll["message"]
    # The first cluster is back on revision 1; the other works were never written. Which
    # cluster went first is read from the works' generations, not from the samples: KServe
    # refuses the format at once, so revision 2 may come and go between two samples.
    _until(fleet, lambda: _revisions(hub, CANARY_WORK) == dict.fromkeys(CLUSTERS, 1))
    after = _works(hub, CANARY_WORK)
    first = [cl for cl in CLUSTERS if after[cl][1] != before[cl][1]]
    assert len(first) == 1 and f"on cluster {first[0]}" in roll["message"], (first, roll)
    assert set(history.order(2)) <= set(first), history.samples
    intent = _get(hub, "mcisvc", CANARY)
    conds = {x["type"]: x for x in intent["status"]["conditions"]}
    assert (conds["Ready"]["status"], conds["Ready"]["reason"]) == ("False", "RolledBack")
    assert intent["status"]["phase"] == "Degraded"
    events = hub.kubectl("get", "events", "-n", NS, "--field-selector",
                         f"involvedObject.name={CANARY},reason=RolloutRolledBack",
                         "-o", "name").stdout
    assert events.strip(), "no RolloutRolledBack Event"
    # The model serves revision 1 again everywhere.
    _until(fleet, lambda: all(e["ready"] for e in _entries(hub).values()))


@pytest.fixture(scope="module")
def gate_prometheus(fleet: Fleet, tmp_path_factory: Any
                    ) -> Iterator[tuple[observability.Prometheus, Gauge]]:
    """A real Prometheus scraping an exporter whose error ratio per cluster this test sets."""
    bed, _ = fleet
    registry = CollectorRegistry()
    errors = Gauge("canary_error_ratio", "errors per request", ["cluster"], registry=registry)
    port = free_port()
    start_http_server(port, addr="127.0.0.1", registry=registry)
    server = observability.Prometheus(
        "gate-prometheus", Path(tmp_path_factory.mktemp("gate-prometheus")), bed.log_dir,
        [{"job_name": "canary", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
          "scrape_interval": "1s"}],
    ).start()
    yield server, errors
    server.stop()


def _manager(bed: Testbed) -> Process:
    return next(p for p in bed.processes if p.name == "manager")


def test_a_metric_gate_decides_and_a_killed_manager_resumes_without_double_writes(
    fleet: Fleet, gate_prometheus: tuple[observability.Prometheus, Gauge],
) -> None:
    bed, _ = fleet
    hub = bed.hub
    server, errors = gate_prometheus
    manager = _manager(bed)
    manager.kill()  # (a clean stop waits for every daemon to finish: seconds for nothing)
    # Asked again every 2 s, not 15: how soon a changed metric is seen is not the subject.
    manager.argv += [f"--prometheus-url=http://{server.address}", "--gate-refresh=2"]
    manager.start()
    for cl in CLUSTERS:
        errors.labels(cl).set(0.5)  # whichever cluster goes first fails the gate
    eventually(lambda: len(server.query("canary_error_ratio")) == len(CLUSTERS), timeout=60)
    gate = {"query": 'max by (cluster) (canary_error_ratio{cluster=~"$clusters"})',
            "maxValue": 0.1}
    model = _model(minReplicas=3)
    model["spec"]["rollout"]["metricGate"] = gate
    _apply(hub, model)  # revision 3: the first cluster's error ratio fails the gate

    def rolled_back() -> dict[str, Any] | None:
        roll = _rollout(hub)
        ok = (roll.get("phase"), roll.get("failedRevision")) == ("RolledBack", 3)
        return roll if ok else None

    roll = _until(fleet, rolled_back)
    print(f"metric gate: {roll['message']}")
    assert "Metric" in roll["message"] and "is not <= 0.1" in roll["message"]
    # Healthy now: revision 4 goes on. Kill the manager once the first cluster has it.
    for cl in CLUSTERS:
        errors.labels(cl).set(0.01)
    before = _works(hub, CANARY_WORK)
    model = _model(minReplicas=4)
    model["spec"]["rollout"]["metricGate"] = gate
    _apply(hub, model)
    _until(fleet, lambda: 4 in _revisions(hub, CANARY_WORK).values())
    manager.kill()
    killed = time.monotonic()
    time.sleep(0.5)
    manager.start()
    with History(hub, CANARY_WORK, _isvc_ready) as history:
        roll = _complete_on(fleet, 4, history)
    print(f"revision 4 complete {time.monotonic() - killed:.1f}s after the kill")
    after = _works(hub, CANARY_WORK)
    for cl in CLUSTERS:  # one write per cluster for revision 4, across the restart
        assert after[cl][1] == before[cl][1] + 1, (cl, before[cl][1], after[cl][1])
    assert any(g["gate"] == "Metric" for g in roll.get("gates", [])) or roll["phase"] == "Complete"


def test_pause_holds_resume_goes_on_and_undo_returns_every_cluster(fleet: Fleet) -> None:
    """Through the fleet command line (``rollout pause|resume|undo|status|history``)."""
    hub = fleet[0].hub
    admin = hub.kubeconfig

    def rollout(*args: str) -> str:
        out = fleetcli.run(admin, "rollout", *args, f"mcisvc/{CANARY}", "-n", NS)
        assert out.returncode == 0, (args, out.returncode, out.stderr)
        return out.stdout

    # `rollout status` waits for a rollout to end: revision 4's is Complete, so at once.
    assert f"mcisvc/{CANARY}: Complete" in rollout("status", "--timeout=30s")
    assert "paused" in rollout("pause")
    _apply(hub, _model(minReplicas=5))  # revision 5 (no metric gate)
    _until(fleet, lambda: _rollout(hub).get("phase") == "Paused"
           and _rollout(hub).get("targetRevision") == 5)
    # The reconcile that wrote this status wrote its works first: none moved.
    assert _revisions(hub, CANARY_WORK) == dict.fromkeys(CLUSTERS, 4)
    status = rollout("status", "--no-watch")
    print(status)
    assert f"mcisvc/{CANARY}: Paused" in status and "stable 4, target 5" in status
    # Resumed: the first step starts; then undone mid-rollout: every cluster goes to
    # revision 1 and stays there.
    assert "resumed" in rollout("resume")
    _until(fleet, lambda: 5 in _revisions(hub, CANARY_WORK).values())
    assert "returns to revision 1" in rollout("undo", "--to-revision=1")
    _until(fleet, lambda: _revisions(hub, CANARY_WORK) == dict.fromkeys(CLUSTERS, 1))
    # The works are written before the status that records them: wait for the status.
    _until(fleet, lambda: _rollout(hub).get("phase") == "RolledBack")
    roll = _rollout(hub)
    assert (roll["phase"], roll["stableRevision"], roll.get("failedRevision")) == (
        "RolledBack", 1, 5)
    assert _revisions(hub, CANARY_WORK) == dict.fromkeys(CLUSTERS, 1)
    # ... and a rollout that ended rolled back fails `rollout status` (exit 1).
    failed = fleetcli.run(admin, "rollout", "status", f"mcisvc/{CANARY}", "-n", NS,
                          "--timeout=30s")
    assert failed.returncode == 1 and f"mcisvc/{CANARY}: RolledBack" in failed.stdout, failed
    history = rollout("history")
    print(history)
    roles = {line.split()[0]: line.split()[2:] for line in history.splitlines()[1:]}
    assert roles["1"] == ["stable"] and roles["5"] == ["failed"], history
    hub.kubectl("delete", "mcisvc", CANARY, "-n", NS)
    _until(fleet, lambda: _works(hub, CANARY_WORK) == {})


def _rings_placement() -> dict[str, Any]:
    """A Placement of every cluster in two decision groups: ``canary`` (ring=canary), then
    the rest."""
    return {
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": {"name": "rings", "namespace": NS},
        "spec": {
            "clusterSets": ["default"],
            "decisionStrategy": {"groupStrategy": {
                "clustersPerDecisionGroup": "100%",
                "decisionGroups": [{"groupName": "canary", "groupClusterSelector": {
                    "labelSelector": {"matchLabels": {"ring": "canary"}}}}],
            }},
        },
    }


def _runtime(image: str) -> dict[str, Any]:
    base: dict[str, Any] = yaml.safe_load(
        (demo.REPO / "examples" / "servingruntime.yaml").read_text())
    base["metadata"]["name"] = RUNTIME
    base["spec"]["placementRef"] = {"name": "rings"}
    base["spec"]["template"]["containers"][0]["image"] = image
    base["spec"]["rollout"] = {"strategy": "ProgressivePerGroup", "mandatoryGroups": ["canary"],
                               "maxConcurrency": 2, "minSuccessTime": SAMPLED_SUCCESS}
    return base


def test_a_runtime_rolls_out_per_decision_group_the_canary_group_first(fleet: Fleet) -> None:
    hub = fleet[0].hub
    # The canary ring is the last clusters by name: group order, not name order, decides.
    canary = CLUSTERS[len(CLUSTERS) // 2:]
    for cl in canary:
        hub.kubectl("label", "managedcluster", cl, "ring=canary", "--overwrite")
    hub.apply_objects([_rings_placement()])
    work = naming.work_name(c.KIND_SERVING_RUNTIME, NS, RUNTIME)
    _apply(hub, _runtime("docker.io/kserve/sklearnserver:v0.20.0"))
    _complete_on(fleet, 1, None, "mcsr", RUNTIME)  # the first revision rolls out too
    assert all(e["ready"] for e in _entries(hub, "mcsr", RUNTIME).values())
    with History(hub, work, lambda w: w.available == "True", step=2) as history:
        _apply(hub, _runtime("docker.io/kserve/sklearnserver:v0.17.1"))
        roll = _complete_on(fleet, 2, history, "mcsr", RUNTIME)
    assert roll["steps"] == 2, roll
    # The canary clusters first (History: the others only once those were Available on it).
    order = history.order(2)
    assert set(order[:len(canary)]) == set(canary) and set(order) == set(CLUSTERS), order
    runtimes = [json.loads(s.kubectl("get", "servingruntime", RUNTIME, "-n", "models", "-o",
                                     "json").stdout) for s in fleet[0].spokes]
    assert {r["spec"]["containers"][0]["image"] for r in runtimes} == {
        "docker.io/kserve/sklearnserver:v0.17.1"}
    hub.kubectl("delete", "mcsr", RUNTIME, "-n", NS)
    _until(fleet, lambda: _works(hub, work) == {})


def test_a_stack_upgrade_goes_one_cluster_at_a_time_while_the_models_stay_ready(
    fleet: Fleet,
) -> None:
    """ModelServing rollouts (issue 19): the stack at the previous KServe pin everywhere at
    once, then back to the current pin progressively: a cluster's stack moves only once every
    cluster before it has its stack Available on the new version and its model Ready, and the
    model keeps serving throughout (Ready on the hub, or Progressing while KServe rolls its
    Deployment to the new runtime image: :mod:`testbed.support.serving`)."""
    hub = fleet[0].hub
    previous, current = KSERVE.versions[-2], KSERVE.version
    model = _model("All")
    model["metadata"]["name"] = "steady"
    _apply(hub, model)
    _until(fleet, lambda: len(_entries(hub, name="steady")) == len(CLUSTERS) and all(
        e["ready"] for e in _entries(hub, name="steady").values()))
    stack: dict[str, Any] = yaml.safe_load(
        (demo.REPO / "examples" / "modelserving-kserve.yaml").read_text())
    stack["spec"]["version"] = previous
    _apply(hub, stack)  # all at once: no rollout yet

    def versions() -> dict[str, str]:
        return {cl: str(w.value("stackVersion") or "") for cl, (w, _) in
                _works(hub, STACK_WORK).items() if w.value("phase") == "Available"}

    _until(fleet, lambda: versions() == dict.fromkeys(CLUSTERS, previous), timeout=300)
    stack["spec"]["version"] = current
    stack["spec"]["rollout"] = {"strategy": "Progressive", "maxConcurrency": 1,
                                "minSuccessTime": SAMPLED_SUCCESS, "progressDeadline": "240s"}

    def stack_ready(w: WorkFact) -> bool:
        return w.value("phase") == "Available" and w.value("stackVersion") == current

    def done() -> dict[str, Any] | None:
        history.sample(1)
        models = _entries(hub, name="steady")
        assert all(hub_entry_serving(e) for e in models.values()), (
            f"a model stopped serving: {models}")
        roll = _rollout(hub, "msv", "kserve")
        complete = (roll.get("phase"), roll.get("stableRevision")) == ("Complete", 1)
        return roll if complete and all(e["ready"] for e in models.values()) else None

    with History(hub, STACK_WORK, stack_ready) as history:
        _apply(hub, stack)
        roll = _until(fleet, done, timeout=400)
    assert roll["steps"] == len(CLUSTERS) and sorted(history.order(1)) == list(CLUSTERS)
    assert versions() == dict.fromkeys(CLUSTERS, current)
    entries = _entries(hub, "msv", "kserve")
    assert {e["version"] for e in entries.values()} == {current}
    hub.kubectl("delete", "mcisvc", "steady", "-n", NS)
