"""End to end: the mission's flow on the demo's fleet, asserted on hub status as an admin sees it.

What is real: kube-apiservers, etcd, controller-managers, schedulers, OCM registration,
placement and work agents, our manager and agents, KServe's own controller (run outside each
cluster, webhooks included). What is not: containers never run (kwok marks pods Running and
Ready), so a model is "Ready" when KServe's controller says so, without loading any model.

The progressive rollouts (issue 17, test_rollout.py) run on the same fleet before this module,
which ends by removing the stack and stopping an agent.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from addon_agent.stacks import KSERVE
from addon_api import tenancy
from testbed import demo, identities, observability, upstream
from testbed.fleet import Testbed
from testbed.processes import free_port
from testbed.support import fleetcli
from testbed.support.manager import differences
from testbed.support.waiting import eventually, on_fleet

NS = demo.NAMESPACE
GROUP = "modelserving.opendatahub.io"
AGENT_NS = "model-serving-agent"
"""The chart's ``agent.installNamespace`` on the shared demo fleet (``DEMO_AGENT_NAMESPACE``
in ``tests/conftest.py``): not the default (the demo uses that)."""


@dataclass
class DemoRun:
    """What the demo's own flow showed on this fleet (``make demo`` minus its process)."""

    phases: demo.Phases
    tables: list[str] = field(default_factory=list)
    ready: bool = False
    seconds: float = 0.0


@pytest.fixture(scope="module")
def demo_run() -> DemoRun:
    return DemoRun(demo.Phases())


@pytest.fixture(scope="module")
def fleet(testbed: Testbed, demo_run: DemoRun) -> tuple[Testbed, Callable[[], None]]:
    """The shared demo fleet (``tests/conftest.py``: the agents in :data:`AGENT_NS`), every
    example applied. The progressive rollouts ran on it before (``test_rollout``) and put
    back what they changed; this module is the fleet's last: it removes the stack and stops
    an agent."""
    demo.apply_examples(testbed.hub, testbed)
    demo_run.phases.done("examples applied on the hub")
    return testbed, demo.start_kserve_when_stack_ready(testbed)


@pytest.fixture(scope="module")
def prometheus(
    fleet: tuple[Testbed, Callable[[], None]],
) -> Iterator[observability.FleetPrometheus]:
    """Real Prometheus servers watching the fleet: one per spoke, the hub's federating."""
    bed, _ = fleet
    servers = observability.start_for_fleet(bed, AGENT_NS, demo.RELEASE_NAMESPACE,
                                            bed.metrics_addresses)
    yield servers
    servers.stop()


MODEL_SERVER_SERIES = re.compile(
    r"request_predict_seconds|rest_server_request|rest_infer_duration|model_infer_request")
"""The model servers' series, and the quantiles recorded from them (the dashboard's model
panels): none on this fleet, whose predictor pods kwok fakes."""


def _status_without_token(url: str) -> int:
    """The HTTP status of an anonymous GET (the proxy's certificate is not checked)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, context=context, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def _firing(server: observability.Prometheus) -> list[dict[str, Any]]:
    return [a for a in server.alerts() if a["state"] == "firing"]


def _until(
    fleet: tuple[Testbed, Callable[[], None]], check: Callable[[], Any], timeout: float = 240
) -> Any:
    return on_fleet(*fleet, check, timeout)


def _intent(hub: Any, plural: str, name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(
        hub.kubectl("get", plural, name, "-n", NS, "-o", "json").stdout
    )
    return out


def _clusters(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["cluster"]: e for e in (obj.get("status") or {}).get("clusters") or []}


def test_demo_flow_shows_every_model_ready_with_urls(
    fleet: tuple[Testbed, Callable[[], None]], demo_run: DemoRun
) -> None:
    """What ``make demo`` does after its fleet is up (the same code: demo.watch_until_ready)
    reaches its end: the last table shows both clusters' URLs."""
    bed, _ = fleet
    started = time.monotonic()
    demo_run.ready = demo.watch_until_ready(
        bed, demo_run.phases, timeout=300, say=demo_run.tables.append
    )
    demo_run.seconds = time.monotonic() - started
    print(f"models Ready on both clusters after {demo_run.seconds:.1f}s")
    print(demo_run.phases.summary())
    assert demo_run.ready, "\n".join(demo_run.tables[-2:])
    last = demo_run.tables[-1]
    assert last.count("http://sklearn-iris-models.") == 2, last
    assert [name for name, _ in demo_run.phases.marks][-2:] == [
        "KServe stack Available on both clusters",
        "every InferenceService Ready on both clusters",
    ]


def test_stack_then_model_ready_on_both_clusters_with_urls(
    fleet: tuple[Testbed, Callable[[], None]],
) -> None:
    bed, _ = fleet
    msv = _intent(bed.hub, "modelservings", "kserve")
    assert {cl: e["phase"] for cl, e in _clusters(msv).items()} == {
        "cluster1": "Available",
        "cluster2": "Available",
    }
    isvc = _intent(bed.hub, "multiclusterinferenceservices", "sklearn-iris")
    assert isvc["status"]["summary"]["readyText"] == "2/2"
    for entry in _clusters(isvc).values():
        assert entry["ready"] is True
        assert entry["url"].startswith("http://sklearn-iris-models.")
    conditions = {c["type"]: c["status"] for c in isvc["status"]["conditions"]}
    assert conditions["Ready"] == "True"


def test_hub_prometheus_federates_the_fleet_and_a_healthy_fleet_fires_no_alert(
    fleet: tuple[Testbed, Callable[[], None]], prometheus: observability.FleetPrometheus,
) -> None:
    """Targets come from the ServiceMonitors the agent and the chart render; the hub gets
    each cluster's metrics through /federate with the allowlist's selectors; every rule
    evaluates; with the models Ready no alert fires (each ``for`` is seconds here); every
    dashboard panel shows data."""
    hub = prometheus.hub
    bed, _ = fleet
    for name, spoke in prometheus.spokes.items():
        # The agent, and KServe's controller through kube-rbac-proxy (HTTPS, the monitoring
        # ServiceAccount's token reviewed by the spoke's API server).
        eventually(lambda spoke=spoke: sorted(t["labels"]["service"] for t in spoke.targets()
                                              if t["health"] == "up")
                   == ["kserve-controller-manager-metrics-service",
                       "model-serving-agent-metrics"], timeout=60)
        print(f"{name}: scraping {[t['scrapeUrl'] for t in spoke.targets()]}")
        eventually(lambda spoke=spoke: spoke.query(
            'controller_runtime_reconcile_total{controller="inferenceservice"}'), timeout=30)
        proxy = bed.metrics_addresses[f"{name}-kserve-controller"]
        assert _status_without_token(f"https://{proxy}/metrics") == 401
    eventually(lambda: all(t["health"] == "up" for t in hub.targets())
               and len(hub.targets()) == 3, timeout=60)
    eventually(lambda: {r["metric"]["cluster"] for r in hub.query("model_serving_agent_up")}
               == {"cluster1", "cluster2"}, timeout=60)
    platforms = {(r["metric"]["cluster"], r["metric"]["platform"]): r["value"][1]
                 for r in hub.query("model_serving_platform_ready")}
    assert platforms == {("cluster1", "KServe"): "1", ("cluster2", "KServe"): "1"}, platforms
    # The dashboard's "now" table of stacks: each cluster's platform at its stack version.
    table = next(p for p in prometheus.dashboard["panels"]
                 if p["title"] == "Stack per cluster (now)")
    want = {(cl, "KServe", KSERVE.version, "1") for cl in ("cluster1", "cluster2")}

    def stacks() -> bool:
        got = {(r["metric"]["cluster"], r["metric"]["platform"], r["metric"].get("version", ""),
                r["value"][1])
               for r in hub.query(table["targets"][0]["expr"].replace("$cluster", ".*"))}
        assert got == want, got
        return True

    # Each cluster's series reaches the hub at its own federation scrape: wait for both.
    eventually(stacks, timeout=60)
    # The scraped labels, as prometheus-operator sets them: `namespace` is the scraped pod's
    # (the agent's, the manager's); the model's and the intent's namespaces keep labels of
    # their own, so intents and models of different namespaces never merge in the alerts.
    def labelled(query: str, keys: tuple[str, ...], want: set[tuple[str, ...]]
                 ) -> set[tuple[str, ...]]:
        got = {tuple(r["metric"].get(k, "") for k in keys) for r in hub.query(query)}
        return got if want <= got else set()

    models = eventually(lambda: labelled(
        "model_serving_model_ready", ("cluster", "model_namespace", "namespace", "name"),
        {(cl, "models", AGENT_NS, "sklearn-iris") for cl in ("cluster1", "cluster2")}),
        timeout=30)
    assert all(ns == AGENT_NS for _, _, ns, _ in models), models
    intents = eventually(lambda: labelled(
        "model_serving_intent_clusters_desired", ("intent_namespace", "namespace", "kind", "name"),
        {(NS, demo.RELEASE_NAMESPACE, "MultiClusterInferenceService", "sklearn-iris")}),
        timeout=30)
    assert all(ns == demo.RELEASE_NAMESPACE for _, ns, _, _ in intents), intents
    assert not hub.query('{__name__=~"model_serving_.+", exported_namespace!=""}')
    # Every rule evaluated without error for longer than its (shortened) `for` on this data:
    # an alert whose condition held would be firing by then.
    settled = time.time() + observability.SHORT_FOR_SECONDS + 2
    eventually(lambda: hub.evaluated_since(settled), timeout=60)
    assert _firing(hub) == [], _firing(hub)

    def empty_panels() -> list[tuple[str, dict[str, int]]]:
        out = []
        for panel in prometheus.dashboard["panels"]:
            if MODEL_SERVER_SERIES.search(json.dumps(panel["targets"])):
                # The model servers' own panels: kwok fakes this fleet's predictor pods, so
                # no server exports them here; the data plane's fleet shows them with data
                # (tests/integration/test_dataplane_fleet.py, step 7).
                continue
            got = {t["refId"]: len(hub.query(t["expr"].replace("$cluster", ".*")))
                   for t in panel["targets"]}
            if not any(got.values()):
                out.append((panel["title"], got))
        return out

    def every_panel_shows_data() -> bool:
        empty = empty_panels()
        assert not empty, empty
        return True

    # Per-model gauges are refreshed every 10 s by the agents: allow a few scrapes.
    eventually(every_panel_shows_data, timeout=45)


def test_a_stack_component_down_fires_its_alert_then_heals(
    fleet: tuple[Testbed, Callable[[], None]], prometheus: observability.FleetPrometheus,
) -> None:
    """cluster1's node refuses pods (a NoExecute taint: the pods are evicted and cannot come
    back): the KServe controller is down there, and the hub's Prometheus fires
    ModelServingComponentNotAvailable for cluster1's kserve-controller-manager. Without the
    taint the stack and the model are back, and the alert stops."""
    bed, _ = fleet
    spoke, hub = bed.spokes[0], prometheus.hub
    taint = "testbed.example/down=true:NoExecute"

    def component_alerts() -> set[tuple[str, str]]:
        return {(a["labels"]["cluster"], a["labels"]["component"]) for a in _firing(hub)
                if a["labels"]["alertname"] == "ModelServingComponentNotAvailable"}

    spoke.kubectl("taint", "nodes", "--all", taint)
    tainted = time.monotonic()
    try:
        fired = eventually(component_alerts, timeout=120)
        print(f"components down: {fired}, {time.monotonic() - tainted:.1f}s after the taint")
        assert ("cluster1", "kserve-controller-manager") in fired, fired
        assert all(cluster == "cluster1" for cluster, _ in fired), fired
    finally:
        spoke.kubectl("taint", "nodes", "--all", taint + "-")

    def healed() -> bool:
        msv = _clusters(_intent(bed.hub, "modelservings", "kserve"))
        isvc = _clusters(_intent(bed.hub, "multiclusterinferenceservices", "sklearn-iris"))
        return (msv["cluster1"]["phase"] == "Available" and isvc["cluster1"]["ready"] is True
                and not component_alerts())

    untainted = time.monotonic()
    _until(fleet, healed, timeout=180)
    print(f"healed {time.monotonic() - untainted:.1f}s after the taint went")


KSERVE_DOCS_SKLEARN = """
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: sklearn-iris
spec:
  predictor:
    model:
      modelFormat:
        name: sklearn
      storageUri: gs://kfserving-examples/models/sklearn/1.0/model
"""
"""KServe's documented first InferenceService, as its docs give it: a model format and a
storage URI, no runtime."""


def test_kserve_documented_sklearn_sample_runs_on_the_builtin_runtime(
    fleet: tuple[Testbed, Callable[[], None]],
) -> None:
    """KServe's sklearn sample wrapped in a MultiClusterInferenceService, with no runtime of
    the user's on the clusters: KServe's built-in ClusterServingRuntime serves it on both
    clusters, and the hub shows the URL KServe's controller reports."""
    bed, _ = fleet
    hub = bed.hub
    # The example's own runtime goes first: from here on the built-in ClusterServingRuntime
    # of the same name serves the example model too.
    hub.kubectl("delete", "mcsr", "kserve-sklearnserver", "-n", NS, "--wait=true", timeout=120)

    def no_users_runtime() -> bool:
        for spoke in bed.spokes:
            items = json.loads(
                spoke.kubectl("get", "servingruntimes", "-n", "models", "-o", "json").stdout
            )["items"]
            assert items == [], (spoke.name, [i["metadata"]["name"] for i in items])
        return True

    _until(fleet, no_users_runtime, timeout=120)
    sample = yaml.safe_load(KSERVE_DOCS_SKLEARN)
    name = "sklearn-iris-sample"  # as in the user guide, which shows its URL
    wrapped = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "MultiClusterInferenceService",
        "metadata": {"name": name},
        "spec": {
            "placementRef": {"name": "default"},
            "targetNamespace": "models",
            "template": sample["spec"],
        },
    }
    hub.kubectl("apply", "-n", NS, "-f", "-", input=yaml.safe_dump(wrapped))

    def ready_on_both() -> dict[str, dict[str, Any]]:
        entries = _clusters(_intent(hub, "multiclusterinferenceservices", name))
        ok = set(entries) == {"cluster1", "cluster2"} and all(
            e["ready"] and e.get("url") for e in entries.values()
        )
        return entries if ok else {}

    started = time.monotonic()
    entries = _until(fleet, ready_on_both, timeout=180)
    print(f"KServe's sklearn sample Ready on both clusters after {time.monotonic() - started:.1f}s")
    for spoke in bed.spokes:
        isvc = json.loads(
            spoke.kubectl("get", "isvc", name, "-n", "models", "-o", "json").stdout
        )
        assert "runtime" not in isvc["spec"]["predictor"]["model"]
        # KServe chose the built-in runtime for the format (and the default v1 protocol).
        predictor = json.loads(
            spoke.kubectl(
                "get", "deployments", "-n", "models", "-l",
                f"serving.kserve.io/inferenceservice={name}", "-o", "json",
            ).stdout
        )["items"]
        pods = [d["spec"]["template"]["spec"] for d in predictor]
        images = {c["image"] for pod in pods for c in pod["containers"]}
        assert f"kserve/sklearnserver:{KSERVE.version}" in images, images
        # The hub shows what KServe's controller reports, in the form the user guide gives.
        assert entries[spoke.name]["url"] == isvc["status"]["url"]
        assert isvc["status"]["url"] == f"http://{name}-models.example.com"
    # The example model, which names kserve-sklearnserver, still runs without its MCSR.
    example = _clusters(_intent(hub, "multiclusterinferenceservices", "sklearn-iris"))
    assert all(e["ready"] for e in example.values()), example
    hub.kubectl("delete", "mcisvc", name, "-n", NS)


def _hub_dump(hub: Any) -> list[tuple[str, str]]:
    """(resource, JSON) of every listable object on the hub, the user's Secret excluded."""
    names = hub.kubectl("api-resources", "--verbs=list", "-o", "name").stdout.split()
    dump: list[tuple[str, str]] = []
    for resource in names:
        if resource in ("events", "events.events.k8s.io"):
            continue
        out = hub.kubectl("get", resource, "-A", "-o", "json", check=False)
        if out.returncode != 0:
            continue
        for item in json.loads(out.stdout)["items"]:
            meta = item["metadata"]
            if resource == "secrets" and meta["name"] == "demo-s3-credentials":
                continue
            dump.append(
                (f"{resource} {meta.get('namespace', '')}/{meta['name']}", json.dumps(item))
            )
    return dump


def test_credentials_reach_both_clusters_with_no_plaintext_on_the_hub(
    fleet: tuple[Testbed, Callable[[], None]],
) -> None:
    bed, _ = fleet
    secret = next(
        d
        for d in yaml.safe_load_all((demo.REPO / "examples" / "storageconnection.yaml").read_text())
        if d and d["kind"] == "Secret"
    )
    values = list(secret["stringData"].values())
    needles = values + [base64.b64encode(v.encode()).decode() for v in values]

    def delivered() -> bool:
        conn = _intent(bed.hub, "storageconnections", "demo-s3")
        return {cl: e["phase"] for cl, e in _clusters(conn).items()} == {
            "cluster1": "Delivered",
            "cluster2": "Delivered",
        }

    _until(fleet, delivered)
    dump = _hub_dump(bed.hub)
    assert sum(1 for name, _ in dump if name.startswith("manifestworks")) >= 8
    leaks = [name for name, text in dump for n in needles if n in text]
    assert leaks == [], f"plaintext credentials found in {leaks}"
    # The agents did write them where the stacks read them (on the spokes only).
    for spoke in bed.spokes:
        out = spoke.kubectl("get", "secret", "storage-config", "-n", "models", "-o", "json")
        entries = json.loads(out.stdout)["data"]
        decoded = [json.loads(base64.b64decode(v)) for v in entries.values()]
        assert any(e.get("secret_access_key") == values[1] for e in decoded)
        # Sealed for, and delivered through, the chart's non-default install namespace.
        sealed = json.loads(
            spoke.kubectl("get", "sealedstorageconnections", "-A", "-o", "json").stdout
        )["items"]
        assert {s["metadata"]["namespace"] for s in sealed} == {AGENT_NS}
        addon = json.loads(
            bed.hub.kubectl(
                "get", "managedclusteraddon", "model-serving", "-n", spoke.name, "-o", "json"
            ).stdout
        )
        assert addon["status"]["namespace"] == AGENT_NS


def test_every_long_running_component_has_its_own_identity(
    fleet: tuple[Testbed, Callable[[], None]],
) -> None:
    bed, _ = fleet
    _until(fleet, lambda: all("kserve-controller" in s.processes for s in bed.spokes))
    expected = {
        ("hub", "manager"):
            "system:serviceaccount:model-serving-system:model-serving-addon-manager",
        ("spoke", "model-serving-agent"): f"system:serviceaccount:{AGENT_NS}:model-serving-agent",
        ("spoke", "kserve-controller"): "system:serviceaccount:kserve:kserve-controller-manager",
    }
    clusters = [("hub", bed.hub), *(("spoke", s) for s in bed.spokes)]
    checked = 0
    for role, cluster in clusters:
        for name, kubeconfig in cluster.identities.items():
            info = identities.who_am_i(kubeconfig)
            assert "system:masters" not in info.get("groups", []), (cluster.name, name, info)
            if (role, name) in expected:
                assert info["username"] == expected[(role, name)], info
                checked += 1
    assert checked == 1 + 2 * 2
    # The processes run with exactly those kubeconfigs.
    roles = {p.name: p for p in bed.processes}
    assert f"--kubeconfig={bed.hub.identities['manager']}" in roles["manager"].argv
    for spoke in bed.spokes:
        assert (
            f"--kubeconfig={spoke.identities['model-serving-agent']}"
            in roles[f"{spoke.name}-agent"].argv
        )
        kserve = spoke.processes["kserve-controller"]
        assert (kserve.env or {})["KUBECONFIG"] == str(spoke.identities["kserve-controller"])


def test_the_add_on_pods_are_admitted_where_pod_security_is_restricted(
    fleet: tuple[Testbed, Callable[[], None]],
) -> None:
    """The manager's namespace on the hub and the agent's on every spoke enforce Pod Security
    ``restricted`` (as OpenShift's restricted-v2 would hold them): the chart's pods were
    admitted there, and an unsafe pod is refused."""
    bed, _ = fleet
    places = [(bed.hub, demo.RELEASE_NAMESPACE, "app.kubernetes.io/component=manager"),
              *((s, AGENT_NS, "app.kubernetes.io/name=model-serving-agent") for s in bed.spokes)]
    for cluster, ns, selector in places:
        labels = json.loads(cluster.kubectl("get", "namespace", ns, "-o", "json").stdout)[
            "metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == "restricted", (cluster.name, ns)
        _until(fleet, lambda c=cluster, n=ns, sel=selector: json.loads(c.kubectl(
            "get", "pods", "-n", n, "-l", sel, "-o", "json").stdout)["items"])
        refused = cluster.kubectl("run", "unsafe", "-n", ns, "--image=busybox", "--privileged",
                                  "--restart=Never", check=False)
        assert 'violates PodSecurity "restricted:latest"' in refused.stderr, refused.stderr


def test_an_exposed_model_gets_a_route_where_the_cluster_has_the_route_api(
    fleet: tuple[Testbed, Callable[[], None]],
) -> None:
    """spec.exposure on the demo fleet, where only cluster1 serves OpenShift's Route API (its
    CRD from openshift/api): cluster1 gets the Route to the model's predictor (admitted by the
    test, standing in for the router) and the hub shows its external URL beside the internal
    one; on cluster2 the exposure falls back to none: the model is Ready there and the entry
    says it is not exposed; an override turning the exposure off there ends the work agent's
    retries and the note."""
    bed, _ = fleet
    one = bed.spokes[0]
    host = "iris-route.apps.cluster1.example.com"
    one.apply_files([upstream.route_crd()])
    one.wait_crds_established()
    model = demo.public_model("iris-route")
    model["spec"]["exposure"] = {"type": "Route", "host": host}
    bed.hub.kubectl("apply", "-n", NS, "-f", "-", input=yaml.safe_dump(model))
    try:
        route = _until(fleet, lambda: json.loads(one.kubectl(
            "get", "route", "iris-route", "-n", "models", "-o", "json", check=False).stdout
            or "{}"))
        assert route["spec"]["to"] == {"kind": "Service", "name": "iris-route-predictor",
                                       "weight": 100}
        assert route["spec"]["host"] == host and route["spec"]["tls"]["termination"] == "edge"
        one.kubectl("patch", "route", "iris-route", "-n", "models", "--subresource=status",
                    "--type=merge", "-p", json.dumps({"status": {"ingress": [{
                        "host": host, "routerName": "default", "conditions": [
                            {"type": "Admitted", "status": "True"}]}]}}))

        def exposed() -> dict[str, dict[str, Any]] | None:
            entries = _clusters(_intent(bed.hub, "multiclusterinferenceservices", "iris-route"))
            first, second = entries.get("cluster1", {}), entries.get("cluster2", {})
            ok = (first.get("ready") and first.get("externalUrl") == f"https://{host}"
                  and second.get("ready") and "no Route API" in second.get("message", ""))
            return entries if ok else None

        entries = _until(fleet, exposed, timeout=180)
        print("exposed model:", {k: (e["phase"], e.get("url"), e.get("externalUrl"),
                                     e.get("message", "")) for k, e in entries.items()})
        assert entries["cluster1"]["url"] and entries["cluster1"]["url"] != f"https://{host}"
        assert not entries["cluster2"].get("externalUrl")
        assert entries["cluster2"]["message"] == (
            "not exposed: cluster cluster2 has no Route API (route.openshift.io); the model "
            "serves inside the cluster only")

        model["spec"]["overrides"] = [{"clusterNames": ["cluster2"],
                                       "patch": {"exposure": {"type": "None"}}}]
        bed.hub.kubectl("apply", "-n", NS, "-f", "-", input=yaml.safe_dump(model))

        def quiet() -> dict[str, dict[str, Any]] | None:
            entries = _clusters(_intent(bed.hub, "multiclusterinferenceservices", "iris-route"))
            ok = (len(entries) == 2 and all(e.get("ready") for e in entries.values())
                  and not entries["cluster2"].get("message"))
            return entries if ok else None

        entries = _until(fleet, quiet, timeout=180)
        assert entries["cluster1"]["externalUrl"] == f"https://{host}"
    finally:
        bed.hub.kubectl("delete", "mcisvc", "iris-route", "-n", NS, "--ignore-not-found")
        _until(fleet, lambda: one.kubectl("get", "route", "iris-route", "-n", "models",
                                          check=False).returncode != 0)
        one.kubectl("delete", "crd", "routes.route.openshift.io")


def test_bad_model_shows_kserve_failure_reason_per_cluster(
    fleet: tuple[Testbed, Callable[[], None]], prometheus: observability.FleetPrometheus,
) -> None:
    bed, _ = fleet
    bad = yaml.safe_load((demo.REPO / "examples" / "inferenceservice.yaml").read_text())
    bad["metadata"]["name"] = "bad-model"
    bad["spec"].pop("overrides", None)
    model = bad["spec"]["template"]["predictor"]["model"]
    model["modelFormat"] = {"name": "no-such-format"}
    model.pop("runtime", None)
    bed.hub.kubectl("apply", "-n", NS, "-f", "-", input=yaml.safe_dump(bad))

    def failed_on_both() -> dict[str, dict[str, Any]]:
        entries = _clusters(_intent(bed.hub, "multiclusterinferenceservices", "bad-model"))
        if set(entries) != {"cluster1", "cluster2"}:
            return {}
        if not all(e["phase"] == "Failed" for e in entries.values()):
            return {}
        return entries

    entries = _until(fleet, failed_on_both, timeout=180)
    for entry in entries.values():
        # KServe's own words, whether its webhook refused the model or its controller did.
        text = f"{entry.get('reason')} {entry.get('message', '')}"
        print(f"bad model on {entry['cluster']}: {text}")
        assert "no-such-format" in text or "NoSupportingRuntime" in text, entry
    # The hub's Prometheus fires the matching alert (its `for` is seconds on the testbed).
    def alerted() -> bool:
        return any(a["labels"]["alertname"] == "ModelServingModelNotReady"
                   and a["labels"].get("name") == "bad-model" for a in _firing(prometheus.hub))

    eventually(alerted, timeout=90)
    print("firing:", [(a["labels"]["alertname"], a["labels"].get("cluster"),
                       a["labels"].get("name")) for a in _firing(prometheus.hub)])
    bed.hub.kubectl("delete", "mcisvc", "bad-model", "-n", NS)



def _fleet_viewer(bed: Testbed) -> Path:
    """A kubeconfig of a ServiceAccount bound to the chart's read-only viewer ClusterRole."""
    hub = bed.hub
    hub.kubectl("create", "serviceaccount", "fleet-viewer", "-n", "default")
    hub.kubectl("create", "clusterrolebinding", "fleet-viewer",
                "--clusterrole=model-serving-addon-viewer",
                "--serviceaccount=default:fleet-viewer")
    return identities.token_kubeconfig(hub, "default", "fleet-viewer",
                                       hub.directory / "fleet-viewer.kubeconfig")


def test_the_fleet_command_line_shows_where_a_model_serves_and_why_not(
    fleet: tuple[Testbed, Callable[[], None]], tmp_path: Path,
) -> None:
    bed, _ = fleet
    admin = bed.hub.kubeconfig
    # A model that cannot run on cluster2 (its override names a runtime that does not exist
    # there), and one on a Placement that selects cluster1 only (by a label).
    half = yaml.safe_load((demo.REPO / "examples" / "inferenceservice.yaml").read_text())
    half["metadata"]["name"] = "half"
    half["spec"].pop("storageConnections")
    half["spec"]["template"]["predictor"]["model"]["storageUri"] = "gs://models/iris"
    half["spec"]["overrides"] = [{"clusterNames": ["cluster2"], "patch": {"template": {
        "predictor": {"model": {"runtime": "no-such-runtime"}}}}}]
    bed.hub.kubectl("label", "managedcluster", "cluster1", "cli-pick=yes", "--overwrite")
    bed.hub.apply_objects([{
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": "cli-pick", "namespace": NS},
        "spec": {"clusterSets": ["default"], "predicates": [{"requiredClusterSelector": {
            "labelSelector": {"matchLabels": {"cli-pick": "yes"}}}}]}}])
    picky = copy.deepcopy(half)
    picky["metadata"]["name"] = "picky"
    picky["spec"]["placementRef"] = {"name": "cli-pick"}
    picky["spec"].pop("overrides")
    for obj in (half, picky):
        bed.hub.kubectl("apply", "-n", NS, "-f", "-", input=yaml.safe_dump(obj))
    # --wait-ready gives up with exit code 1 and says why.
    waited = fleetcli.run(admin, "status", "mcisvc/half", "-n", NS, "--wait-ready",
                          "--timeout=1", "--interval=1")
    print(waited.stdout, waited.stderr)
    assert waited.returncode == 1, waited
    assert "mcisvc/half in model-serving-demo" in waited.stderr

    def settled() -> dict[str, dict[str, Any]] | None:
        rows = fleetcli.json_of(admin, "status", "mcisvc/half", "-n", NS)["items"]
        by = {r["cluster"]: r for r in rows}
        ok = (by.get("cluster1", {}).get("ready") and by.get("cluster2", {}).get("phase")
              == "Failed")
        return by if ok else None

    by = _until(fleet, settled)
    # KServe's own reason for cluster2 (it does not name the runtime it looked for).
    assert by["cluster1"]["url"] and "RuntimeNotRecognized" in by["cluster2"]["detail"], by
    table = fleetcli.run(admin, "status", "-A")
    assert table.returncode == 0 and "\033[" not in table.stdout  # piped: no colour
    print(table.stdout)
    lines = table.stdout.splitlines()
    assert lines[0].split()[:5] == ["KIND", "NAMESPACE", "NAME", "CLUSTER", "PHASE"]
    assert any(line.split()[:4] == ["mcisvc", NS, "half", "cluster2"] for line in lines)
    # explain names KServe's reason on cluster2, and what keeps picky off cluster2.
    why = fleetcli.run(admin, "explain", "mcisvc/half", "--cluster", "cluster2", "-n", NS)
    print(why.stdout)
    assert why.returncode == 0 and "[ok] placement" in why.stdout
    assert "[NO] status" in why.stdout and "RuntimeNotRecognized" in why.stdout
    assert "ManifestWork cluster2/" in why.stdout
    off = fleetcli.run(admin, "explain", "mcisvc/picky", "--cluster", "cluster2", "-n", NS)
    print(off.stdout)
    assert "[NO] placement" in off.stdout and "it lacks cli-pick=yes" in off.stdout
    # render (no hub) gives exactly the hub's work for cluster1's labels; diff shows only what
    # a change would do.
    source = tmp_path / "half.yaml"
    source.write_text(yaml.safe_dump(half))
    labels = json.loads(bed.hub.kubectl("get", "managedcluster", "cluster1", "-o",
                                        "json").stdout)["metadata"]["labels"]
    # The manager's --target-namespaces (the demo's policy): tenants' works have an executor.
    policy = tenancy.NamespacePolicy(
        {hub: frozenset(spokes) for hub, spokes in demo.TARGETS.items()}).render()
    rendered = json.loads(fleetcli.run(
        None, "render", "-f", str(source), "-n", NS, "-o", "json",
        f"--target-namespaces={policy}", f"--agent-namespace={AGENT_NS}",
        "--cluster", "cluster1=" + ",".join(f"{k}={v}" for k, v in labels.items())).stdout)
    assert rendered["spec"]["executor"]  # a tenant's work, applied as its executor
    print(fleetcli.run(None, "render", "-f", str(source), "-n", NS, "--cluster", "cluster1",
                       f"--target-namespaces={policy}", f"--agent-namespace={AGENT_NS}").stdout)
    on_hub = json.loads(bed.hub.kubectl("get", "manifestwork", rendered["metadata"]["name"],
                                        "-n", "cluster1", "-o", "json").stdout)
    # The render hash is the manager's hash of the body it wrote: equal, the bodies were
    # byte-identical (the hub's copy may carry the API server's defaults on top).
    assert rendered["metadata"]["annotations"] == on_hub["metadata"]["annotations"]
    assert rendered["metadata"]["labels"] == on_hub["metadata"]["labels"]
    assert differences(rendered["spec"], on_hub["spec"]) == []
    same = fleetcli.run(admin, "diff", "-f", str(source), "-n", NS)
    assert same.returncode == 0 and "no difference on 2 cluster(s)" in same.stdout, same
    half["spec"]["template"]["predictor"]["minReplicas"] = 2
    source.write_text(yaml.safe_dump(half))
    changes = fleetcli.run(admin, "diff", "-f", str(source), "-n", NS)
    print(changes.stdout)
    assert changes.returncode == 1 and changes.stdout.count("+          minReplicas: 2") == 2
    # clusters: both, with the add-on healthy and the KServe stack's version.
    print(fleetcli.run(admin, "clusters").stdout)
    clusters = fleetcli.json_of(admin, "clusters")["items"]
    assert [(r["name"], r["addon"], r["platform"]) for r in clusters] == [
        ("cluster1", "True", "KServe Available"), ("cluster2", "True", "KServe Available")]
    assert all(r["version"] not in ("", "-") for r in clusters), clusters
    # A read-only identity reads everything and changes nothing.
    viewer = _fleet_viewer(bed)
    # (as the kubectl plugin too: kubectl runs kubectl-modelserving from PATH)
    plugin = fleetcli.kubectl_plugin(viewer, "status", "-A")
    assert plugin.returncode == 0 and "sklearn-iris" in plugin.stdout, plugin
    # The viewer reads no ManifestWork (issue 29, item 8): clusters come from the intents'
    # status, explain says the work is not readable, diff names the role that reads works.
    seen = fleetcli.json_of(viewer, "clusters")["items"]
    assert [(r["name"], r["platform"]) for r in seen] == [(r["name"], r["platform"])
                                                          for r in clusters]
    explained = fleetcli.run(viewer, "explain", "mcisvc/half", "--cluster", "cluster2", "-n", NS)
    assert "[NO] status" in explained.stdout
    assert "not readable with your rights" in explained.stdout, explained.stdout
    hidden = fleetcli.run(viewer, "diff", "-f", str(source), "-n", NS)
    assert hidden.returncode == 4 and "model-serving-addon-work-reader" in hidden.stderr, hidden
    refused = fleetcli.run(viewer, "rollout", "pause", "mcisvc/half", "-n", NS)
    assert refused.returncode == 4 and "refused" in refused.stderr, refused
    # No such object, and no hub at all: their own exit codes.
    missing = fleetcli.run(admin, "status", "mcisvc/nope", "-n", NS)
    assert missing.returncode == 5 and "not found" in missing.stderr
    nowhere = tmp_path / "nowhere.kubeconfig"
    config = yaml.safe_load(admin.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    nowhere.write_text(yaml.safe_dump(config))
    unreachable = fleetcli.run(nowhere, "status", "-A", "--request-timeout=3")
    assert unreachable.returncode == 3 and "could not reach the hub" in unreachable.stderr
    for name in ("half", "picky"):
        bed.hub.kubectl("delete", "mcisvc", name, "-n", NS)


def test_cluster_leaving_the_placement_loses_the_model_there_only(
    fleet: tuple[Testbed, Callable[[], None]],
) -> None:
    bed, _ = fleet
    hub = bed.hub
    for spoke in bed.spokes:
        hub.kubectl("label", "managedcluster", spoke.name, "e2e=in", "--overwrite")
    hub.apply_objects(
        [
            {
                "apiVersion": "cluster.open-cluster-management.io/v1beta1",
                "kind": "Placement",
                "metadata": {"name": "e2e", "namespace": NS},
                "spec": {
                    "clusterSets": ["default"],
                    "predicates": [
                        {
                            "requiredClusterSelector": {
                                "labelSelector": {"matchLabels": {"e2e": "in"}}
                            }
                        }
                    ],
                },
            }
        ]
    )
    moving = yaml.safe_load((demo.REPO / "examples" / "inferenceservice.yaml").read_text())
    moving["metadata"]["name"] = "moving"
    moving["spec"]["placementRef"] = {"name": "e2e"}
    hub.kubectl("apply", "-n", NS, "-f", "-", input=yaml.safe_dump(moving))

    def ready_on(clusters: set[str]) -> bool:
        entries = _clusters(_intent(hub, "multiclusterinferenceservices", "moving"))
        return set(entries) == clusters and all(e["ready"] for e in entries.values())

    _until(fleet, lambda: ready_on({"cluster1", "cluster2"}))
    hub.kubectl("label", "managedcluster", "cluster2", "e2e=out", "--overwrite")
    _until(fleet, lambda: ready_on({"cluster1"}))
    summary = _intent(hub, "multiclusterinferenceservices", "moving")["status"]["summary"]
    assert (summary["desired"], summary["ready"]) == (1, 1)
    # The other model, on the default placement, is untouched on cluster2.
    assert (
        _clusters(_intent(hub, "multiclusterinferenceservices", "sklearn-iris"))["cluster2"][
            "ready"
        ]
        is True
    )
    hub.kubectl("delete", "mcisvc", "moving", "-n", NS)


def _log_marks(bed: Testbed) -> dict[str, tuple[Any, int]]:
    """Each agent's log and its size now (what it writes later is checked for tracebacks)."""
    procs = {p.name: p for p in bed.processes}
    return {
        s.name: (procs[f"{s.name}-agent"].log_path,
                 procs[f"{s.name}-agent"].log_path.stat().st_size)
        for s in bed.spokes
    }


def _no_traceback_since(marks: dict[str, tuple[Any, int]]) -> None:
    for cluster, (path, size) in marks.items():
        with path.open("rb") as log:
            log.seek(size)
            text = log.read().decode(errors="replace")
        assert "Traceback" not in text, f"{cluster} agent logged a traceback:\n{text[-3000:]}"


def _nothing_terminating(bed: Testbed) -> bool:
    """No InferenceService, namespace or CRD is stuck Terminating on any spoke."""
    for spoke in bed.spokes:
        for kind in ("namespaces", "customresourcedefinitions"):
            items = json.loads(spoke.kubectl("get", kind, "-o", "json").stdout)["items"]
            if any(i["metadata"].get("deletionTimestamp") for i in items):
                return False
        out = spoke.kubectl("get", "inferenceservices", "-A", "-o", "json", check=False)
        if out.returncode == 0 and json.loads(out.stdout)["items"]:
            return False
    return True


def test_removing_the_stack_under_a_ready_model_is_refused_then_completes_by_itself(
    fleet: tuple[Testbed, Callable[[], None]],
) -> None:
    """Removal rule (hub): managementState Removed under a Ready model is refused per cluster,
    nothing on the spoke touched; once the models and runtimes are deleted it proceeds on its
    own, and no object is left Terminating."""
    bed, _ = fleet
    hub = bed.hub
    marks = _log_marks(bed)
    _until(fleet, lambda: demo.all_models_ready(demo.rows(hub), ["cluster1", "cluster2"]))
    hub.kubectl("patch", "msv", "kserve", "-n", NS, "--type=merge",
                "-p", json.dumps({"spec": {"managementState": "Removed"}}))

    def refused() -> dict[str, Any] | None:
        msv = _intent(hub, "modelservings", "kserve")
        entries = _clusters(msv)
        ok = set(entries) == {"cluster1", "cluster2"} and all(
            (e["phase"], e.get("reason")) == ("RemovalBlocked", "IntentsOnCluster")
            for e in entries.values()
        )
        return msv if ok else None

    msv = _until(fleet, refused, timeout=60)
    intents = [
        f"{kind} {NS}/{name}"
        for kind, plural in (("MultiClusterInferenceService", "mcisvc"),
                             ("MultiClusterServingRuntime", "mcsr"))
        for name in hub.kubectl("get", plural, "-n", NS, "-o",
                                "jsonpath={.items[*].metadata.name}").stdout.split()
    ]
    assert f"MultiClusterInferenceService {NS}/sklearn-iris" in intents
    for entry in _clusters(msv).values():
        for intent in intents:  # every intent still placed there is named
            assert intent in entry["message"], entry
    ready = next(x for x in msv["status"]["conditions"] if x["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "RemovalBlocked")
    for spoke in bed.spokes:  # nothing on the spoke was touched
        platform = json.loads(spoke.kubectl("get", "servingplatforms", "-o", "json").stdout)
        assert [i["spec"]["managementState"] for i in platform["items"]] == ["Managed"]
        isvc = json.loads(
            spoke.kubectl("get", "isvc", "sklearn-iris", "-n", "models", "-o", "json").stdout
        )
        conds = {x["type"]: x["status"] for x in isvc["status"]["conditions"]}
        assert conds["Ready"] == "True", isvc["status"]
    started = time.monotonic()
    hub.kubectl("delete", "mcisvc", "--all", "-n", NS, "--wait=false")
    hub.kubectl("delete", "mcsr", "--all", "-n", NS, "--wait=false")

    def removed() -> bool:
        entries = _clusters(_intent(hub, "modelservings", "kserve"))
        return set(entries) == {"cluster1", "cluster2"} and all(
            e["phase"] == "Removed" for e in entries.values()
        )

    _until(fleet, removed, timeout=240)
    print(f"stack removed {time.monotonic() - started:.1f}s after the models were deleted")
    msv = _intent(hub, "modelservings", "kserve")
    assert msv["metadata"]["name"] == "kserve"  # the intent is kept
    _until(fleet, lambda: _nothing_terminating(bed), timeout=60)
    for spoke in bed.spokes:
        crds = spoke.kubectl("get", "customresourcedefinitions", "-o", "name").stdout
        assert "serving.kserve.io" not in crds, crds
        # The serving namespace still holds the tenant's access grant (its StorageConnection
        # is still placed): kept, grant intact, and the removal says so.
        role = json.loads(spoke.kubectl(
            "get", "roles", "-n", "models", "-o", "json").stdout)["items"]
        assert [r["metadata"]["name"] for r in role] == [tenancy.executor_name(NS)], role
        platform = json.loads(spoke.kubectl("get", "servingplatforms", "-o", "json").stdout)
        message = platform["items"][0]["status"]["message"]
        assert "Namespace models (holds Role models/" in message, message
    _no_traceback_since(marks)


def test_hub_reports_through_kubectl(fleet: tuple[Testbed, Callable[[], None]]) -> None:
    bed, _ = fleet
    out = bed.hub.kubectl("get", "mlfleet", "-n", NS).stdout
    assert "kserve" in out and "demo-s3" in out
    out = bed.hub.kubectl("get", "modelserving", "-n", NS).stdout
    assert "kserve" in out and "demo-s3" not in out
    with pytest.raises(subprocess.CalledProcessError):
        bed.hub.kubectl("get", "msv", "does-not-exist", "-n", NS)


def test_modelmesh_variant_installs_and_reports_its_inference_service(
    fleet: tuple[Testbed, Callable[[], None]],
) -> None:
    """ModelMesh: the stack installs (its controller Deployment becomes Available through kwok)
    and a ModelMesh InferenceService is delivered and reported on the hub. Not real here: no
    ModelMesh controller process runs (upstream is archived; only KServe's runs in the
    testbed), so the model never loads and its hub entry stays Progressing, never Ready."""
    bed, _ = fleet
    hub = bed.hub
    hub.kubectl(
        "patch",
        "msv",
        "kserve",
        "-n",
        NS,
        "--type=merge",
        "-p",
        json.dumps(
            {
                "spec": {
                    "platform": "ModelMesh",
                    "managementState": "Managed",
                    "kserve": None,
                    "modelmesh": {"podsPerRuntime": 1},
                }
            }
        ),
    )

    def available() -> bool:
        entries = _clusters(_intent(hub, "modelservings", "kserve"))
        ok = set(entries) == {"cluster1", "cluster2"} and all(
            e["phase"] == "Available" for e in entries.values()
        )
        assert ok, f"hub entries of the ModelServing: {entries}"
        return ok

    _until(fleet, available, timeout=300)
    mm = yaml.safe_load((demo.REPO / "examples" / "inferenceservice.yaml").read_text())
    mm["metadata"]["name"] = "mm-iris"
    mm["spec"]["deploymentMode"] = "ModelMesh"
    mm["spec"].pop("overrides", None)
    mm["spec"]["template"]["predictor"] = {
        "model": {"modelFormat": {"name": "sklearn"}, "storageUri": "s3://models/sklearn/iris"}
    }
    hub.kubectl("apply", "-n", NS, "-f", "-", input=yaml.safe_dump(mm))

    def reported() -> dict[str, dict[str, Any]]:
        entries = _clusters(_intent(hub, "multiclusterinferenceservices", "mm-iris"))
        ok = set(entries) == {"cluster1", "cluster2"} and all(
            e["phase"] == "Progressing" for e in entries.values()
        )
        assert ok, f"hub entries of mm-iris: {entries}"  # a timeout shows what the hub said
        return entries

    entries = _until(fleet, reported, timeout=180)
    assert not any(e["ready"] for e in entries.values())
    for spoke in bed.spokes:  # delivered with the ModelMesh deployment mode
        isvc = json.loads(
            spoke.kubectl("get", "isvc", "mm-iris", "-n", "models", "-o", "json").stdout
        )
        assert isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "ModelMesh"


def test_deleting_the_model_serving_under_a_model_waits_for_the_model(
    fleet: tuple[Testbed, Callable[[], None]],
) -> None:
    """Removal rule (hub), deletion: DeletionBlocked names the intent and the clusters; the
    deletion completes once the model is deleted. Runs last: the fleet has no stack after."""
    bed, _ = fleet
    hub = bed.hub
    marks = _log_marks(bed)
    _until(fleet, lambda: set(_clusters(_intent(hub, "multiclusterinferenceservices",
                                                 "mm-iris"))) == {"cluster1", "cluster2"})
    hub.kubectl("delete", "msv", "kserve", "-n", NS, "--wait=false")

    def blocked() -> dict[str, Any] | None:
        msv = _intent(hub, "modelservings", "kserve")
        conds = {x["type"]: x for x in (msv.get("status") or {}).get("conditions") or []}
        cond = conds.get("DeletionBlocked")
        return msv if cond and cond.get("reason") == "IntentsOnCluster" else None

    msv = _until(fleet, blocked, timeout=60)
    conds = {x["type"]: x for x in msv["status"]["conditions"]}
    message = conds["DeletionBlocked"]["message"]
    for cluster in ("cluster1", "cluster2"):
        assert f"{cluster}: MultiClusterInferenceService {NS}/mm-iris" in message, message
    assert conds["Ready"]["status"] == "False"
    for spoke in bed.spokes:  # the stack is untouched
        platform = json.loads(spoke.kubectl("get", "servingplatforms", "-o", "json").stdout)
        assert [i["metadata"].get("deletionTimestamp") for i in platform["items"]] == [None]
    hub.kubectl("delete", "mcisvc", "mm-iris", "-n", NS, "--wait=false")

    def gone() -> bool:
        out = hub.kubectl("get", "msv", "kserve", "-n", NS, "-o", "name", check=False)
        return out.returncode != 0 and "NotFound" in out.stderr

    _until(fleet, gone, timeout=240)
    _until(fleet, lambda: _nothing_terminating(bed), timeout=60)
    for spoke in bed.spokes:
        out = spoke.kubectl("get", "servingplatforms", "-o", "name", check=False)
        assert out.stdout.strip() == "", out.stdout
    _no_traceback_since(marks)


def test_an_agent_that_stops_fires_its_alert_on_the_hub(
    fleet: tuple[Testbed, Callable[[], None]], prometheus: observability.FleetPrometheus,
) -> None:
    """Stopping cluster2's agent (last: the fleet is not used after this) fires an agent
    alert for cluster2 alone on the hub's Prometheus: ModelServingAgentMetricsMissing while
    OCM still counts the add-on available there (its metrics stopped reaching the hub), and
    ModelServingAgentUnavailable once OCM sees its lease expire."""
    bed, _ = fleet
    hub = prometheus.hub

    def available() -> set[str]:
        return {r["metric"]["managed_cluster"] for r in hub.query(
            "model_serving_addon_available == 1")}

    eventually(lambda: available() == {"cluster1", "cluster2"}, timeout=90)
    assert not [a for a in _firing(hub) if a["labels"]["alertname"].startswith("ModelServingAgent")]
    agent = next(p for p in bed.processes if p.name == "cluster2-agent")
    agent.stop()

    def alerted() -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for alert in _firing(hub):
            name = alert["labels"]["alertname"]
            if name in ("ModelServingAgentMetricsMissing", "ModelServingAgentUnavailable"):
                out.setdefault(name, set()).add(alert["labels"]["managed_cluster"])
        return out

    fired = eventually(alerted, timeout=90)
    print(f"agent stopped on cluster2: {fired}")
    assert all(clusters == {"cluster2"} for clusters in fired.values()), fired
