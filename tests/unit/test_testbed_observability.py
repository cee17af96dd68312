"""The testbed's ServiceMonitor -> scrape target translation: a wrong port or flag fails."""

from __future__ import annotations

import copy
import datetime as dt
import json
from typing import Any

import pytest
import yaml

from addon_agent.pure import kserve_plan, planning
from addon_agent.stacks import KSERVE
from testbed import observability as obs

LABELS = {"app.kubernetes.io/name": planning.AGENT_APP}


def _objects(port: int = 24000) -> list[dict[str, Any]]:
    """What the agent renders for itself (monitoring on, --metrics-port=port) and the
    AddOnTemplate's Deployment (container port 8080 as in production)."""
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "model-serving-agent", "namespace": "agents"},
        "spec": {"template": {"metadata": {"labels": LABELS}, "spec": {"containers": [{
            "name": "agent", "args": ["agent", "--metrics-port=8080"],
            "ports": [{"name": "metrics", "containerPort": 8080}]}]}}},
    }
    service, monitor = planning.agent_monitoring("agents", port)
    return [monitor, service, deployment]


PROCESSES = {("agents", "model-serving-agent"): "127.0.0.1:24000"}


def test_the_agents_monitor_leads_to_its_process() -> None:
    [target] = obs.targets(_objects(), PROCESSES)
    assert (target.address, target.path) == ("127.0.0.1:24000", "/metrics")
    config = obs.scrape_configs([target])[0]
    assert config["static_configs"][0]["targets"] == ["127.0.0.1:24000"]


def test_a_wrong_port_name_or_target_port_fails() -> None:
    objs = _objects()
    objs[0]["spec"]["endpoints"][0]["port"] = "http"
    with pytest.raises(obs.TargetError, match="has a port named 'http'"):
        obs.targets(objs, PROCESSES)
    with pytest.raises(obs.TargetError, match="neither the port the process serves"):
        obs.targets(_objects(port=9090), PROCESSES)  # not what the agent listens on
    objs = _objects()
    objs[1]["spec"]["ports"][0]["targetPort"] = "metrics"  # a named container port is fine
    assert len(obs.targets(objs, PROCESSES)) == 1
    objs[1]["spec"]["ports"][0]["targetPort"] = "web"
    with pytest.raises(obs.TargetError, match="named container port"):
        obs.targets(objs, PROCESSES)


def test_monitors_of_workloads_without_a_process_are_skipped() -> None:
    objs = _objects()
    other = copy.deepcopy(objs[1])
    other["metadata"]["labels"] = {"app": "other"}
    objs[1] = other  # the monitor selects no Service
    assert obs.targets(objs, PROCESSES) == []
    assert obs.targets(_objects(), {}) == []


def test_federation_asks_for_each_allowlisted_name_and_labels_the_cluster() -> None:
    [config] = obs.federation_config({"c1": "127.0.0.1:1"}, ["a", "b"])
    assert config["params"]["match[]"] == ['{__name__="a"}', '{__name__="b"}']
    assert config["honor_labels"] is True and config["honor_timestamps"] is False
    assert config["static_configs"] == [{"targets": ["127.0.0.1:1"], "labels": {"cluster": "c1"}}]
    groups = [{"name": "g", "rules": [{"alert": "A", "for": "15m", "expr": "x"}]}]
    assert obs.shorten_for(groups)[0]["rules"][0]["for"] == obs.SHORT_FOR
    assert groups[0]["rules"][0]["for"] == "15m"  # the chart's own stay as they are


def test_prometheus_timestamps_are_read_to_the_microsecond() -> None:
    assert obs._epoch("1970-01-01T00:00:10.5Z") == 10.5
    whole = dt.datetime(2026, 12, 1, 7, 47, 48, tzinfo=dt.UTC).timestamp()
    assert obs._epoch("2026-12-01T07:47:48.296123456Z") == pytest.approx(whole + 0.296123456)
    assert obs._epoch("1970-01-01T00:01:00Z") == 60.0


def test_an_https_endpoint_with_a_token_is_scraped_with_the_monitoring_token(tmp_path: Any
                                                                             ) -> None:
    """The stack's monitor (the agent renders it for KServe's kube-rbac-proxy sidecar):
    HTTPS, the pod's ServiceAccount token, which the testbed maps to a token file."""
    service = {"kind": "Service", "metadata": {
        "name": "kserve-controller-manager-metrics-service", "namespace": "kserve",
        "labels": {"control-plane": "kserve-controller-manager"}},
        "spec": {"selector": {"control-plane": "kserve-controller-manager"},
                 "ports": [{"name": "https", "port": 8443, "targetPort": "https"}]}}
    deployment = {"kind": "Deployment", "metadata": {
        "name": "kserve-controller-manager", "namespace": "kserve"},
        "spec": {"template": {"metadata": {"labels": {
            "control-plane": "kserve-controller-manager"}}, "spec": {"containers": [
                {"name": "kube-rbac-proxy", "ports": [{"name": "https",
                                                        "containerPort": 8443}]}]}}}}
    monitor = kserve_plan.stack_service_monitor(KSERVE, [service])
    assert monitor is not None
    monitor["metadata"]["namespace"] = "kserve"
    processes = {("kserve", "kserve-controller-manager"): "127.0.0.1:25000"}
    # The webhook Service has the same labels but no https port: skipped, as the operator does.
    webhook = copy.deepcopy(service)
    webhook["metadata"]["name"] = "kserve-controller-manager-service"
    webhook["spec"]["ports"] = [{"name": "webhook", "port": 443, "targetPort": 9443}]
    [target] = obs.targets([monitor, webhook, service, deployment], processes)
    assert (target.scheme, target.bearer_token_file) == ("https", kserve_plan.SA_TOKEN)
    with pytest.raises(obs.TargetError, match="no token for bearerTokenFile"):
        obs.scrape_configs([target])
    token = tmp_path / "token"
    [config] = obs.scrape_configs([target], {kserve_plan.SA_TOKEN: token})
    assert config["scheme"] == "https"
    assert config["authorization"] == {"credentials_file": str(token)}
    assert config["tls_config"] == {"insecure_skip_verify": True}


# PodMonitors: the agent's monitor of KServe's predictor pods -> the served pods' processes.


def _predictor(name: str = "iris-predictor-7d9-x", namespace: str = "models",
               annotations: dict[str, str] | None = None, phase: str = "Running",
               ports: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A predictor pod as KServe's controller makes it from the sklearn runtime (the
    runtime's prometheus.kserve.io annotations copied to the pod; no declared port), with
    the status the testbed's kubelet writes."""
    container: dict[str, Any] = {"name": "kserve-container", "image": "kserve/sklearnserver"}
    if ports is not None:
        container["ports"] = ports
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {
            "serving.kserve.io/inferenceservice": "iris", "component": "predictor"},
            "annotations": {"prometheus.kserve.io/port": "8080",
                            "prometheus.kserve.io/path": "/metrics"}
            if annotations is None else annotations},
        "spec": {"containers": [container, {"name": "sidecar", "image": "other"}]},
        "status": {"podIP": "127.0.0.1", "phase": phase},
    }


def _pod_monitor(namespaces: list[str] | None = None) -> dict[str, Any]:
    return kserve_plan.kserve_predictor_pod_monitor(KSERVE, namespaces or ["models"])


def test_the_predictor_pod_monitor_leads_to_the_model_servers_port() -> None:
    ports = {("models", "iris-predictor-7d9-x"): {8080: 41001, 8081: 41002}}
    [target] = obs.pod_targets([_pod_monitor(), _predictor()], ports)
    assert (target.address, target.path, target.scheme) == ("127.0.0.1:41001", "/metrics",
                                                             "http")
    assert target.labels == {"namespace": "models", "pod": "iris-predictor-7d9-x",
                             "container": "kserve-container", "inferenceservice": "iris",
                             "job": "kserve/kserve-predictors"}
    [group] = obs.file_sd([target])
    assert group == {"targets": ["127.0.0.1:41001"], "labels": {
        **target.labels, "__metrics_path__": "/metrics", "__scheme__": "http"}}
    # A declared container port gives the same single target (the annotation's port wins).
    declared = _predictor(ports=[{"containerPort": 8080, "name": "http1"},
                                 {"containerPort": 8081, "name": "grpc"}])
    assert [t.address for t in obs.pod_targets([_pod_monitor(), declared], ports)] == [
        "127.0.0.1:41001"]


def test_the_predictor_pod_monitor_skips_what_it_should_not_scrape() -> None:
    ports = {("models", "p"): {8080: 41001}, ("other", "p"): {8080: 41003}}
    monitor = _pod_monitor()
    assert obs.pod_targets([monitor, _predictor("p", annotations={})], ports) == []
    assert obs.pod_targets([monitor, _predictor("p", phase="Failed")], ports) == []
    assert obs.pod_targets([monitor, _predictor("p", namespace="other")], ports) == []
    assert obs.pod_targets([monitor, _predictor("kwoks")], ports) == []  # runs nothing
    unlabelled = _predictor("p")
    del unlabelled["metadata"]["labels"]["serving.kserve.io/inferenceservice"]
    assert obs.pod_targets([monitor, unlabelled], ports) == []
    anywhere = kserve_plan.kserve_predictor_pod_monitor(KSERVE, [])
    assert len(obs.pod_targets([anywhere, _predictor("p", namespace="other")], ports)) == 1


def test_a_pod_annotated_with_a_port_nothing_serves_fails() -> None:
    """MLServer serves its metrics on 8082, not the 8080 KServe's runtime annotates: the
    predictor's own annotation must say so, or the target would be down."""
    ports = {("models", "p"): {8080: 41001, 8082: 41005}}
    mlserver = _predictor("p", annotations={"prometheus.kserve.io/port": "8082"})
    [target] = obs.pod_targets([_pod_monitor(), mlserver], ports)
    assert target.address == "127.0.0.1:41005"
    wrong = _predictor("p", annotations={"prometheus.kserve.io/port": "9999"})
    with pytest.raises(obs.TargetError, match=r"127\.0\.0\.1:9999, a port its processes do not"):
        obs.pod_targets([_pod_monitor(), wrong], ports)


def test_relabel_follows_prometheus_semantics() -> None:
    labels = {"__address__": "10.0.0.1:80", "a": "x", "b": "y"}
    assert obs.relabel(labels, [{"action": "keep", "sourceLabels": ["a"], "regex": "x|z"}])
    assert obs.relabel(labels, [{"action": "keep", "sourceLabels": ["a"], "regex": "xx?y"}]) \
        is None  # anchored
    assert obs.relabel(labels, [{"action": "drop", "sourceLabels": ["b"], "regex": "y"}]) is None
    out = obs.relabel(labels, [
        {"sourceLabels": ["a", "b"], "targetLabel": "ab", "regex": "(.*);(.*)",
         "replacement": "${2}-$1"},
        {"sourceLabels": ["missing"], "targetLabel": "a"},  # expands to "": removed
        {"action": "labelmap", "regex": "(b)", "replacement": "copy_$1"}])
    assert out == {"__address__": "10.0.0.1:80", "ab": "y-x", "b": "y", "copy_b": "y"}
    with pytest.raises(obs.TargetError, match="hashmod"):
        obs.relabel(labels, [{"action": "hashmod", "targetLabel": "h", "modulus": 2}])


def test_recording_rules_are_read_as_acms_collector_takes_them() -> None:
    """A recording rule reaches the testbed's Prometheus through the JSON argument ACM's
    collector builds without escaping: PromQL's single quotes pass, a double quote fails."""
    def allowlist(expr: str) -> dict[str, object]:
        return {"data": {
            "uwl_metrics_list.yaml": "names: [up]\n",
            "metrics_list.yaml": yaml.safe_dump(
                {"recording_rules": [{"record": "x:y:p99", "expr": expr}]})}}

    names, rules = obs.allowlist_of(allowlist("sum(up{job=~'a.*'})"))
    assert names == ["up"] and rules == [{"record": "x:y:p99", "expr": "sum(up{job=~'a.*'})"}]
    with pytest.raises(json.JSONDecodeError):
        obs.allowlist_of(allowlist('sum(up{job=~"a.*"})'))
