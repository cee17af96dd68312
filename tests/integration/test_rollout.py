"""Progressive rollout on the demo fleet with KServe's real controller (issue 17).

A model with ``spec.rollout.strategy: Progressive`` and ``maxConcurrency: 1`` on two managed
clusters: every change is a revision on the hub, reaches cluster1 first and cluster2 only
once cluster1 passed its gates (read from the works on the hub: the revision each carries and
the Ready KServe reports back); a change KServe rejects rolls back without touching
cluster2; a metric gate on a real Prometheus (scraping an exporter this test controls)
decides; the manager SIGKILLed mid-step resumes without writing a cluster twice; pause and
undo act.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from addon_api import constants as c
from addon_manager import naming
from addon_manager.facts import WorkFact, parse_work
from testbed import demo, observability
from testbed.fleet import Testbed
from testbed.processes import Process, free_port
from testbed.support.waiting import eventually

NS = demo.NAMESPACE
NAME = "canary"
KIND = c.KIND_INFERENCE_SERVICE
WORK = naming.work_name(KIND, NS, NAME)
CLUSTERS = ("cluster1", "cluster2")


@pytest.fixture(scope="module")
def fleet(built_binaries: Callable[[str], Any]) -> Iterator[tuple[Testbed, Callable[[], None]]]:
    """The demo's fleet with KServe on both clusters and no model yet."""
    with demo.fleet(demo.Phases()) as bed:
        bed.bind_clusterset(NS)
        for name in ("placement.yaml", "modelserving-kserve.yaml"):
            bed.hub.kubectl("apply", "-n", NS, "-f", str(demo.REPO / "examples" / name))
        yield bed, demo.start_kserve_when_stack_ready(bed)
        bed.cleanup()


def _model(**predictor: Any) -> dict[str, Any]:
    base = yaml.safe_load((demo.REPO / "examples" / "inferenceservice.yaml").read_text())
    base["metadata"]["name"] = NAME
    spec = base["spec"]
    spec.pop("overrides")
    spec.pop("storageConnections")
    spec["template"]["predictor"]["model"]["storageUri"] = "gs://kfserving-examples/models/sklearn/1.0/model"
    spec["template"]["predictor"].update(predictor)
    spec["rollout"] = {"strategy": "Progressive", "maxConcurrency": 1, "minSuccessTime": "2s",
                       "progressDeadline": "90s"}
    return base


def _apply(hub: Any, obj: dict[str, Any]) -> None:
    hub.kubectl("apply", "-n", NS, "-f", "-", input=yaml.safe_dump(obj))


def _intent(hub: Any) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(hub.kubectl(
        "get", "mcisvc", NAME, "-n", NS, "-o", "json").stdout)
    return out


def _rollout(hub: Any) -> dict[str, Any]:
    return dict((_intent(hub).get("status") or {}).get("rollout") or {})


def _works(hub: Any) -> dict[str, tuple[WorkFact, int]]:
    """Each cluster's work of the model as the hub has it, with its metadata.generation."""
    out: dict[str, tuple[WorkFact, int]] = {}
    for cl in CLUSTERS:
        got = hub.kubectl("get", "manifestwork", WORK, "-n", cl, "-o", "json", check=False)
        if got.returncode == 0:
            body = json.loads(got.stdout)
            fact = parse_work(body)
            assert fact is not None
            out[cl] = (fact, int(body["metadata"]["generation"]))
    return out


class History:
    """Samples of both works' (revision, Ready) over a rollout, checked as they come."""

    def __init__(self) -> None:
        self.samples: list[dict[str, tuple[int | None, bool]]] = []

    def sample(self, hub: Any, target: int) -> dict[str, tuple[int | None, bool]]:
        now = {cl: (w.revision, w.value("ready") == "True" and not w.unobserved)
               for cl, (w, _) in _works(hub).items()}
        self.samples.append(now)
        # cluster2 has the new revision only once cluster1 was Ready on it: never two
        # clusters on it before the first passed its gates.
        if now.get("cluster2", (None, False))[0] == target:
            assert any(s.get("cluster1") == (target, True) for s in self.samples), self.samples
        return now

    def ever(self, cluster: str, revision: int) -> bool:
        return any(s.get(cluster, (None, False))[0] == revision for s in self.samples)


def _until(fleet: tuple[Testbed, Callable[[], None]], check: Callable[[], Any],
           timeout: float = 240) -> Any:
    bed, step = fleet

    def poll() -> Any:
        bed.check_processes()
        step()
        return check()

    return eventually(poll, timeout=timeout, interval=0.5)


def _complete_on(fleet: tuple[Testbed, Callable[[], None]], revision: int,
                 history: History | None = None) -> dict[str, Any]:
    hub = fleet[0].hub

    def done() -> dict[str, Any] | None:
        if history is not None:
            history.sample(hub, revision)
        roll = _rollout(hub)
        ok = (roll.get("phase"), roll.get("stableRevision")) == ("Complete", revision)
        return roll if ok else None

    out: dict[str, Any] = _until(fleet, done)
    return out


def test_changes_reach_one_cluster_at_a_time(fleet: tuple[Testbed, Callable[[], None]]) -> None:
    hub = fleet[0].hub
    _apply(hub, _model())
    first = History()
    roll = _complete_on(fleet, 1, first)
    assert first.ever("cluster1", 1) and roll["steps"] == 2
    revisions = json.loads(hub.kubectl(
        "get", "controllerrevisions", "-n", NS, "-l", f"{c.LABEL_INTENT_NAME}={NAME}",
        "-o", "json").stdout)["items"]
    assert [r["revision"] for r in revisions] == [1]
    assert revisions[0]["metadata"]["ownerReferences"][0]["kind"] == KIND
    # A good change: revision 2, cluster1 first, cluster2 after cluster1 is Ready on it.
    _apply(hub, _model(minReplicas=2))
    second = History()
    _complete_on(fleet, 2, second)
    assert second.ever("cluster1", 2)
    works = _works(hub)
    assert {cl: w.revision for cl, (w, _) in works.items()} == {"cluster1": 2, "cluster2": 2}
    intent = _intent(hub)
    conds = {x["type"]: x for x in intent["status"]["conditions"]}
    assert conds["RolledOut"]["status"] == "True" and intent["status"]["phase"] == "Ready"


def test_a_change_kserve_rejects_rolls_back_and_never_reaches_cluster2(
    fleet: tuple[Testbed, Callable[[], None]],
) -> None:
    hub = fleet[0].hub
    before = _works(hub)
    bad = _model(minReplicas=2)
    bad["spec"]["template"]["predictor"]["model"]["modelFormat"] = {"name": "no-such-format"}
    bad["spec"]["template"]["predictor"]["model"].pop("runtime")
    _apply(hub, bad)
    history = History()

    def rolled_back() -> dict[str, Any] | None:
        history.sample(hub, 3)
        roll = _rollout(hub)
        return roll if roll.get("phase") == "RolledBack" else None

    roll = _until(fleet, rolled_back)
    print(f"rolled back: {roll['message']}")
    assert roll["failedRevision"] == 3 and roll["stableRevision"] == 2
    assert "on cluster cluster1" in roll["message"]
    assert "no-such-format" in roll["message"] or "NoSupportingRuntime" in roll["message"]
    assert history.ever("cluster1", 3) and not history.ever("cluster2", 3)
    # cluster2's work was never written; cluster1's is back on revision 2.
    _until(fleet, lambda: {cl: w.revision for cl, (w, _) in _works(hub).items()}
           == {"cluster1": 2, "cluster2": 2})
    after = _works(hub)
    assert after["cluster2"][1] == before["cluster2"][1]
    intent = _intent(hub)
    conds = {x["type"]: x for x in intent["status"]["conditions"]}
    assert (conds["Ready"]["status"], conds["Ready"]["reason"]) == ("False", "RolledBack")
    assert intent["status"]["phase"] == "Degraded"
    events = hub.kubectl("get", "events", "-n", NS, "--field-selector",
                         f"involvedObject.name={NAME},reason=RolloutRolledBack",
                         "-o", "name").stdout
    assert events.strip(), "no RolloutRolledBack Event"
    # The model serves revision 2 again on both clusters.
    _until(fleet, lambda: all(e["ready"] for e in intent_entries(hub).values()))


def intent_entries(hub: Any) -> dict[str, dict[str, Any]]:
    return {e["cluster"]: e for e in (_intent(hub).get("status") or {}).get("clusters") or []}


@pytest.fixture(scope="module")
def gate_prometheus(fleet: tuple[Testbed, Callable[[], None]], tmp_path_factory: Any
                    ) -> Iterator[tuple[observability.Prometheus, Gauge]]:
    """A real Prometheus scraping an exporter whose error ratio per cluster this test sets."""
    bed, _ = fleet
    registry = CollectorRegistry()
    errors = Gauge("canary_error_ratio", "errors per request", ["cluster"], registry=registry)
    port = free_port()
    start_http_server(port, addr="127.0.0.1", registry=registry)
    server = observability.Prometheus(
        "gate-prometheus", Path(tmp_path_factory.mktemp("gate-prometheus")), bed.log_dir,
        [{"job_name": "canary", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}],
    ).start()
    yield server, errors
    server.stop()


def _manager(bed: Testbed) -> Process:
    return next(p for p in bed.processes if p.name == "manager")


def test_a_metric_gate_decides_and_a_killed_manager_resumes_without_double_writes(
    fleet: tuple[Testbed, Callable[[], None]],
    gate_prometheus: tuple[observability.Prometheus, Gauge],
) -> None:
    bed, _ = fleet
    hub = bed.hub
    server, errors = gate_prometheus
    manager = _manager(bed)
    manager.stop()
    manager.argv.append(f"--prometheus-url=http://{server.address}")
    manager.start()
    errors.labels("cluster1").set(0.5)
    errors.labels("cluster2").set(0.0)
    eventually(lambda: server.query("canary_error_ratio"), timeout=60)
    gate = {"query": 'max by (cluster) (canary_error_ratio{cluster=~"$clusters"})',
            "maxValue": 0.1}
    model = _model(minReplicas=3)
    model["spec"]["rollout"]["metricGate"] = gate
    _apply(hub, model)  # revision 4: cluster1's error ratio fails the gate

    def rolled_back(revision: int) -> Callable[[], dict[str, Any] | None]:
        def check() -> dict[str, Any] | None:
            roll = _rollout(hub)
            ok = (roll.get("phase"), roll.get("failedRevision")) == ("RolledBack", revision)
            return roll if ok else None
        return check

    roll = _until(fleet, rolled_back(4))
    print(f"metric gate: {roll['message']}")
    assert roll["failedRevision"] == 4 and "Metric" in roll["message"]
    assert "0.5 for cluster cluster1 is not <= 0.1" in roll["message"]
    # Healthy now: revision 5 goes on. Kill the manager once cluster1 has it.
    errors.labels("cluster1").set(0.01)
    before = _works(hub)
    model = _model(minReplicas=4)
    model["spec"]["rollout"]["metricGate"] = gate
    model["spec"]["rollout"]["minSuccessTime"] = "6s"
    _apply(hub, model)
    _until(fleet, lambda: _works(hub)["cluster1"][0].revision == 5)
    manager.kill()
    killed = time.monotonic()
    time.sleep(0.5)
    manager.start()
    roll = _complete_on(fleet, 5, History())
    print(f"revision 5 complete {time.monotonic() - killed:.1f}s after the kill")
    after = _works(hub)
    for cl in CLUSTERS:  # one write per cluster for revision 5, across the restart
        assert after[cl][1] == before[cl][1] + 1, (cl, before[cl][1], after[cl][1])
    assert any(g["gate"] == "Metric" for g in roll.get("gates", [])) or roll["phase"] == "Complete"


def test_pause_holds_the_next_step_and_undo_returns_every_cluster(
    fleet: tuple[Testbed, Callable[[], None]],
) -> None:
    hub = fleet[0].hub
    hub.kubectl("annotate", "mcisvc", NAME, "-n", NS, f"{c.ANNOTATION_ROLLOUT_PAUSE}=true")
    model = copy.deepcopy(_model(minReplicas=5))
    model["spec"]["rollout"].pop("metricGate", None)
    _apply(hub, model)  # revision 6
    _until(fleet, lambda: _rollout(hub).get("phase") == "Paused"
           and _rollout(hub).get("targetRevision") == 6)
    # The reconcile that wrote this status wrote its works first: none moved.
    assert {cl: w.revision for cl, (w, _) in _works(hub).items()} == {"cluster1": 5,
                                                                       "cluster2": 5}
    hub.kubectl("annotate", "mcisvc", NAME, "-n", NS, f"{c.ANNOTATION_ROLLOUT_PAUSE}-")
    _complete_on(fleet, 6, History())
    hub.kubectl("annotate", "mcisvc", NAME, "-n", NS, f"{c.ANNOTATION_ROLLOUT_UNDO}=6:2")
    _until(fleet, lambda: {cl: w.revision for cl, (w, _) in _works(hub).items()}
           == {"cluster1": 2, "cluster2": 2})
    roll = _rollout(hub)
    assert (roll["phase"], roll["stableRevision"], roll["failedRevision"]) == (
        "RolledBack", 2, 6)
    hub.kubectl("delete", "mcisvc", NAME, "-n", NS)
    _until(fleet, lambda: _works(hub) == {})
