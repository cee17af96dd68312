"""Real Prometheus servers on the testbed: one per spoke, one on the hub that federates.

Scrape targets are not written by hand: they are translated from the ServiceMonitors the
add-on renders (the agent's own, which the agent applies with the stack when the
ModelServing enables monitoring; the manager's, from the chart), the way prometheus-operator
would: through the Service the monitor selects, the port it names and the Deployment behind
the Service. The testbed runs the manager, the agents and KServe's controller (behind its
kube-rbac-proxy sidecar) as local processes, so the last step maps that Deployment to its
process's real address; a wrong port name, target port or
selector fails the translation (:class:`TargetError`) or finds nothing, as it would leave a
real cluster unscraped.

The hub server federates each spoke server's ``/federate`` with one ``match[]`` selector per
name of the chart's ACM allowlist (what ACM's metrics collector asks for), adds the
``cluster`` label the collector adds, scrapes the manager, and evaluates the chart's alert
rules (with every ``for`` shortened to :data:`SHORT_FOR` so a test sees alerts fire).
"""

from __future__ import annotations

import datetime as dt
import json
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from addon_agent.planning import SA_TOKEN
from addon_agent.stacks import KSERVE
from addon_api.platform import Monitoring
from testbed.build import binary
from testbed.processes import Process, free_port, wait_until

Obj = dict[str, Any]

SCRAPE_INTERVAL = "2s"
"""Scrape and rule evaluation interval of the testbed's servers."""
SHORT_FOR_SECONDS = 6
SHORT_FOR = f"{SHORT_FOR_SECONDS}s"
"""What every alert's ``for`` becomes on the testbed's hub server (promtool tests check the
chart's real durations)."""


class TargetError(RuntimeError):
    """A ServiceMonitor endpoint that does not lead to a metrics port of a known process."""


@dataclass(frozen=True)
class Target:
    """One scrape target derived from a ServiceMonitor endpoint."""

    job: str
    address: str
    path: str
    labels: Mapping[str, str]
    scheme: str = "http"
    bearer_token_file: str = ""
    """The endpoint's ``bearerTokenFile``: a path in Prometheus' pod (its ServiceAccount
    token), which :func:`scrape_configs` maps to a file of the testbed's."""
    insecure_skip_verify: bool = False


def _epoch(rfc3339: str) -> float:
    """Seconds since the epoch of a Prometheus API timestamp (nanoseconds cut to micro)."""
    head, _, frac = rfc3339.rstrip("Z").partition(".")
    stamp = dt.datetime.fromisoformat(head).replace(tzinfo=dt.UTC)
    return stamp.timestamp() + (float(f"0.{frac}") if frac else 0.0)


def _matches(selector: Mapping[str, str], labels: Mapping[str, str] | None) -> bool:
    labels = labels or {}
    return all(labels.get(k) == v for k, v in selector.items())


def targets(objects: Iterable[Obj], processes: Mapping[tuple[str, str], str]) -> list[Target]:
    """Scrape targets for the ServiceMonitors among ``objects``.

    ``objects`` also hold the Services and Deployments the monitors lead to; ``processes``
    maps (namespace, Deployment name) to the ``host:port`` the testbed's process for that
    Deployment serves its metrics on. A monitor leads through the Services it selects (by
    label, in its namespace or ``namespaceSelector.matchNames``) and the port its endpoint
    names to the Deployment whose pods those Services select. That port's ``targetPort``
    must be the port the process serves (a number: the agent renders its own
    ``--metrics-port``) or name a port its container declares (the chart's manager).
    Monitors that lead to no Deployment in ``processes`` are skipped (workloads the
    testbed runs no process for); one that leads to such a Deployment but not to its
    metrics raises :class:`TargetError`.
    """
    by_kind: dict[str, list[Obj]] = {}
    for obj in objects:
        by_kind.setdefault(str(obj.get("kind")), []).append(obj)
    out: list[Target] = []
    for monitor in by_kind.get("ServiceMonitor", []):
        meta, spec = monitor["metadata"], monitor["spec"]
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        names = (spec.get("namespaceSelector") or {}).get("matchNames") or [meta["namespace"]]
        for i, endpoint in enumerate(spec.get("endpoints") or []):
            leads: list[tuple[Obj, Obj, str]] = []
            for service in by_kind.get("Service", []):
                smeta = service["metadata"]
                if smeta.get("namespace") not in names or not _matches(
                        selector, smeta.get("labels")):
                    continue
                for deployment in by_kind.get("Deployment", []):
                    dmeta = deployment["metadata"]
                    key = (str(dmeta.get("namespace")), str(dmeta["name"]))
                    pod = deployment["spec"]["template"]
                    if key not in processes or dmeta.get("namespace") != smeta.get("namespace"):
                        continue
                    if _matches(service["spec"].get("selector") or {},
                                pod["metadata"].get("labels")):
                        leads.append((service, pod, processes[key]))
            # Like prometheus-operator: a selected Service without the endpoint's port is
            # not scraped; one that has it must lead to the process's metrics.
            named = [lead for lead in leads if _has_port(lead[0], endpoint.get("port"))]
            if leads and not named:
                raise TargetError(
                    f"ServiceMonitor {meta['namespace']}/{meta['name']}: no selected Service "
                    f"({', '.join(sorted(s['metadata']['name'] for s, _, _ in leads))}) has a "
                    f"port named {endpoint.get('port')!r}")
            out.extend(_target(monitor, i, endpoint, service, pod, address)
                       for service, pod, address in named)
    return out


def _has_port(service: Obj, name: Any) -> bool:
    return any(p.get("name") == name for p in service["spec"].get("ports") or [])


def _target(monitor: Obj, index: int, endpoint: Obj, service: Obj, pod: Obj,
            address: str) -> Target:
    where = f"ServiceMonitor {monitor['metadata']['namespace']}/{monitor['metadata']['name']}"
    port_name = endpoint.get("port")
    ports = [p for p in service["spec"].get("ports") or [] if p.get("name") == port_name]
    if not ports:
        raise TargetError(f"{where}: Service {service['metadata']['name']} has no port "
                          f"named {port_name!r}")
    target_port = ports[0].get("targetPort", ports[0].get("port"))
    served = int(address.rsplit(":", 1)[1])
    declared = {p.get("name") for c in pod["spec"].get("containers") or []
                for p in c.get("ports") or [] if p.get("name")}
    if target_port != served and target_port not in declared:
        raise TargetError(
            f"{where}: target port {target_port!r} of Service {service['metadata']['name']} "
            f"is neither the port the process serves ({served}) nor a named container port "
            f"({sorted(declared)})")
    return Target(
        job=f"{monitor['metadata']['namespace']}/{monitor['metadata']['name']}/{index}",
        address=address, path=str(endpoint.get("path") or "/metrics"),
        labels={"namespace": str(service["metadata"]["namespace"]),
                "service": str(service["metadata"]["name"])},
        scheme=str(endpoint.get("scheme") or "http"),
        bearer_token_file=str(endpoint.get("bearerTokenFile") or ""),
        insecure_skip_verify=bool((endpoint.get("tlsConfig") or {}).get("insecureSkipVerify")),
    )


def scrape_configs(found: Sequence[Target], token_files: Mapping[str, Path] | None = None
                   ) -> list[Obj]:
    """Prometheus ``scrape_configs`` for ``found``.

    ``token_files`` maps a ``bearerTokenFile`` path of Prometheus' pod to the testbed file
    holding that ServiceAccount's token; an endpoint whose token file is not mapped raises
    :class:`TargetError` (it would be scraped without credentials and refused).
    """
    out: list[Obj] = []
    for t in found:
        config: Obj = {
            "job_name": t.job,
            "scheme": t.scheme,
            "metrics_path": t.path,
            "static_configs": [{"targets": [t.address], "labels": dict(t.labels)}],
        }
        if t.bearer_token_file:
            local = (token_files or {}).get(t.bearer_token_file)
            if local is None:
                raise TargetError(f"{t.job}: no token for bearerTokenFile {t.bearer_token_file}")
            config["authorization"] = {"credentials_file": str(local)}
        if t.insecure_skip_verify:
            config["tls_config"] = {"insecure_skip_verify": True}
        out.append(config)
    return out


def federation_config(spokes: Mapping[str, str], names: Sequence[str]) -> list[Obj]:
    """Scrape configs that federate ``names`` from each spoke server (cluster -> address).

    Each is labelled with its cluster, as ACM's metrics collector does.
    """
    return [{
        "job_name": f"federate-{cluster}",
        "honor_labels": True,
        # Stamped at the hub's scrape, so a series that stops arriving goes stale at once
        # (Prometheus never marks samples with their own timestamps stale; they would linger
        # for the 5-minute lookback, as they do in ACM's Thanos between collections).
        "honor_timestamps": False,
        "metrics_path": "/federate",
        "params": {"match[]": [f'{{__name__="{name}"}}' for name in names]},
        "static_configs": [{"targets": [address], "labels": {"cluster": cluster}}],
    } for cluster, address in sorted(spokes.items())]


def shorten_for(groups: list[Obj], duration: str = SHORT_FOR) -> list[Obj]:
    """The rule groups with every alert's ``for`` set to ``duration``."""
    out: list[Obj] = json.loads(json.dumps(groups))
    for group in out:
        group["interval"] = SCRAPE_INTERVAL
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = duration
    return out


class Prometheus:
    """One Prometheus server: its configuration and data in ``directory``, a child process."""

    def __init__(self, name: str, directory: Path, log_dir: Path, scrape: list[Obj],
                 rule_groups: list[Obj] | None = None) -> None:
        self.name = name
        self.directory = directory
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        config: Obj = {
            "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
            "scrape_configs": scrape,
        }
        directory.mkdir(parents=True, exist_ok=True)
        if rule_groups is not None:
            (directory / "rules.yaml").write_text(yaml.safe_dump({"groups": rule_groups}))
            config["rule_files"] = [str(directory / "rules.yaml")]
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.process = Process(name, [
            str(binary("prometheus")), f"--config.file={directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address={self.address}", "--log.level=warn",
        ], log_dir)

    def start(self, timeout: float = 60) -> Prometheus:
        """Start the server and wait until it is ready."""
        self.process.start()
        wait_until(f"{self.name} ready", lambda: self._get("/-/ready", raw=True), timeout,
                   watch=[self.process])
        return self

    def stop(self) -> None:
        """Stop the server."""
        self.process.stop()

    def _get(self, path: str, raw: bool = False, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"http://{self.address}{path}{query}", timeout=10) as resp:
            body = resp.read()
        return body if raw else json.loads(body)["data"]

    def query(self, expr: str) -> list[Obj]:
        """An instant query's result vector."""
        result: list[Obj] = self._get("/api/v1/query", query=expr)["result"]
        return result

    def alerts(self) -> list[Obj]:
        """The alerts pending or firing now."""
        alerts: list[Obj] = self._get("/api/v1/alerts")["alerts"]
        return alerts

    def rules(self) -> list[Obj]:
        """Every rule with its health and last evaluation."""
        groups = self._get("/api/v1/rules")["groups"]
        return [rule for group in groups for rule in group["rules"]]

    def evaluated_since(self, since: float) -> bool:
        """Whether every rule was evaluated, without error, after ``since`` (epoch seconds)."""
        rules = self.rules()
        return bool(rules) and all(
            rule["health"] == "ok" and _epoch(rule["lastEvaluation"]) > since for rule in rules)

    def targets(self) -> list[Obj]:
        """The active scrape targets with their health."""
        active: list[Obj] = self._get("/api/v1/targets")["activeTargets"]
        return active


@dataclass
class FleetPrometheus:
    """The servers watching one testbed fleet."""

    hub: Prometheus
    spokes: dict[str, Prometheus]
    allowlist: list[str]
    dashboard: Obj

    def stop(self) -> None:
        """Stop every server."""
        for server in [self.hub, *self.spokes.values()]:
            server.stop()


def _items(cluster: Any, kinds: str) -> list[Obj]:
    out = cluster.kubectl("get", kinds, "-A", "-o", "json").stdout
    items: list[Obj] = json.loads(out)["items"]
    return items


METRICS_READER = "testbed-prometheus-metrics-reader"


def monitoring_token(spoke: Any, directory: Path) -> Path:
    """A token file of the spoke's Prometheus ServiceAccount, with its monitoring access.

    The access is what the cluster's monitoring stack gives that account (kube-prometheus'
    and OpenShift's ``prometheus-k8s`` may ``get`` the ``/metrics`` URL of any component
    behind kube-rbac-proxy); the add-on grants none of it. The account is the one the
    ModelServing's ``monitoring`` names by default.
    """
    namespace, name = Monitoring(enabled=True).prometheus_subject()
    spoke.apply_objects([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": name, "namespace": namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": METRICS_READER},
         "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": METRICS_READER},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": METRICS_READER},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
    ])
    token = spoke.kubectl("create", "token", name, "-n", namespace, "--duration=24h").stdout
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "token"
    path.write_text(token.strip())
    return path


def start_for_fleet(bed: Any, agent_namespace: str, release_namespace: str,
                    addresses: Mapping[str, str]) -> FleetPrometheus:
    """Start a Prometheus per spoke and one on the hub for a running fleet.

    Each spoke's scrapes the agent through its ServiceMonitor; the hub's federates with the
    chart's allowlist, scrapes the manager through the chart's ServiceMonitor and evaluates
    the chart's rules.

    ``addresses``: ``manager`` and ``<spoke>-agent`` -> the ``host:port`` of their metrics.
    """
    from testbed import chart  # the chart helpers need helm; only this entry point does

    rendered = chart.render("serviceMonitor.enabled=true", "observability.enabled=true",
                            f"agent.installNamespace={agent_namespace}",
                            namespace=release_namespace)
    by_name = {o["metadata"]["name"]: o for o in rendered if o["kind"] == "ConfigMap"}
    allowlist = list(yaml.safe_load(
        by_name["observability-metrics-custom-allowlist"]["data"]["uwl_metrics_list.yaml"]
    )["names"])
    dashboard = json.loads(by_name["model-serving-dashboard"]["data"]["model-serving.json"])
    rules = next(o for o in rendered if o["kind"] == "PrometheusRule")["spec"]["groups"]
    manager = next(o for o in rendered if o["kind"] == "Deployment")
    spokes: dict[str, Prometheus] = {}
    started: list[Prometheus] = []
    try:
        for spoke in bed.spokes:
            objects = _items(spoke, "servicemonitors.monitoring.coreos.com,services,deployments")
            processes = {(agent_namespace, "model-serving-agent"): addresses[f"{spoke.name}-agent"]}
            kserve = addresses.get(f"{spoke.name}-kserve-controller")
            if kserve:
                processes[(KSERVE.namespace, KSERVE.controller)] = kserve
            found = targets(objects, processes)
            if not found:
                raise TargetError(f"{spoke.name}: no ServiceMonitor leads to the agent")
            token = monitoring_token(spoke, bed.run_dir / "prometheus" / spoke.name)
            server = Prometheus(f"{spoke.name}-prometheus", bed.run_dir / "prometheus" /
                                spoke.name, bed.log_dir,
                                scrape_configs(found, {SA_TOKEN: token})).start()
            started.append(server)
            spokes[spoke.name] = server
        manager_targets = targets(rendered, {
            (release_namespace, manager["metadata"]["name"]): addresses["manager"]})
        if not manager_targets:
            raise TargetError("no ServiceMonitor of the chart leads to the manager")
        hub = Prometheus(
            "hub-prometheus", bed.run_dir / "prometheus" / "hub", bed.log_dir,
            federation_config({n: s.address for n, s in spokes.items()}, allowlist)
            + scrape_configs(manager_targets),
            shorten_for(rules),
        ).start()
    except BaseException:
        for server in started:
            server.stop()
        raise
    return FleetPrometheus(hub, spokes, allowlist, dashboard)
