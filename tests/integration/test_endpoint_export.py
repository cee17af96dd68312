"""A model's fleet endpoint exported with Multi-Cluster Services and kept off a cluster whose
metric is out of bounds (issue 34), through OCM's real work agents and a real Prometheus:
``spec.endpoint.serviceExport`` puts a ServiceExport of the predictor Service on every cluster
that takes the model's traffic and takes it away from one that stops; a cluster without the
MCS API still serves (the entry says it is not exported); ``spec.endpoint.spillover`` takes a
member out while its model's error ratio is out of bounds, and back once it is within them.

cluster1 serves the MCS CRDs (sigs.k8s.io/mcs-api, as Submariner or Cilium ClusterMesh would
install them); cluster2 does not. KServe's status is written by the test, as KServe would.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from addon_api import constants as c
from testbed import observability, upstream
from testbed.fleet import Testbed
from testbed.processes import free_port
from testbed.support.manager import (
    Manager,
    exists,
    get_json,
    inference_service,
    model_serving,
    placement,
    running_manager,
    set_platform_phase,
    works,
)
from testbed.support.waiting import eventually

EXPORT = "iris-predictor"


@dataclass
class Metrics:
    """A real Prometheus scraping a stand-in for the model servers' error ratio per pod."""

    server: observability.Prometheus
    errors: Gauge
    p99: Gauge
    """What the chart's recording rule keeps per model: no pod label, its inferenceservice."""

    def set(self, cluster: str, value: float) -> None:
        self.errors.labels(cluster, "models", "iris-predictor-6d4f9-x2x7q").set(value)
        # another model's pods in the same namespace, failing: never this model's business
        self.errors.labels(cluster, "models", "other-predictor-5c8b7-k9zrt").set(1.0)

    def set_p99(self, cluster: str, seconds: float) -> None:
        self.p99.labels(cluster, "models", "iris").set(seconds)
        self.p99.labels(cluster, "models", "other").set(9.0)  # slow, and not this model


@pytest.fixture(scope="module")
def metrics(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Metrics]:
    """The Prometheus the manager's spillover reads (its --prometheus-url)."""
    registry = CollectorRegistry()
    errors = Gauge("request_error_ratio", "errors per request", ["cluster", "namespace", "pod"],
                   registry=registry)
    p99 = Gauge("model_serving:request_predict_seconds:p99", "p99 prediction latency",
                ["cluster", "namespace", "inferenceservice"], registry=registry)
    port = free_port()
    start_http_server(port, addr="127.0.0.1", registry=registry)
    server = observability.Prometheus(
        "spillover-prometheus", tmp_path_factory.mktemp("prometheus"), testbed.log_dir,
        [{"job_name": "models", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
          "scrape_interval": "1s"}],
    ).start()
    found = Metrics(server, errors, p99)
    for cluster in ("cluster1", "cluster2"):
        found.set(cluster, 0.0)
        found.set_p99(cluster, 0.05)
    try:
        yield found
    finally:
        server.stop()


@pytest.fixture(scope="module")
def manager(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory,
            metrics: Metrics) -> Iterator[Manager]:
    """One manager for the module (no addon manager here: add-on enablement off)."""
    # The spillover is judged again every 2 s (the default 15 s would make each of the test's
    # moves wait up to 15 s: how soon is not the subject, what moves is).
    with running_manager(testbed, tmp_path_factory.mktemp("manager"), "--no-addon-enablement",
                         f"--prometheus-url=http://{metrics.server.address}",
                         "--gate-refresh=2") as mgr:
        yield mgr


@dataclass
class Exported:
    """What the steps share."""

    hub: Any
    spoke1: Any
    spoke2: Any
    ns: str

    def status(self) -> dict[str, Any]:
        return dict(get_json(self.hub, "mcisvc", "iris", "-n", self.ns).get("status") or {})

    def members(self) -> list[str]:
        return [m["cluster"] for m in (self.status().get("endpoint") or {}).get("members", [])]

    def entry(self, cluster: str) -> dict[str, Any]:
        return {e["cluster"]: e for e in self.status().get("clusters", [])}.get(cluster, {})

    def exporting(self) -> list[str] | None:
        """The exporting clusters of the model's InferencePoolImport (None: there is none)."""
        found = self.hub.kubectl("get", "inferencepoolimport", "iris", "-n", self.ns, "-o",
                                 "json", check=False)
        if found.returncode != 0:
            return None
        controllers = (json.loads(found.stdout).get("status") or {}).get("controllers") or []
        return [x["name"] for entry in controllers for x in entry.get("exportingClusters") or []]

    def export(self) -> dict[str, Any] | None:
        found = self.spoke1.kubectl("get", "serviceexport", EXPORT, "-n", "models", "-o", "json",
                                    check=False)
        return json.loads(found.stdout) if found.returncode == 0 else None


def _kserve_status(spoke: Any, ready: bool) -> None:
    """The InferenceService's status as KServe writes it: Ready with a URL, or not."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    flag = "True" if ready else "False"
    spoke.kubectl("patch", "inferenceservice", "iris", "-n", "models", "--subresource=status",
                  "--type=merge", "-p", json.dumps({"status": {
                      "url": f"http://iris-models.{spoke.name}.example.com",
                      "conditions": [
                          {"type": "Ready", "status": flag, "lastTransitionTime": now},
                          {"type": "PredictorReady", "status": flag,
                           "lastTransitionTime": now}],
                      "modelStatus": {"transitionStatus": "UpToDate", "states": {
                          "activeModelState": "Loaded" if ready else "Pending",
                          "targetModelState": "Loaded"}}}}))


@pytest.fixture(scope="class")
def exported(testbed: Testbed, scenario_namespace: str, manager: Manager,
             go_modules: Any) -> Iterator[Exported]:
    """The MCS API on cluster1 only; a ModelServing and a model with serviceExport on both."""
    del go_modules  # the MCS CRDs come from the Go module cache
    hub, (spoke1, spoke2) = testbed.hub, testbed.spokes
    ns, label = scenario_namespace, f"t-{uuid.uuid4().hex[:6]}"
    spoke1.apply_files(upstream.mcs_crds())
    spoke1.wait_crds_established()
    hub.apply_files([upstream.inference_pool_import_crd()])
    hub.wait_crds_established()
    for spoke in testbed.spokes:
        hub.kubectl("label", "managedcluster", spoke.name, f"{label}=yes", "--overwrite")
    model = inference_service("iris", ns, "p", endpoint={"serviceExport": True,
                                                         "inferencePoolImport": True})
    try:
        hub.apply_objects([placement("p", ns, {label: "yes"}), model_serving("kserve", ns, "p"),
                           model])
        yield Exported(hub, spoke1, spoke2, ns)
    finally:
        hub.kubectl("delete", "msv,mcisvc", "--all", "-n", ns, "--wait=false", check=False)
        for spoke in testbed.spokes:
            hub.kubectl("label", "managedcluster", spoke.name, f"{label}-", check=False)
        eventually(lambda: not exists(hub, "msv", "kserve", "-n", ns), timeout=60)
        for path in upstream.mcs_crds():
            spoke1.kubectl("delete", "-f", str(path), "--ignore-not-found", check=False)
        hub.kubectl("delete", "-f", str(upstream.inference_pool_import_crd()),
                    "--ignore-not-found", check=False)


class TestServiceExport:
    """Exported where the model takes traffic and the MCS API is served; withdrawn when it
    stops; steady without flapping; gone with the model."""

    def test_1_each_serving_cluster_exports_and_one_without_the_api_still_serves(
            self, exported: Exported, manager: Manager) -> None:
        s = exported
        for spoke in (s.spoke1, s.spoke2):
            eventually(lambda spoke=spoke: exists(spoke, "servingplatform", "model-serving"),
                       timeout=60)
            set_platform_phase(spoke, "Available")
        for spoke in (s.spoke1, s.spoke2):
            eventually(lambda spoke=spoke: exists(spoke, "inferenceservice", "iris", "-n",
                                                  "models"), timeout=60)
            _kserve_status(spoke, ready=True)
        eventually(lambda: s.members() == ["cluster1", "cluster2"], timeout=60)
        export = eventually(s.export, timeout=60)
        assert export["metadata"]["labels"][c.LABEL_INTENT_NAME] == "iris"
        entry = eventually(lambda: (e := s.entry("cluster2")).get("message", "").startswith(
            "not exported") and e, timeout=60)
        assert entry["ready"] is True and entry["phase"] == "Ready"
        assert entry["message"].startswith(
            "not exported: cluster cluster2 has no Multi-Cluster Services API")
        assert s.members() == ["cluster1", "cluster2"]  # still takes the fleet's traffic
        assert s.entry("cluster1")["ready"] is True
        # The serving set as an InferencePoolImport on the hub, owned by the model.
        eventually(lambda: s.exporting() == ["cluster1", "cluster2"], timeout=60)
        pool = get_json(s.hub, "inferencepoolimport", "iris", "-n", s.ns)
        owner = get_json(s.hub, "mcisvc", "iris", "-n", s.ns)["metadata"]["uid"]
        assert [o["uid"] for o in pool["metadata"]["ownerReferences"]] == [owner]
        (entry,) = pool["status"]["controllers"]
        assert entry["name"] == "modelserving.opendatahub.io/fleet-endpoint"
        assert entry["conditions"][0]["type"] == "Accepted"
        assert entry["conditions"][0]["status"] == "True"
        # Joining, exporting and the work update between did not make either leave and come
        # back: once quiet, nothing more happens.
        writes = manager.wait_quiet(window=4)
        assert manager.writes() == writes
        assert s.members() == ["cluster1", "cluster2"]

    @pytest.mark.needs("test_1_each_serving_cluster_exports_and_one_without_the_api_still_serves")
    def test_2_a_cluster_that_stops_serving_stops_exporting_and_exports_again(
            self, exported: Exported) -> None:
        s = exported
        uid = s.export()["metadata"]["uid"]  # type: ignore[index]
        _kserve_status(s.spoke1, ready=False)
        eventually(lambda: s.members() == ["cluster2"], timeout=60)
        excluded = {x["cluster"]: x["reason"] for x in s.status()["endpoint"]["excluded"]}
        assert excluded == {"cluster1": "NotReady"}
        eventually(lambda: s.export() is None, timeout=60)  # the work agent deleted it
        _kserve_status(s.spoke1, ready=True)
        eventually(lambda: s.members() == ["cluster1", "cluster2"], timeout=60)
        again = eventually(s.export, timeout=60)
        assert again["metadata"]["uid"] != uid

    @pytest.mark.needs("test_1_each_serving_cluster_exports_and_one_without_the_api_still_serves")
    def test_3_a_member_whose_error_ratio_is_out_of_bounds_spills_and_comes_back(
            self, exported: Exported, metrics: Metrics) -> None:
        s = exported
        eventually(lambda: s.members() == ["cluster1", "cluster2"], timeout=60)
        s.hub.kubectl("patch", "mcisvc", "iris", "-n", s.ns, "--type=merge", "-p", json.dumps(
            {"spec": {"endpoint": {"serviceExport": True, "spillover": {
                "metric": "request_error_ratio", "maxValue": 0.1}}}}))
        eventually(lambda: len(metrics.server.query(
            'request_error_ratio{pod=~"iris-.*"}')) == 2, timeout=60)
        metrics.set("cluster1", 0.5)
        started = time.monotonic()
        eventually(lambda: s.members() == ["cluster2"], timeout=60)
        print(f"spilled {time.monotonic() - started:.1f}s after the error ratio rose")
        excluded = {x["cluster"]: x for x in s.status()["endpoint"]["excluded"]}
        assert excluded["cluster1"]["reason"] == "MetricOutOfBounds"
        assert excluded["cluster1"]["message"].startswith("its metric is 0.5, not <= 0.1")
        assert s.entry("cluster1")["ready"] is True  # the model still runs there
        eventually(lambda: s.export() is None, timeout=60)  # and exports no more
        eventually(lambda: s.exporting() == ["cluster2"], timeout=30)
        # (another model's pods fail on both clusters all along: a metric not scoped to this
        # model's own pods would have found both out of bounds, and moved nothing)
        metrics.set("cluster1", 0.02)  # back within bounds: traffic and export again
        eventually(lambda: s.members() == ["cluster1", "cluster2"], timeout=60)
        eventually(s.export, timeout=60)
        eventually(lambda: s.exporting() == ["cluster1", "cluster2"], timeout=30)
        # p99 latency, from the per-model series the chart's recording rule keeps (no pod)
        s.hub.kubectl("patch", "mcisvc", "iris", "-n", s.ns, "--type=merge", "-p", json.dumps(
            {"spec": {"endpoint": {"spillover": {
                "metric": "model_serving:request_predict_seconds:p99", "maxValue": 0.5}}}}))
        metrics.set_p99("cluster2", 2.0)
        eventually(lambda: s.members() == ["cluster1"], timeout=60)
        excluded = {x["cluster"]: x for x in s.status()["endpoint"]["excluded"]}
        assert excluded["cluster2"]["message"].startswith("its metric is 2, not <= 0.5")
        metrics.set_p99("cluster2", 0.1)
        eventually(lambda: s.members() == ["cluster1", "cluster2"], timeout=60)

    @pytest.mark.needs("test_1_each_serving_cluster_exports_and_one_without_the_api_still_serves")
    def test_4_the_export_goes_with_the_model(self, exported: Exported) -> None:
        s = exported
        s.hub.kubectl("delete", "mcisvc", "iris", "-n", s.ns, "--wait=false")
        eventually(lambda: not exists(s.hub, "mcisvc", "iris", "-n", s.ns), timeout=60)
        assert works(s.hub, s.ns, "iris", c.KIND_INFERENCE_SERVICE) == {}
        eventually(lambda: s.export() is None, timeout=60)
        # the hub's garbage collector removes the InferencePoolImport with its owner
        eventually(lambda: s.exporting() is None, timeout=60)
