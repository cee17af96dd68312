"""The chart's Grafana dashboard -> the Perses dashboard its picture is drawn from.

Every panel must come through with its queries, legends, unit and place, so that the picture
in docs/metrics.md shows the dashboard ACM loads, not another one.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from testbed import perses

DASHBOARD = Path(__file__).resolve().parents[2] / "charts" / "model-serving-addon" / "files" \
    / "grafana-dashboard.json"
URL = "http://127.0.0.1:9090"


@pytest.fixture(scope="module")
def grafana() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    items = dashboard["spec"]["layouts"][0]["spec"]["items"]
    return [dashboard["spec"]["panels"][i["content"]["$ref"].rsplit("/", 1)[1]] for i in items]


def test_every_panel_keeps_its_kind_queries_legends_and_place(
        grafana: dict[str, Any]) -> None:
    dashboard = perses.perses_dashboard(grafana, URL)
    items = dashboard["spec"]["layouts"][0]["spec"]["items"]
    panels = _panels(dashboard)
    assert len(panels) == len(grafana["panels"]) == 18
    for source, panel, item in zip(grafana["panels"], panels, items, strict=True):
        spec = panel["spec"]
        assert spec["display"]["name"] == source["title"]
        assert spec["plugin"]["kind"] == perses.PANEL_KINDS[source["type"]]
        queries = [q["spec"]["plugin"] for q in spec["queries"]]
        assert [q["kind"] for q in queries] == ["PrometheusTimeSeriesQuery"] * len(queries)
        assert [q["spec"]["query"] for q in queries] == [t["expr"] for t in source["targets"]]
        assert [q["spec"].get("seriesNameFormat") for q in queries] == [
            t.get("legendFormat") for t in source["targets"]]
        pos = source["gridPos"]
        assert (item["x"], item["y"], item["width"], item["height"]) == (
            pos["x"], pos["y"], pos["w"], pos["h"])
    kinds = [p["spec"]["plugin"]["kind"] for p in panels]
    assert (kinds.count("StatChart"), kinds.count("Table"), kinds.count("TimeSeriesChart")) \
        == (2, 2, 14)
    assert perses.grid_rows(dashboard) == 64


def test_tables_show_the_labels_aggregated_by_in_order_then_the_value(
        grafana: dict[str, Any]) -> None:
    """As Grafana shows an instant table; Perses would sort the columns by name and show each
    sample's time among them."""
    columns = {p["spec"]["display"]["name"]: p["spec"]["plugin"]["spec"]["columnSettings"]
               for p in _panels(perses.perses_dashboard(grafana, URL))
               if p["spec"]["plugin"]["kind"] == "Table"}
    tail = [{"name": "value", "header": "Value"}, {"name": "timestamp", "hide": True}]
    assert columns == {
        "Which model serves where (now)": [
            {"name": "cluster"}, {"name": "model_namespace"}, {"name": "name"}, *tail],
        "Stack per cluster (now)": [
            {"name": "cluster"}, {"name": "platform"}, {"name": "version"}, *tail],
    }


def test_units_become_perses_units(grafana: dict[str, Any]) -> None:
    panels = {p["spec"]["display"]["name"]: p["spec"]["plugin"]["spec"]
              for p in _panels(perses.perses_dashboard(grafana, URL))}
    assert panels["Reconcile latency p95"]["yAxis"]["format"] == {"unit": "seconds"}
    assert panels["Failures"]["yAxis"]["format"] == {"unit": "ops/sec"}
    assert panels["Model requests per second, per cluster"]["yAxis"]["format"] == {
        "unit": "requests/sec"}
    assert panels["Model errors: share of failed inference requests, per cluster"][
        "yAxis"]["format"] == {"unit": "percent-decimal"}
    assert panels["Models ready (now)"] == {"calculation": "last-number",
                                            "format": {"unit": "decimal"}}


def test_the_cluster_variable_lists_the_reporting_clusters_and_the_datasource_is_named(
        grafana: dict[str, Any]) -> None:
    spec = perses.perses_dashboard(grafana, URL)["spec"]
    assert spec["variables"] == [{"kind": "ListVariable", "spec": {
        "name": "cluster",
        "display": {"name": "Cluster", "hidden": False},
        "allowAllValue": True, "allowMultiple": True, "defaultValue": "$__all",
        "plugin": {"kind": "PrometheusLabelValuesVariable",
                   "spec": {"labelName": "cluster", "matchers": ["model_serving_agent_up"]}},
    }}]
    assert spec["datasources"] == {"prometheus": {"default": True, "plugin": {
        "kind": "PrometheusDatasource", "spec": {"directUrl": URL}}}}


@pytest.mark.parametrize(("change", "named"), [
    (lambda d: d["panels"][3].update(type="heatmap"), "'Stack per cluster (now)': type 'heatmap'"),
    (lambda d: d["panels"][5]["fieldConfig"]["defaults"].update(unit="bytes"),
     "'Models ready per cluster': unit 'bytes'"),
    (lambda d: d["templating"]["list"][1].update(query="query_result(up)"), "'cluster'"),
])
def test_what_the_translation_cannot_carry_is_refused_by_name(
        grafana: dict[str, Any], change: Any, named: str) -> None:
    broken = copy.deepcopy(grafana)
    change(broken)
    with pytest.raises(perses.TranslationError, match=named.replace("(", r"\(").replace(
            ")", r"\)")):
        perses.perses_dashboard(broken, URL)
