"""Dashboard, allowlist and alert rules name only metrics the code exports, and the alert
rules do what they say (``promtool test rules`` on tests/data/alert_rules_test.yaml).

The chart is rendered by helm (the ``observability`` fixture); the code's own families
are checked without it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

import addon_agent.io.metrics
import addon_manager.shell.metrics
from testbed.chart import CHART, render
from testbed.observability import allowlist_of

RULE_TESTS = Path(__file__).parents[1] / "data" / "alert_rules_test.yaml"

METRIC = re.compile(r"\bmodel_serving_[a-z_]+\b")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
MODEL_SERVER_METRICS = {
    # KServe's Python model servers (kserve/metrics.py: a histogram per model_name).
    "request_predict_seconds_bucket": ("kserve", "kserve/metrics.py", '"request_predict_seconds"'),
    "request_predict_seconds_sum": ("kserve", "kserve/metrics.py", '"request_predict_seconds"'),
    "request_predict_seconds_count": ("kserve", "kserve/metrics.py", '"request_predict_seconds"'),
    # MLServer (counters of its data plane, starlette-exporter's histogram of its REST app).
    "model_infer_request_success_total": (
        "mlserver", "mlserver/handlers/dataplane.py", '"model_infer_request_success"'),
    "model_infer_request_failure_total": (
        "mlserver", "mlserver/handlers/dataplane.py", '"model_infer_request_failure"'),
    **{f"rest_server_request_duration_seconds{suffix}": (
        "mlserver", "starlette_exporter/middleware.py", '_request_duration_seconds"')
       for suffix in ("_bucket", "_sum", "_count")},
}
"""Model servers' metrics the chart federates, dashboards and alerts on -> (the server's
virtualenv, the file of the installed package defining it, how it is named there). The
data plane's fleet test scrapes KServe's for real (tests/integration/test_dataplane_fleet.py)."""
NAMED = re.compile(r"\b(model_serving_[a-z_]+|" + "|".join(MODEL_SERVER_METRICS) + r")\b")
RECORD = re.compile(r"\bmodel_serving:[a-z_]+:p\d+\b")
"""The per-cluster aggregates the chart records (the allowlist's recording rules)."""


def _exported() -> set[str]:
    """Sample names our two processes can expose (both modules are imported above)."""
    assert addon_agent.io.metrics and addon_manager.shell.metrics
    names: set[str] = set()
    for family in REGISTRY.collect():
        if family.name.startswith("model_serving_"):
            names.update(family.name + s for s in SUFFIXES.get(family.type, ("",)))
    return names


@pytest.fixture(scope="module")
def observability(built_binaries: Callable[[str], Path]) -> dict[str, Any]:
    """The chart's observability objects by name (rendered by helm)."""
    objs = render("observability.enabled=true", "observability.prometheusRule=true")
    return {o["metadata"]["name"]: o for o in objs if o["kind"] in ("ConfigMap", "PrometheusRule")}


def test_code_exports_the_documented_families() -> None:
    exported = _exported()
    assert "model_serving_platform_ready" in exported
    assert "model_serving_manifestwork_applies_total" in exported
    assert "model_serving_agent_reconcile_duration_seconds_bucket" in exported


def _allowlist(observability: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The allowlist's names, and its recording rules (record -> expression) as ACM's
    collector reads them (:func:`testbed.observability.allowlist_of`)."""
    names, rules = allowlist_of(observability["model-serving-metrics-allowlist"])
    return names, {r["record"]: r["expr"] for r in rules}


def test_allowlist_names_exported_metrics(observability: dict[str, Any]) -> None:
    allow, _ = _allowlist(observability)
    assert len(allow) == len(set(allow)) > 5
    known = _exported() | set(MODEL_SERVER_METRICS)
    assert set(allow) <= known, set(allow) - known
    unbucketed = {m for m in MODEL_SERVER_METRICS if not m.endswith("_bucket")}
    assert unbucketed <= set(allow), unbucketed - set(allow)


def test_histograms_reach_the_hub_as_per_cluster_quantiles_never_as_buckets(
        observability: dict[str, Any]) -> None:
    """No bucket is federated (one series per bucket, cluster and label set): each histogram
    the dashboard or an alert reads arrives as the quantiles the allowlist's recording rules
    make on each cluster, from exported metrics; the PrometheusRule records the same."""
    allow, records = _allowlist(observability)
    assert not [n for n in allow if n.endswith("_bucket")]
    known = _exported() | set(MODEL_SERVER_METRICS)
    for record, expr in records.items():
        assert RECORD.fullmatch(record), record
        used = set(NAMED.findall(expr))
        assert used and all(n.endswith("_bucket") for n in used) and used <= known, (
            record, used)
        assert "cluster" in re.search(r"by \(([^)]*)\)", expr).group(1), record  # type: ignore[union-attr]
    aggregates = observability["model-serving"]["spec"]["groups"][0]
    assert aggregates["name"] == "model-serving-aggregates"
    assert {r["record"]: r["expr"] for r in aggregates["rules"]} == records
    # Every record is read somewhere, and everything read is recorded.
    dashboard = json.dumps(_dashboard(observability))
    rules = json.dumps(observability["model-serving"]["spec"]["groups"][1:])
    read = set(RECORD.findall(dashboard)) | set(RECORD.findall(rules))
    assert read == set(records), read ^ set(records)


def test_the_model_server_metrics_are_the_installed_servers(dataplane: Any) -> None:
    """Each model-server metric of the allowlist is defined, by that name, in the package
    the testbed's model servers run (the virtualenvs of ``python -m testbed build``)."""
    sites = {env: next(Path(program).parents[1].glob("lib/python3*/site-packages"))
             for env, program in (("kserve", dataplane.kserve_python),
                                  ("mlserver", dataplane.mlserver))}
    for name, (env, relative, spelled) in MODEL_SERVER_METRICS.items():
        assert spelled in (sites[env] / relative).read_text(), (name, sites[env] / relative)
    # MLServer names its REST histogram with this prefix (starlette-exporter's "prefix").
    settings = (sites["mlserver"] / "mlserver" / "settings.py").read_text()
    assert 'metrics_rest_server_prefix: str = "rest_server"' in settings


def _dashboard(observability: dict[str, Any]) -> dict[str, Any]:
    from_chart = observability["model-serving-dashboard"]["data"]["model-serving.json"]
    dashboard: dict[str, Any] = json.loads(from_chart)
    assert dashboard == json.loads((CHART / "files" / "grafana-dashboard.json").read_text())
    return dashboard


def test_dashboard_metrics_are_exported_and_federated(observability: dict[str, Any]) -> None:
    names, records = _allowlist(observability)
    panels = _dashboard(observability)["panels"]
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    used = {m for e in exprs for m in NAMED.findall(e)}
    assert used, "the dashboard queries no add-on metric"
    assert used <= _exported() | set(MODEL_SERVER_METRICS), used - _exported()
    assert used <= set(names), f"not federated: {used - set(names)}"
    recorded = {r for e in exprs for r in RECORD.findall(e)}
    assert recorded <= set(records), f"not recorded: {recorded - set(records)}"
    # Per model and cluster: request rate, error ratio, p50 and p99 latency.
    titles = {p["title"] for p in panels}
    assert {"Model requests per second, per cluster", "Model latency p50, per cluster",
            "Model latency p99, per cluster",
            "Model errors: share of failed inference requests, per cluster"} <= titles


def test_dashboard_is_a_well_formed_grafana_dashboard(observability: dict[str, Any]) -> None:
    dash = _dashboard(observability)
    for key in ("uid", "title", "schemaVersion", "panels", "templating", "time"):
        assert key in dash
    assert isinstance(dash["schemaVersion"], int) and dash["schemaVersion"] >= 30
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in dash["templating"]["list"]}
    for panel in dash["panels"]:
        assert panel["type"] in ("timeseries", "stat", "table", "bargauge", "gauge")
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs))
        for target in panel["targets"]:
            for var in re.findall(r"\$(\w+)", target["expr"]):
                assert var in variables, var


def test_alert_rules_use_exported_metrics_in_both_forms(observability: dict[str, Any]) -> None:
    objs = observability
    from_configmap = yaml.safe_load(objs["model-serving-alert-rules"]["data"]["custom_rules.yaml"])
    # ACM's thanos ruler reads the aggregates the collectors federated; the PrometheusRule
    # records them first, from the raw series its hub Prometheus has.
    assert from_configmap["groups"] == objs["model-serving"]["spec"]["groups"][1:]
    _, records = _allowlist(objs)
    rules = [r for g in from_configmap["groups"] for r in g["rules"]]
    assert {r["alert"] for r in rules} >= {
        "ModelServingAgentMetricsAbsent",
        "ModelServingModelNotReady",
        "ModelServingModelErrorRatioHigh",
        "ModelServingModelLatencyHigh",
    }
    known = _exported() | set(MODEL_SERVER_METRICS)
    for rule in rules:
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"]
        used = set(NAMED.findall(rule["expr"]))
        aggregates = set(RECORD.findall(rule["expr"]))
        assert used or aggregates, rule["alert"]
        assert used <= known, (rule["alert"], used - known)
        assert aggregates <= set(records), (rule["alert"], aggregates - set(records))


def _rules_file(observability: dict[str, Any], directory: Path) -> list[str]:
    """The chart's rules written as a Prometheus rule file in ``directory``; the alert names."""
    groups = observability["model-serving"]["spec"]["groups"]
    (directory / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    return [r["alert"] for g in groups for r in g["rules"] if "alert" in r]


def test_alert_rules_pass_their_promtool_tests(
    observability: dict[str, Any], tmp_path: Path, built_binaries: Callable[[str], Path]
) -> None:
    """Every alert fires on the failure it names (not before its ``for``) and stays silent on
    a healthy fleet and for the platform a cluster does not run; every alert has a test."""
    alerts = _rules_file(observability, tmp_path)
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    promtool = str(built_binaries("promtool"))
    check = subprocess.run([promtool, "check", "rules", "rules.yaml"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    run = subprocess.run([promtool, "test", "rules", RULE_TESTS.name], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    tested = {t["alertname"] for case in tests for t in case.get("alert_rule_test", [])}
    fired = {t["alertname"] for case in tests for t in case.get("alert_rule_test", [])
             if t.get("exp_alerts")}
    assert set(alerts) == tested == fired, (set(alerts) ^ tested, set(alerts) - fired)


def test_a_broken_rule_fails_its_promtool_test(
    observability: dict[str, Any], tmp_path: Path, built_binaries: Callable[[str], Path]
) -> None:
    """The rule tests can fail: an absence check on a name the agent does not export fires
    on the healthy fleet."""
    _rules_file(observability, tmp_path)
    rules = yaml.safe_load((tmp_path / "rules.yaml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == "ModelServingAgentMetricsAbsent":
                rule["expr"] = "absent(model_serving_no_such_metric)"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    run = subprocess.run([str(built_binaries("promtool")), "test", "rules", RULE_TESTS.name],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "ModelServingAgentMetricsAbsent" in run.stdout + run.stderr


def test_each_alert_is_an_alert_name_with_a_runbook_entry_it_links_to(
    built_binaries: Callable[[str], Path],
) -> None:
    """Every alert has its entry in docs/troubleshooting.md (AlertName, the alerts family) and,
    with observability.runbookBaseUrl, a runbook_url to that entry's heading."""
    from addon_api.reasons import AlertName

    base = "https://docs.example.com/troubleshooting.md"
    rendered = render("observability.enabled=true", "observability.prometheusRule=true",
                      f"observability.runbookBaseUrl={base}")
    rules = next(o for o in rendered if o["kind"] == "PrometheusRule")["spec"]["groups"]
    alerts = {r["alert"]: r for g in rules for r in g["rules"] if "alert" in r}
    assert set(alerts) == {a.value for a in AlertName}
    doc = (CHART.parents[1] / "docs" / "troubleshooting.md").read_text()
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
               for h in re.findall(r"^#+ (.+)$", doc, re.M)}
    for name, rule in alerts.items():
        url = rule["annotations"]["runbook_url"]
        assert url.startswith(base + "#") and url.split("#")[1] in anchors, (name, url)
