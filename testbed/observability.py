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

The PodMonitors the agent renders for KServe's predictor pods (when monitoring is enabled) are
translated the same way for the pods the testbed's data plane runs as processes
(:func:`pod_targets`): the pod's labels, annotations and containers become the meta labels
Prometheus' Kubernetes discovery gives a pod, the monitor's relabelings are applied to them as
Prometheus applies them, and the resulting ``podIP:port`` (every served pod's IP is
``127.0.0.1``) is mapped to the loopback port the testbed gave that container port. Pods come
and go, so these targets are rewritten into a file the spoke's server discovers
(``file_sd``) by :class:`PodTargetSync`, every :data:`SCRAPE_INTERVAL`.

The hub server federates each spoke server's ``/federate`` with one ``match[]`` selector per
name of the chart's ACM allowlist (what ACM's metrics collector asks for), adds the
``cluster`` label the collector adds, scrapes the manager, and evaluates the chart's alert
rules (with every ``for`` shortened to :data:`SHORT_FOR` so a test sees alerts fire).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from addon_agent.pure.kserve_plan import SA_TOKEN
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


# PodMonitors ----------------------------------------------------------------------------------

_META_NAME = re.compile(r"[^a-zA-Z0-9_]")


def _sanitized(name: str) -> str:
    return _META_NAME.sub("_", name)


def _expand(replacement: str, match: re.Match[str]) -> str:
    """A relabel ``replacement`` with ``$1`` / ``${1}`` / ``${name}`` filled from ``match``."""
    def group(m: re.Match[str]) -> str:
        key = m.group(1) or m.group(2)
        try:
            return match.group(int(key) if key.isdigit() else key) or ""
        except (IndexError, re.error):
            return ""
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", group, replacement)


def relabel(labels: Mapping[str, str], rules: Sequence[Obj]) -> dict[str, str] | None:
    """``labels`` after ``rules``, as Prometheus relabels a target; None when one drops it.

    Actions ``keep``, ``drop``, ``replace`` and ``labelmap``.

    prometheus-operator's field names (``sourceLabels``, ``targetLabel``) and Prometheus'
    defaults: separator ``;``, regex ``(.*)`` anchored at both ends, replacement ``$1``;
    a replacement that expands to nothing removes the target label.
    """
    out = dict(labels)
    for rule in rules:
        action = str(rule.get("action") or "replace").lower()
        regex = re.compile(str(rule.get("regex", "(.*)")))
        value = str(rule.get("separator", ";")).join(
            out.get(str(name), "") for name in rule.get("sourceLabels") or [])
        match = regex.fullmatch(value)
        if (action == "keep" and match is None) or (action == "drop" and match is not None):
            return None
        if action == "replace":
            target = str(rule["targetLabel"])
            if match is None:
                continue
            result = _expand(str(rule.get("replacement", "$1")), match)
            if result:
                out[target] = result
            else:
                out.pop(target, None)
        elif action == "labelmap":
            for name, label_value in list(out.items()):
                found = regex.fullmatch(name)
                if found:
                    out[_expand(str(rule.get("replacement", "$1")), found)] = label_value
        elif action not in ("keep", "drop"):
            raise TargetError(f"relabel action {action!r} is not translated by the testbed")
    return out


def _selects(selector: Obj, labels: Mapping[str, str]) -> bool:
    if not _matches(selector.get("matchLabels") or {}, labels):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, op, values = expression["key"], expression["operator"], expression.get("values")
        present = key in labels
        if ((op == "Exists" and not present) or (op == "DoesNotExist" and present)
                or (op == "In" and labels.get(key) not in (values or []))
                or (op == "NotIn" and present and labels[key] in (values or []))):
            return False
    return True


def _pod_meta(pod: Obj, container: Obj, port: Obj | None) -> dict[str, str]:
    """The meta labels of Prometheus' ``role: pod`` discovery for one container (port)."""
    meta, status = pod["metadata"], pod.get("status") or {}
    ip = str(status.get("podIP") or "")
    out = {
        "__address__": f"{ip}:{port['containerPort']}" if port else ip,
        "__meta_kubernetes_namespace": str(meta.get("namespace")),
        "__meta_kubernetes_pod_name": str(meta["name"]),
        "__meta_kubernetes_pod_ip": ip,
        "__meta_kubernetes_pod_phase": str(status.get("phase") or ""),
        "__meta_kubernetes_pod_container_name": str(container["name"]),
        "__meta_kubernetes_pod_container_image": str(container.get("image") or ""),
    }
    if port:
        out["__meta_kubernetes_pod_container_port_number"] = str(port["containerPort"])
        out["__meta_kubernetes_pod_container_port_name"] = str(port.get("name") or "")
    for kind, values in (("label", meta.get("labels")), ("annotation", meta.get("annotations"))):
        for key, value in (values or {}).items():
            out[f"__meta_kubernetes_pod_{kind}_{_sanitized(key)}"] = str(value)
            out[f"__meta_kubernetes_pod_{kind}present_{_sanitized(key)}"] = "true"
    return out


def _operator_rules(monitor: Obj, endpoint: Obj) -> list[Obj]:
    """The relabelings prometheus-operator puts before a PodMonitor endpoint's own."""
    rules: list[Obj] = [{"action": "drop", "sourceLabels": ["__meta_kubernetes_pod_phase"],
                         "regex": "(Failed|Succeeded)"}]
    if endpoint.get("port"):
        rules.append({"action": "keep", "regex": str(endpoint["port"]),
                      "sourceLabels": ["__meta_kubernetes_pod_container_port_name"]})
    elif endpoint.get("portNumber"):
        rules.append({"action": "keep", "regex": str(endpoint["portNumber"]),
                      "sourceLabels": ["__meta_kubernetes_pod_container_port_number"]})
    rules += [
        {"sourceLabels": ["__meta_kubernetes_namespace"], "targetLabel": "namespace"},
        {"sourceLabels": ["__meta_kubernetes_pod_container_name"], "targetLabel": "container"},
        {"sourceLabels": ["__meta_kubernetes_pod_name"], "targetLabel": "pod"},
        {"targetLabel": "job", "replacement":
            f"{monitor['metadata']['namespace']}/{monitor['metadata']['name']}"},
    ]
    if endpoint.get("port"):
        rules.append({"targetLabel": "endpoint", "replacement": str(endpoint["port"])})
    return rules


def pod_targets(objects: Iterable[Obj], ports: Mapping[tuple[str, str], Mapping[int, int]]
                ) -> list[Target]:
    """Scrape targets for the PodMonitors among ``objects`` (which also hold the Pods).

    ``ports`` maps (namespace, pod name) of each pod the testbed runs to its container ports
    -> the loopback ports its processes serve them on; other pods (kwok's) run nothing and
    are skipped. A monitor selects pods by label in its namespace or
    ``namespaceSelector`` (``matchNames`` or ``any``); each container (each declared port,
    or the container alone) is relabelled as Prometheus would; a target left whose
    ``podIP:port`` the pod's processes do not serve raises :class:`TargetError` (it would be
    a target down on a real cluster).
    """
    by_kind: dict[str, list[Obj]] = {}
    for obj in objects:
        by_kind.setdefault(str(obj.get("kind")), []).append(obj)
    out: dict[tuple[str, str], Target] = {}
    for monitor in by_kind.get("PodMonitor", []):
        meta, spec = monitor["metadata"], monitor["spec"]
        where = spec.get("namespaceSelector") or {}
        names = where.get("matchNames") or [meta["namespace"]]
        for i, endpoint in enumerate(spec.get("podMetricsEndpoints") or []):
            rules = _operator_rules(monitor, endpoint) + list(endpoint.get("relabelings") or [])
            for pod in by_kind.get("Pod", []):
                pmeta = pod["metadata"]
                key = (str(pmeta.get("namespace")), str(pmeta["name"]))
                if key not in ports or not (where.get("any") or key[0] in names):
                    continue
                if not _selects(spec.get("selector") or {}, pmeta.get("labels") or {}):
                    continue
                for container in pod["spec"].get("containers") or []:
                    for port in container.get("ports") or [None]:
                        labels = _pod_meta(pod, container, port)
                        labels["__metrics_path__"] = str(endpoint.get("path") or "/metrics")
                        labels["__scheme__"] = str(endpoint.get("scheme") or "http")
                        result = relabel(labels, rules)
                        if result is None:
                            continue
                        host, _, number = result["__address__"].rpartition(":")
                        served = ports[key].get(int(number)) if number.isdigit() else None
                        if served is None:
                            raise TargetError(
                                f"PodMonitor {meta['namespace']}/{meta['name']}: pod "
                                f"{key[0]}/{key[1]} is scraped on {result['__address__']}, "
                                f"a port its processes do not serve ({dict(ports[key])})")
                        address = f"{host or '127.0.0.1'}:{served}"
                        target = Target(
                            job=f"podMonitor/{meta['namespace']}/{meta['name']}/{i}",
                            address=address, path=result["__metrics_path__"],
                            labels={k: v for k, v in sorted(result.items())
                                    if not k.startswith("__")},
                            scheme=result["__scheme__"])
                        out.setdefault((target.job, address), target)
    return list(out.values())


def file_sd(found: Sequence[Target]) -> list[Obj]:
    """Prometheus ``file_sd`` target groups for ``found``.

    Their path and scheme are target labels, so one ``file_sd`` scrape job carries them all;
    their ``job`` is the one prometheus-operator gives (``<namespace>/<monitor>``).
    """
    return [{"targets": [t.address],
             "labels": {"job": t.job, **t.labels, "__metrics_path__": t.path,
                        "__scheme__": t.scheme}}
            for t in sorted(found, key=lambda t: (t.job, t.address))]


def file_sd_config(path: Path) -> Obj:
    """A scrape config reading its targets from ``path`` (written by :class:`PodTargetSync`)."""
    return {"job_name": "podmonitors",
            "file_sd_configs": [{"files": [str(path)], "refresh_interval": SCRAPE_INTERVAL}]}


class PodTargetSync:
    """Keeps a spoke server's PodMonitor targets current.

    Every :data:`SCRAPE_INTERVAL`, the spoke's PodMonitors and Pods and the data plane's port
    map go through :func:`pod_targets` into ``path`` (replaced atomically, only when it
    changes).
    """

    def __init__(self, spoke: Any, plane: Any, path: Path, interval: float = 2.0) -> None:
        self.spoke, self.plane, self.path, self.interval = spoke, plane, path, interval
        self.error: str | None = None
        """The last translation error (a monitor leading to a port nothing serves)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"{spoke.name} pod targets")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._written = ""
        self._write([])

    def ports(self) -> dict[tuple[str, str], dict[int, int]]:
        """(namespace, pod) -> container port -> loopback port, of the pods served now."""
        out: dict[tuple[str, str], dict[int, int]] = {}
        for pod in self.plane.pods():
            if pod.runner is not None and not pod.deleting:
                merged: dict[int, int] = {}
                for container in pod.runner.plan.containers:
                    merged.update(container.ports)
                out[(pod.namespace, pod.name)] = merged
        return out

    def sync(self) -> list[Target]:
        """Translate once and write the file; the targets."""
        objects = _items(self.spoke, "podmonitors.monitoring.coreos.com,pods")
        try:
            found = pod_targets(objects, self.ports())
            self.error = None
        except TargetError as err:
            self.error = str(err)
            raise
        self._write(found)
        return found

    def _write(self, found: Sequence[Target]) -> None:
        text = json.dumps(file_sd(found), indent=1, sort_keys=True)
        if text != self._written:
            partial = self.path.with_suffix(".tmp")
            partial.write_text(text)
            os.replace(partial, self.path)
            self._written = text

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sync()
            except Exception as err:  # kept for the test to read; retried
                self.error = f"{type(err).__name__}: {err}"

    def start(self) -> PodTargetSync:
        """Sync once now, then in the background."""
        self.sync()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop syncing."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


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

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Obj]:
        """A range query's result matrix (epoch seconds)."""
        result: list[Obj] = self._get("/api/v1/query_range", query=expr, start=str(start),
                                      end=str(end), step=str(step))["result"]
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
    pod_targets: dict[str, PodTargetSync] = dataclasses.field(default_factory=dict)
    """Per spoke with a data plane: its PodMonitors' targets (the model servers)."""

    def stop(self) -> None:
        """Stop every server."""
        for sync in self.pod_targets.values():
            sync.stop()
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
    token = spoke.create_token(name, namespace, "24h")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "token"
    path.write_text(token.strip())
    return path


def allowlist_of(config_map: Obj) -> tuple[list[str], list[Obj]]:
    """The names an ACM allowlist ConfigMap federates, and its recording rules as ACM reads them.

    ACM's metrics collector gets each rule as a JSON argument it formats without escaping
    (``{"name":"<record>","query":"<expr>"}``) and parses back: the rules returned went
    through the same round trip, so an expression ACM could not take fails here too.
    """
    data = config_map["data"]
    names = list(yaml.safe_load(data["uwl_metrics_list.yaml"])["names"])
    rules = (yaml.safe_load(data.get("metrics_list.yaml") or "{}") or {}).get(
        "recording_rules") or []
    recording = []
    for rule in rules:
        arg = '{"name":"' + str(rule["record"]) + '","query":"' + str(rule["expr"]) + '"}'
        parsed = json.loads(arg)
        recording.append({"record": parsed["name"], "expr": parsed["query"]})
    return names, recording


def start_for_fleet(bed: Any, agent_namespace: str, release_namespace: str,
                    addresses: Mapping[str, str]) -> FleetPrometheus:
    """Start a Prometheus per spoke and one on the hub for a running fleet.

    Each spoke's scrapes the agent through its ServiceMonitor and, on a fleet with a data
    plane, the model servers of the pods it runs through the PodMonitors on the spoke
    (:class:`PodTargetSync`), and records the allowlist's recording rules as ACM's metrics
    collector does on each cluster; the hub's federates the allowlist's names and records,
    scrapes the manager through the chart's ServiceMonitor and evaluates the chart's rules
    (the PrometheusRule's: the same aggregates, for the manager's own series, and the
    alerts).

    ``addresses``: ``manager`` and ``<spoke>-agent`` -> the ``host:port`` of their metrics.
    """
    from testbed import chart  # the chart helpers need helm; only this entry point does

    # observability.enabled alone turns the manager's ServiceMonitor on (the chart's default
    # for ACM); the rules are read from the PrometheusRule the chart renders when asked.
    rendered = chart.render("observability.enabled=true", "observability.prometheusRule=true",
                            f"agent.installNamespace={agent_namespace}",
                            namespace=release_namespace)
    by_name = {o["metadata"]["name"]: o for o in rendered if o["kind"] == "ConfigMap"}
    names, recording = allowlist_of(by_name["model-serving-metrics-allowlist"])
    allowlist = names + [rule["record"] for rule in recording]
    collector = [{"name": "acm-metrics-collector-recording-rules", "interval": SCRAPE_INTERVAL,
                  "rules": recording}]
    dashboard = json.loads(by_name["model-serving-dashboard"]["data"]["model-serving.json"])
    rules = next(o for o in rendered if o["kind"] == "PrometheusRule")["spec"]["groups"]
    manager = next(o for o in rendered if o["kind"] == "Deployment")
    spokes: dict[str, Prometheus] = {}
    started: list[Prometheus] = []
    syncs: dict[str, PodTargetSync] = {}
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
            directory = bed.run_dir / "prometheus" / spoke.name
            token = monitoring_token(spoke, directory)
            scrape = scrape_configs(found, {SA_TOKEN: token})
            plane = (getattr(bed, "dataplanes", None) or {}).get(spoke.name)
            if plane is not None:
                syncs[spoke.name] = PodTargetSync(spoke, plane, directory / "pods.json")
                scrape.append(file_sd_config(syncs[spoke.name].path))
            server = Prometheus(f"{spoke.name}-prometheus", directory, bed.log_dir,
                                scrape, collector).start()
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
        for sync in syncs.values():
            sync.start()
    except BaseException:
        for sync in syncs.values():
            sync.stop()
        for server in started:
            server.stop()
        raise
    return FleetPrometheus(hub, spokes, allowlist, dashboard, syncs)
