"""``make demo``: the add-on's whole flow on a local fleet, shown live.

A hub and two managed clusters come up; the manager runs against the hub and one
agent per cluster; ``examples/`` is applied to a hub namespace; the hub status of
every intent is shown as a cluster x object table until every InferenceService is
Ready on both clusters. KServe's real controller runs per cluster (outside it), so
readiness and URLs come from KServe itself. The demo ends with answers: the iris input sent
to each cluster's model through its ingress (V1 and V2), then each cluster's request rate and
latency read back from the hub's Prometheus, federated from a Prometheus per cluster that
scrapes the model servers through the agent's PodMonitor.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from addon_agent.pure.pod_security import NAMESPACE_LABELS
from addon_agent.stacks import KSERVE
from addon_api import constants as c
from addon_api import tenancy
from addon_cli import hub as cli_hub
from addon_cli import views
from testbed import build, chart, identities, upstream, versions
from testbed.cluster import Cluster
from testbed.fleet import Testbed
from testbed.kservepod import release_of
from testbed.paths import cache_dir
from testbed.processes import Process, ProcessFailed, free_port

REPO = Path(__file__).resolve().parent.parent
NAMESPACE = "model-serving-demo"
TARGETS = {NAMESPACE: ["models", "modelmesh-models"]}
"""The namespace policy a hub admin sets for the demo (chart value
``manager.policy.targetNamespaces``): the examples' hub namespace serves into these."""


@dataclass
class Phases:
    """Wall-clock time of each demo phase, printed at the end."""

    started: float = field(default_factory=time.monotonic)
    marks: list[tuple[str, float]] = field(default_factory=list)
    _last: float = field(default_factory=time.monotonic)

    def done(self, name: str) -> None:
        """Record that phase ``name`` just ended."""
        now = time.monotonic()
        self.marks.append((name, now - self._last))
        self._last = now
        print(f"[demo] {name}: {self.marks[-1][1]:.1f}s", flush=True)

    def summary(self) -> str:
        """One line per phase and the total."""
        lines = [f"  {name:<42} {secs:6.1f}s" for name, secs in self.marks]
        lines.append(f"  {'total':<42} {time.monotonic() - self.started:6.1f}s")
        return "\n".join(lines)


def _targets() -> dict[str, frozenset[str]]:
    return {hub: frozenset(spokes) for hub, spokes in TARGETS.items()}


def bundle_dir() -> Path:
    """The KServe/ModelMesh bundles, rendered into the cache once per way of rendering."""
    from addon_agent import bundle_render

    return bundle_render.render_cached(cache_dir() / "bundles")


def rows(hub: Cluster) -> list[views.Row]:
    """Every intent's per-cluster status in the demo namespace.

    Read as the fleet command line (``model-serving-addon status -n model-serving-demo``)
    reads it.
    """
    reader = cli_hub.Hub(str(hub.kubeconfig))
    intents = [i for kind in views.KINDS for i in reader.intents(kind, NAMESPACE)]
    return sorted(views.rows(intents), key=views.sort_key)


def render_table(table: list[views.Row]) -> str:
    """The rows as ``model-serving-addon status`` prints them."""
    return views.status_table(table)


def all_models_ready(table: list[views.Row], clusters: Sequence[str]) -> bool:
    """True when every MultiClusterInferenceService is ready, with a URL, on every cluster."""
    isvc = [r for r in table if r.kind == c.KIND_INFERENCE_SERVICE]
    ready = {(r.name, r.cluster) for r in isvc if r.ready and r.url.startswith("http")}
    names = {r.name for r in isvc}
    return bool(names) and all((n, cl) in ready for n in names for cl in clusters)


RELEASE_NAMESPACE = "model-serving-system"
"""Hub namespace the chart is installed in (the manager's ServiceAccount lives there)."""


def install_chart(bed: Testbed, agent_namespace: str) -> None:
    """``helm install`` the add-on on the hub as a hub admin would; start OCM's add-on manager.

    The chart brings the CRDs, the manager's RBAC (Secrets readable in the demo namespace
    only), the ClusterManagementAddOn and the AddOnTemplate.
    """
    # The demo's StorageConnection reads its Secret there: the manager may read Secrets only
    # in the namespaces listed (a RoleBinding in each, which needs the namespace to exist).
    # The release's namespace enforces Pod Security restricted, as OpenShift's restricted-v2
    # would: the manager's pods must be admitted under it.
    bed.hub.apply_objects([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        restricted_namespace(RELEASE_NAMESPACE),
    ])
    chart.helm(
        "upgrade", "--install", chart.RELEASE, str(chart.CHART),
        "-n", RELEASE_NAMESPACE, "--create-namespace", "--wait=false",
        "--set", f"agent.installNamespace={agent_namespace}",
        "--set", f"manager.secretNamespaces={{{NAMESPACE}}}",
        "--set-json", f"manager.policy.targetNamespaces={json.dumps(TARGETS)}",
        "--set", f"manager.policy.stackOwnerNamespaces={{{NAMESPACE}}}",
        f"--kubeconfig={bed.hub.kubeconfig}",
    )
    bed.hub.wait_crds_established()
    bed.ensure_hub_controller("addon-manager")


def restricted_namespace(name: str) -> dict[str, Any]:
    """A Namespace whose pods Pod Security admission holds to the restricted profile."""
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": dict(NAMESPACE_LABELS)}}


def enable_addon(bed: Testbed, agent_namespace: str) -> dict[str, Path]:
    """Enable the add-on on every spoke; return each spoke's kubeconfig for the agent.

    As ``clusteradm addon enable`` would, then waits until OCM's work agent deployed it.
    The agent's ServiceAccount, RBAC and CRDs reach the spoke the production way: OCM's
    add-on manager renders the chart's AddOnTemplate into a ManifestWork and the work agent
    applies it under the klusterlet's identity. The agent process then uses a token of that
    ServiceAccount (the Deployment OCM deploys runs no container here: kwok fakes its pod).
    """
    for spoke in bed.spokes:  # the agent's pod must be admitted under restricted
        spoke.apply_objects([restricted_namespace(agent_namespace)])
    bed.hub.apply_objects(
        [
            {
                "apiVersion": "addon.open-cluster-management.io/v1alpha1",
                "kind": "ManagedClusterAddOn",
                "metadata": {"name": c.ADDON_NAME, "namespace": spoke.name},
                "spec": {},
            }
            for spoke in bed.spokes
        ]
    )
    out: dict[str, Path] = {}
    deadline = time.monotonic() + 180
    for spoke in bed.spokes:
        while spoke.kubectl(
            "get", "serviceaccount", chart.AGENT_SERVICE_ACCOUNT, "-n", agent_namespace,
            check=False,
        ).returncode != 0:
            bed.check_processes()
            if time.monotonic() > deadline:
                raise ProcessFailed(
                    f"the add-on was not deployed to {spoke.name} within 180 s; see the "
                    f"ManagedClusterAddOn and ManifestWorks in namespace {spoke.name} on the hub"
                )
            time.sleep(0.5)
        spoke.wait_crds_established()
        out[spoke.name] = identities.token_kubeconfig(
            spoke, agent_namespace, chart.AGENT_SERVICE_ACCOUNT,
            spoke.directory / "agent.kubeconfig",
        )
        spoke.identities["model-serving-agent"] = out[spoke.name]
    return out


@contextmanager
def fleet(phases: Phases, agent_namespace: str = c.AGENT_NAMESPACE, spokes: int = 2,
          dataplane: bool = False, status_sync_interval: str = "10s") -> Iterator[Testbed]:
    """The testbed with the add-on installed, the manager and one agent per spoke running.

    Every long-running process has its production identity: the manager the chart's
    ServiceAccount on the hub, each agent the ServiceAccount the AddOnTemplate deploys.
    ``dataplane`` runs the predictor pods of known runtimes as real servers
    (:class:`~testbed.fleet.Testbed`); ``status_sync_interval`` is how often OCM's work agents
    poll what they applied (OCM's default, 10 s;
    :attr:`~testbed.fleet.Testbed.status_sync_interval`).
    """
    build.build_all()
    bundles = bundle_dir()
    phases.done("binaries and bundles ready (cached)")
    keep = os.environ.get("TESTBED_RUN_DIR")  # keep the fleet's files (logs) for a post-mortem
    run_dir = Path(keep) / ("demo" if spokes == 2 else f"demo-{spokes}") if keep else None
    bed = Testbed(spokes=spokes, run_dir=run_dir, dataplane=dataplane,
                  status_sync_interval=status_sync_interval)
    try:
        bed.start()
        phases.done(f"hub + {spokes} managed clusters up")
        install_chart(bed, agent_namespace)
        manager_kubeconfig = identities.token_kubeconfig(
            bed.hub, RELEASE_NAMESPACE, chart.MANAGER_SERVICE_ACCOUNT,
            bed.hub.directory / "manager.kubeconfig",
        )
        bed.hub.identities["manager"] = manager_kubeconfig
        cli = str(Path(sys.executable).with_name("model-serving-addon"))
        # prometheus-operator's CRDs on the spokes, as monitoring-enabled clusters have them:
        # the agents apply their own ServiceMonitor (the testbed's Prometheus reads it).
        for spoke in bed.spokes:
            spoke.apply_files(upstream.prometheus_operator_crds())
            spoke.wait_crds_established()
        manager_port = free_port()
        bed.metrics_addresses["manager"] = f"127.0.0.1:{manager_port}"
        roles = [
            Process(
                "manager",
                [
                    cli,
                    "manager",
                    f"--kubeconfig={manager_kubeconfig}",
                    f"--metrics-port={manager_port}",
                    "--log-format=text",
                    f"--target-namespaces={tenancy.NamespacePolicy(_targets()).render()}",
                    # the examples' ModelServing is the demo admin's, in the demo namespace
                    f"--stack-owner-namespaces={NAMESPACE}",
                    # as the chart's Deployment says: the manager writes the add-on's
                    # AddOnDeploymentConfig (OCM renders no agent before it exists)
                    f"--addon-config={c.ADDON_NAME}-defaults",
                    f"--addon-config-source={c.ADDON_NAME}-agent-config",
                ],
                bed.log_dir,
            ).start()
        ]
        # The agents verify the manager's signatures with the key it publishes in the add-on's
        # AddOnDeploymentConfig (SEAL_VERIFY_KEY, which the AddOnTemplate passes as
        # --seal-verify-key): read it from there, as OCM renders it into the Deployment.
        bed.processes.extend(roles)  # stopped with the testbed from now on
        verify_key = wait_verify_key(bed)
        agent_kubeconfigs = enable_addon(bed, agent_namespace)
        phases.done("add-on installed and enabled on both clusters")
        for spoke in bed.spokes:
            kserve = bed.kserve_controller(spoke)
            agent_port = free_port()
            bed.metrics_addresses[f"{spoke.name}-agent"] = f"127.0.0.1:{agent_port}"
            roles.append(
                Process(
                    f"{spoke.name}-agent",
                    [
                        cli,
                        "agent",
                        f"--kubeconfig={agent_kubeconfigs[spoke.name]}",
                        f"--namespace={agent_namespace}",
                        f"--bundle-dir={bundles}",
                        f"--metrics-port={agent_port}",
                        "--metrics-address=127.0.0.1",
                        f"--cluster-name={spoke.name}",
                        f"--seal-verify-key={verify_key}",
                        # no --target-namespaces: the manager delivers the policy
                    ],
                    bed.log_dir,
                    # KServe's controller runs on this machine, outside the spoke: the agent
                    # points the webhooks there (development-only settings, from the environment).
                    env={**build.agent_runtime_env(), **kserve.agent_env()},
                ).start()
            )
        bed.processes.extend(roles[1:])
        phases.done("manager and agents started")
        yield bed
    finally:
        bed.stop()


def wait_verify_key(bed: Testbed, timeout: float = 90) -> str:
    """The seal verify key the manager published in the chart's AddOnDeploymentConfig."""
    deadline = time.monotonic() + timeout
    while True:
        proc = bed.hub.kubectl(
            "get", "addondeploymentconfig", f"{c.ADDON_NAME}-defaults", "-n", RELEASE_NAMESPACE,
            "-o", "jsonpath={.spec.customizedVariables[?(@.name=='SEAL_VERIFY_KEY')].value}",
            check=False,
        )
        if proc.returncode == 0 and proc.stdout.strip():
            return str(proc.stdout.strip())
        bed.check_processes()
        if time.monotonic() > deadline:
            raise ProcessFailed(
                f"the manager did not publish its seal verify key within {timeout:.0f} s"
            )
        time.sleep(0.5)


def public_model(name: str) -> dict[str, Any]:
    """The example MultiClusterInferenceService as ``name``, on KServe's public sklearn sample.

    KServe's built-in runtime serves it; no overrides, no StorageConnection.
    """
    base: dict[str, Any] = yaml.safe_load((REPO / "examples" / "inferenceservice.yaml").read_text())
    base["metadata"]["name"] = name
    spec = base["spec"]
    spec.pop("overrides")
    spec.pop("storageConnections")
    model = spec["template"]["predictor"]["model"]
    model["storageUri"] = "gs://kfserving-examples/models/sklearn/1.0/model"
    model.pop("runtime")
    return base


FLEET_CONNECTION = "fleet-s3"
"""The StorageConnection to the fleet's own S3 server (a fleet with a data plane)."""
MODEL_PATH = "sklearn/iris"
"""Where the testbed's trained iris model is in the fleet's S3 bucket."""


def s3_connection(bed: Testbed, name: str = FLEET_CONNECTION,
                  secret_key: str | None = None) -> list[dict[str, Any]]:
    """The examples' S3 Secret and StorageConnection, for the fleet's S3 server.

    The credentials only work there; ``secret_key`` replaces the real secret (a wrong one).
    """
    assert bed.s3 is not None, "a fleet with a data plane has an S3 server"
    docs = list(yaml.safe_load_all((REPO / "examples" / "storageconnection.yaml").read_text()))
    secret = next(d for d in docs if d["kind"] == "Secret")
    connection = next(d for d in docs if d["kind"] == "StorageConnection")
    secret["metadata"] = {"name": f"{name}-credentials", "namespace": NAMESPACE}
    secret["stringData"] = {
        "AWS_ACCESS_KEY_ID": bed.s3.access_key,
        "AWS_SECRET_ACCESS_KEY": bed.s3.secret_key if secret_key is None else secret_key,
    }
    connection["metadata"] = {"name": name, "namespace": NAMESPACE}
    connection["spec"]["secretRef"]["name"] = secret["metadata"]["name"]
    connection["spec"]["s3"]["endpoint"] = bed.s3.endpoint
    return [secret, connection]


def served_inference_service(name: str = "sklearn-iris",
                             connection: str = FLEET_CONNECTION) -> dict[str, Any]:
    """The examples' InferenceService as ``name``, its model read through ``connection``.

    KServe's storage spec: the initializer gets the connection's storage-config entry and
    ``s3://<bucket>/<path>``.
    """
    isvc: dict[str, Any] = yaml.safe_load(
        (REPO / "examples" / "inferenceservice.yaml").read_text())
    isvc["metadata"] = {"name": name, "namespace": NAMESPACE}
    isvc["spec"]["storageConnections"] = [connection]
    model = isvc["spec"]["template"]["predictor"]["model"]
    model.pop("storageUri")
    model["storage"] = {"key": connection, "path": MODEL_PATH}
    return isvc


def apply_examples(hub: Cluster, testbed: Testbed) -> None:
    """Apply every example to the demo namespace (bound to the default cluster set).

    On a fleet with a data plane the model comes from the fleet's S3 server, through a
    StorageConnection with credentials that work only there (the examples' own point at a
    bucket this machine cannot reach).
    """
    testbed.bind_clusterset(NAMESPACE)
    files = ["placement.yaml", "modelserving-kserve.yaml", "servingruntime.yaml"]
    if testbed.s3 is None:
        files[1:1] = ["storageconnection.yaml"]
        files.append("inferenceservice.yaml")
    for name in files:
        hub.kubectl("apply", "-n", NAMESPACE, "-f", str(REPO / "examples" / name))
    if testbed.s3 is not None:
        hub.apply_objects([*s3_connection(testbed), served_inference_service()])


def _routed(ingress: Any, host: str) -> bool:
    """Whether the spoke's ingress routes ``host`` to at least one ready pod."""
    return bool(ingress.routes().get(host))


def predictions(bed: Testbed, name: str = "sklearn-iris") -> list[str]:
    """The iris input sent to the model on each cluster through its ingress, V1 and V2.

    One line per cluster and protocol: the URL host, the answer and its latency. The host is
    the InferenceService's URL on the hub (each cluster's entry).
    """
    from urllib.parse import urlsplit

    from testbed.support.dataplane import IRIS, post_via_ingress, v2_iris
    from testbed.support.waiting import eventually

    out = json.loads(bed.hub.kubectl("get", "mcisvc", name, "-n", NAMESPACE, "-o",
                                     "json").stdout)
    lines = []
    for entry in (out.get("status") or {}).get("clusters") or []:
        cluster, host = entry["cluster"], str(urlsplit(entry.get("url") or "").hostname)
        ingress = bed.ingresses[cluster]
        # The testbed routes the host once it saw the InferenceService's URL on its own watch,
        # which may follow the hub's Ready by a moment.
        eventually(functools.partial(_routed, ingress, host), timeout=30, interval=0.2)
        for protocol, path, body in (
            ("V1", f"/v1/models/{name}:predict", {"instances": IRIS}),
            ("V2", f"/v2/models/{name}/infer", v2_iris()),
        ):
            started = time.monotonic()
            answer, _ = post_via_ingress(ingress.url, host, path, body)
            ms = (time.monotonic() - started) * 1000
            got = answer.get("predictions") if protocol == "V1" else [
                o.get("data") for o in answer.get("outputs") or []]
            lines.append(f"{cluster} {protocol} http://{host} via {ingress.url}: {got} "
                         f"({ms:.0f} ms)")
    return lines


MODEL_PANELS = ("Model requests per second, per cluster", "Model latency p50, per cluster",
                "Model latency p99, per cluster")
"""The dashboard panels the demo reads back from the hub's Prometheus (request rate, p50,
p99 of each model server's own request histogram, per cluster)."""


def traffic_lines(bed: Testbed, servers: Any, name: str = "sklearn-iris",
                  requests: int = 20, timeout: float = 120) -> list[str]:
    """The model's request rate and latency per cluster, as the hub's Prometheus has them.

    Sends ``requests`` V1 predictions to each cluster through its ingress (two rounds: a
    server's histogram has no series before its first request, and a rate needs an increase),
    waits until the hub's Prometheus (``servers``, :func:`testbed.observability.start_for_fleet`)
    counts them for every cluster, then evaluates the chart dashboard's model panels.
    One line per cluster; raises ``TimeoutError`` when the hub never counts them.
    """
    from urllib.parse import urlsplit

    from testbed.support.dataplane import IRIS, post_via_ingress
    from testbed.support.waiting import eventually

    out = json.loads(bed.hub.kubectl("get", "mcisvc", name, "-n", NAMESPACE, "-o",
                                     "json").stdout)
    hosts = {e["cluster"]: str(urlsplit(e.get("url") or "").hostname)
             for e in (out.get("status") or {}).get("clusters") or []}
    selector = f'request_predict_seconds_count{{inferenceservice="{name}"}}'

    def counts() -> dict[str, float]:
        return {r["metric"].get("cluster", ""): float(r["value"][1])
                for r in servers.hub.query(f"sum by (cluster) ({selector})")}

    def send(times: int) -> None:
        for cluster, host in hosts.items():
            eventually(functools.partial(_routed, bed.ingresses[cluster], host), timeout=30,
                       interval=0.2)
            for _ in range(times):
                post_via_ingress(bed.ingresses[cluster].url, host,
                                 f"/v1/models/{name}:predict", {"instances": IRIS})

    send(requests // 2)
    def all_counted() -> dict[str, float]:
        got = counts()
        return got if set(got) >= set(hosts) else {}

    before = eventually(all_counted, timeout=timeout, interval=1)
    send(requests - requests // 2)
    eventually(lambda: all(counts().get(c, 0) > n for c, n in before.items()),
               timeout=timeout, interval=1)
    panels = {p["title"]: p["targets"][0]["expr"] for p in servers.dashboard["panels"]}

    def panel_values() -> dict[str, list[float]]:
        values: dict[str, list[float]] = {c: [] for c in hosts}
        for title in MODEL_PANELS:
            got = {r["metric"].get("cluster", ""): float(r["value"][1])
                   for r in servers.hub.query(panels[title].replace("$cluster", ".*"))
                   if r["metric"].get("inferenceservice") == name}
            for cluster in hosts:
                values[cluster].append(got.get(cluster, float("nan")))
        return values

    def complete() -> dict[str, list[float]] | None:
        values = panel_values()
        return None if any(math.isnan(x) for row in values.values() for x in row) else values

    # The latency panels read the clusters' recorded quantiles, which reach the hub an
    # evaluation and a federation after the counts: wait for them a while, else show nan.
    try:
        values: dict[str, list[float]] | None = eventually(complete, timeout=30, interval=1)
    except AssertionError:
        values = None
    return [f"{cluster}: {rate:.2f} requests/s, p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms"
            f" (request_predict_seconds, the hub's Prometheus)"
            for cluster, (rate, p50, p99) in (values or panel_values()).items()]


def start_kserve_when_stack_ready(testbed: Testbed) -> Callable[[], None]:
    """A poll step starting KServe's controller on each cluster once its stack is Available.

    Once started, the controller follows the release of its Deployment's image by itself (an
    upgrade or downgrade of the stack replaces it, as a kubelet replaces the pod:
    :class:`testbed.kservepod.ReleaseFollower`).
    """

    def step() -> None:
        for spoke in testbed.spokes:
            if "kserve-controller" in spoke.processes:
                continue
            out = spoke.kubectl("get", "servingplatforms", "-o", "json", check=False)
            items = json.loads(out.stdout)["items"] if out.returncode == 0 else []
            if any((i.get("status") or {}).get("phase") == "Available" for i in items):
                version = kserve_release(spoke) or versions.KSERVE
                testbed.start_kserve_controller(spoke, version)
                print(f"[demo] KServe controller started for {spoke.name}", flush=True)

    return step


def kserve_release(spoke: Cluster) -> str:
    """The KServe release of the spoke's controller Deployment image.

    "" when there is none, or its tag is not a release the testbed builds. Read in process
    (``get -o json``).
    """
    out = spoke.kubectl("get", "deployment", "-n", KSERVE.namespace, KSERVE.controller, "-o",
                        "json", check=False)
    return release_of(json.loads(out.stdout)) if out.returncode == 0 else ""


def watch_until_ready(
    bed: Testbed, phases: Phases, timeout: float = 900, say: Callable[[str], None] = print
) -> bool:
    """Show the hub's table whenever it changes until every model is Ready on every cluster.

    Starts KServe's controller on a cluster once its stack is Available (as a cluster's own
    would be). False when ``timeout`` seconds pass first.
    """
    kserve_step = start_kserve_when_stack_ready(bed)
    clusters = [s.name for s in bed.spokes]
    shown = ""
    deadline = time.monotonic() + timeout
    stack_marked = False
    while True:
        bed.check_processes()
        kserve_step()
        if not stack_marked and all("kserve-controller" in s.processes for s in bed.spokes):
            phases.done("KServe stack Available on both clusters")
            stack_marked = True
        table = rows(bed.hub)
        text = render_table(table)
        if text != shown:
            say(f"\n{time.strftime('%H:%M:%S')}\n{text}")
            shown = text
        if all_models_ready(table, clusters):
            phases.done("every InferenceService Ready on both clusters")
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(1)  # the demo's refresh interval, not a wait for a state


def run(exit_when_done: bool, timeout: float = 900) -> int:
    """The demo; returns the process exit code."""
    phases = Phases()
    try:
        with fleet(phases, dataplane=True) as bed:
            apply_examples(bed.hub, bed)
            phases.done("examples applied on the hub")
            if not watch_until_ready(bed, phases, timeout, say=lambda t: print(t, flush=True)):
                print("[demo] timed out; logs in", bed.log_dir, file=sys.stderr)
                return 1
            print("\n[demo] the iris input, sent to each cluster's model through its ingress:")
            for line in predictions(bed):
                print(f"  {line}", flush=True)
            phases.done("predictions answered on both clusters")
            from testbed import observability

            servers = observability.start_for_fleet(bed, c.AGENT_NAMESPACE, RELEASE_NAMESPACE,
                                                    bed.metrics_addresses)
            try:
                print("\n[demo] more predictions; the model's traffic as the hub's "
                      "Prometheus sees it (federated from each cluster's):")
                for line in traffic_lines(bed, servers):
                    print(f"  {line}", flush=True)
                phases.done("request rate and latency read back on the hub")
                print("\n[demo] done. Phases:\n" + phases.summary())
                if exit_when_done:
                    servers.stop()
                    bed.cleanup()
                    return 0
                print(explore_help(bed))
                print(f"  the hub's Prometheus: http://{servers.hub.address}")
                print("[demo] staying up; Ctrl-C tears everything down", flush=True)
                while True:
                    time.sleep(2)
                    bed.check_processes()
            finally:
                servers.stop()
    except KeyboardInterrupt:
        return 0
    except (ProcessFailed, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or ""
        print(f"[demo] failed: {exc}\n{detail}", file=sys.stderr)
        return 1


def explore_help(bed: Testbed) -> str:
    """What to paste into another terminal to look around (``docs/quickstart.md``).

    First the ``export`` lines the quickstart's commands use: ``HUB`` (the hub's kubeconfig),
    ``VIA`` (each cluster's ingress, for ``predict``; a real cluster's model URL needs none)
    and ``PATH`` (the repository's virtualenv, which holds ``model-serving-addon``).
    """
    hub = bed.hub.kubeconfig
    via = " ".join(f"--via {n}={i.url}" for n, i in bed.ingresses.items())
    lines = [
        "\nExplore, in another terminal (docs/quickstart.md); first paste:",
        f"  export HUB={shlex.quote(str(hub))}",
        *([f"  export VIA={shlex.quote(via)}"] if via else []),
        f"  export PATH={shlex.quote(str(REPO / '.venv' / 'bin'))}:\"$PATH\"",
        "then:",
        f"  kubectl --kubeconfig \"$HUB\" -n {NAMESPACE} get mlfleet",
        "  model-serving-addon status -A --kubeconfig \"$HUB\"",
        f"  kubectl --kubeconfig \"$HUB\" -n {NAMESPACE} get mcisvc sklearn-iris -o yaml",
        "  kubectl --kubeconfig \"$HUB\" get manifestworks -A",
    ]
    for spoke in bed.spokes:
        lines.append(f"  kubectl --kubeconfig {spoke.kubeconfig} -n models get isvc,deploy,pods")
    if via:
        lines.append(f"  model-serving-addon predict mcisvc/sklearn-iris -n {NAMESPACE} "
                     "-f examples/iris-input.json $VIA --kubeconfig \"$HUB\"")
    lines.append(f"Logs: {bed.log_dir}")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    """``python -m testbed demo [--exit]``."""
    return run(exit_when_done="--exit" in argv)
