"""The chart's dashboard drawn by Perses, for the picture in ``docs/metrics.md``.

The chart ships its dashboard as Grafana JSON (``files/grafana-dashboard.json``, what ACM's
observability loads). Grafana itself cannot run here (its licence, AGPL, keeps it out of the
project), so the picture is drawn by Perses (Apache-2.0; the dashboard engine of OpenShift's
Cluster Observability Operator) from the npm registry's packages: :func:`perses_dashboard`
translates the Grafana JSON panel by panel (stat, table and time-series panels, their PromQL
and legends, the ``cluster`` variable), the page in ``testbed/perses_web`` draws it with
Perses's own dashboard view and panel plugins, and :func:`picture` opens it in Debian's Chromium
against a real Prometheus and saves what it shows.

The translation keeps what the picture needs (queries, legends, units, layout); it is not a
general Grafana importer.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import http.server
import json
import os
import re
import shutil
import threading
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed import npm
from testbed.paths import cache_dir, sources_digest

Obj = dict[str, Any]

WEB = Path(__file__).resolve().parent / "perses_web"
DIST = WEB / "dist"

PANEL_KINDS = {"stat": "StatChart", "table": "Table", "timeseries": "TimeSeriesChart"}
"""Grafana panel type -> the Perses panel plugin drawing it."""

UNITS = {None: "decimal", "short": "decimal", "s": "seconds", "ops": "ops/sec",
         "reqps": "requests/sec", "percentunit": "percent-decimal"}
"""Grafana unit -> Perses unit (``@perses-dev/core``'s unit names)."""

ROW_PIXELS = 40
"""Height of one grid row on Perses's page in pixels: its row height (30) and margin (10),
from ``@perses-dev/dashboards``' grid layout."""


class TranslationError(ValueError):
    """The dashboard has something the translation does not carry (named in the message)."""


def _query(target: Obj) -> Obj:
    spec: Obj = {"query": target["expr"]}
    if target.get("legendFormat"):
        spec["seriesNameFormat"] = target["legendFormat"]
    return {"kind": "TimeSeriesQuery",
            "spec": {"plugin": {"kind": "PrometheusTimeSeriesQuery", "spec": spec}}}


def _table_columns(panel: Obj) -> list[Obj]:
    """A table's columns as Grafana shows an instant table.

    The labels its query aggregates by, in that order, then ``Value``; Perses's sample time
    column hidden (Perses would put the columns in name order, the time among them).
    """
    exprs = [str(t.get("expr", "")) for t in panel.get("targets", [])]
    match = re.search(r"\bby\s*\(([^)]*)\)", exprs[0]) if len(exprs) == 1 else None
    labels = [name.strip() for name in match.group(1).split(",")] if match else []
    return [*({"name": label} for label in labels if label),
            {"name": "value", "header": "Value"}, {"name": "timestamp", "hide": True}]


def _panel(panel: Obj) -> Obj:
    kind = PANEL_KINDS.get(panel.get("type", ""))
    if kind is None:
        raise TranslationError(f"panel {panel.get('title')!r}: type {panel.get('type')!r} "
                               f"has no Perses plugin here (known: {sorted(PANEL_KINDS)})")
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
    if unit not in UNITS:
        raise TranslationError(f"panel {panel['title']!r}: unit {unit!r} is not translated "
                               f"(known: {sorted(u for u in UNITS if u)})")
    fmt = {"unit": UNITS[unit]}
    plugin_spec: Obj
    if kind == "StatChart":
        plugin_spec = {"calculation": "last-number", "format": fmt}
    elif kind == "Table":
        plugin_spec = {"columnSettings": _table_columns(panel)}
    else:
        plugin_spec = {"legend": {"position": "bottom", "mode": "list"},
                       "yAxis": {"format": fmt}}
    display: Obj = {"name": panel["title"]}
    if panel.get("description"):
        display["description"] = panel["description"]
    return {"kind": "Panel", "spec": {
        "display": display,
        "plugin": {"kind": kind, "spec": plugin_spec},
        "queries": [_query(t) for t in panel.get("targets", [])],
    }}


def _variable(variable: Obj) -> Obj | None:
    if variable.get("type") == "datasource":
        return None  # the Perses dashboard names its one Prometheus itself
    match = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", str(variable.get("query", "")))
    if variable.get("type") != "query" or match is None:
        raise TranslationError(f"variable {variable.get('name')!r}: only datasource variables "
                               "and label_values(metric, label) queries are translated")
    metric, label = match.groups()
    return {"kind": "ListVariable", "spec": {
        "name": variable["name"],
        "display": {"name": variable.get("label") or variable["name"], "hidden": False},
        "allowAllValue": bool(variable.get("includeAll")),
        "allowMultiple": bool(variable.get("multi")),
        "defaultValue": "$__all" if variable.get("includeAll") else None,
        "plugin": {"kind": "PrometheusLabelValuesVariable",
                   "spec": {"labelName": label, "matchers": [metric]}},
    }}


def perses_dashboard(grafana: Obj, prometheus_url: str, duration: str = "15m") -> Obj:
    """The Perses dashboard resource drawing ``grafana`` (the chart's dashboard JSON).

    It reads the Prometheus at ``prometheus_url``: one Perses panel per Grafana panel, at the
    same place of the same 24-column grid, with its queries, legends and unit.

    Raises :class:`TranslationError` naming the panel or variable it cannot carry.
    """
    panels: Obj = {}
    items: list[Obj] = []
    for index, panel in enumerate(grafana.get("panels", [])):
        key = f"panel{index}"
        panels[key] = _panel(panel)
        pos = panel["gridPos"]
        items.append({"x": pos["x"], "y": pos["y"], "width": pos["w"], "height": pos["h"],
                      "content": {"$ref": f"#/spec/panels/{key}"}})
    variables = [v for v in map(_variable, grafana.get("templating", {}).get("list", [])) if v]
    for variable in variables:
        if variable["spec"]["defaultValue"] is None:
            del variable["spec"]["defaultValue"]
    return {
        "kind": "Dashboard",
        "metadata": {"name": grafana.get("uid", "dashboard"), "project": "model-serving"},
        "spec": {
            "display": {"name": grafana.get("title", "")},
            "duration": duration,
            "refreshInterval": "0s",
            "variables": variables,
            "datasources": {"prometheus": {"default": True, "plugin": {
                "kind": "PrometheusDatasource", "spec": {"directUrl": prometheus_url}}}},
            "panels": panels,
            "layouts": [{"kind": "Grid", "spec": {"items": items}}],
        },
    }


def grid_rows(dashboard: Obj) -> int:
    """How many grid rows the dashboard's layout spans.

    The page must be that tall: Perses draws only the panels in view.
    """
    items = [i for layout in dashboard["spec"]["layouts"] for i in layout["spec"]["items"]]
    return max((i["y"] + i["height"] for i in items), default=0)


def _sources() -> list[Path]:
    return sorted(p for p in [*WEB.glob("*.json"), *WEB.glob("*.js"), WEB / "index.html",
                              *WEB.joinpath("src").rglob("*")] if p.is_file())


def _kept() -> Path:
    """Where the build of the current sources is kept (the testbed's cache)."""
    return cache_dir() / "perses" / sources_digest(WEB, _sources())[:16]


def built_page() -> Path:
    """The page's build (``npm ci`` from the committed lock file, then Vite).

    Made once per version of its sources and kept in the testbed's cache; workers of one run
    share it through a file lock.
    """
    kept = _kept()
    kept.parent.mkdir(parents=True, exist_ok=True)
    with (kept.parent / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (kept / "index.html").is_file():
            return kept
        npm.build(WEB, "the dashboard's page")
        staging = kept.with_name(f"{kept.name}.{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(DIST, staging)
        staging.rename(kept)
        return kept


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def served(page: Path, dashboard: Obj, directory: Path) -> Iterator[str]:
    """The built page with ``dashboard`` beside it, served on a loopback port: its URL."""
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(page, directory)
    (directory / "dashboard.json").write_text(json.dumps(dashboard))
    handler = functools.partial(_Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class DrawnPanel:
    """What a panel of the page shows once drawn."""

    title: str
    text: str
    """Its text: a stat's number, a table's cells, a legend's series names, or "No data"."""
    canvas: bool
    """Whether it drew a chart (ECharts draws on a canvas)."""
    errors: bool
    """Whether Perses shows a query error on it."""


_PANELS = """() => [...document.querySelectorAll('[data-testid="panel"]')].map((p) => ({
  title: (p.querySelector('header h2, header h6, header') || {}).textContent || '',
  text: p.innerText,
  canvas: !!p.querySelector('canvas'),
  errors: !!p.querySelector('[aria-label="panel errors"]'),
  busy: !!p.querySelector('[aria-label="loading"], [aria-label="Loading..."], '
                          + '.MuiSkeleton-root, [role="progressbar"]'),
}))"""


def _undrawn(found: list[Obj]) -> list[str]:
    """The panels of ``found`` not drawn yet, each as its title and why."""
    pending = []
    for panel in found:
        title = panel["title"].strip()
        if panel["busy"]:
            pending.append(f"{title}: loading")
        elif (not panel["canvas"] and "No data" not in panel["text"] and not panel["errors"]
              and panel["text"].strip() == title):
            pending.append(f"{title}: nothing but its title (an empty table)")
    return pending


def _drawn(found: list[Obj], expected: int) -> list[DrawnPanel]:
    """Every panel as drawn, or nothing while one is still loading or empty."""
    if len(found) != expected or _undrawn(found):
        return []
    return [DrawnPanel(p["title"].strip(), p["text"], p["canvas"], p["errors"]) for p in found]


def picture(dashboard: Obj, out: Path, work_dir: Path, width: int = 1600,
            timeout: float = 300,
            variables: Mapping[str, Sequence[str]] | None = None) -> list[DrawnPanel]:
    """Draw ``dashboard`` (from :func:`perses_dashboard`) in Debian's Chromium, save a PNG.

    The PNG goes to ``out``; returns what each panel shows. ``variables``: values to select
    in the variable bar (name -> values, Perses's ``var-<name>`` URL parameters) instead of
    each variable's default.

    Waits up to ``timeout`` seconds (the page is 3 MB of script: with the suite's four workers
    on 2 cores, the console's pages took minutes where they took seconds alone) until every
    panel is drawn: no panel loading, each with a chart, a value, a table or
    Perses's "No data" (a page taller than the grid, since Perses draws only the panels in view).
    """
    from playwright.sync_api import sync_playwright

    from testbed.browser import chromium
    from testbed.support.waiting import eventually

    expected = len(dashboard["spec"]["panels"])
    height = grid_rows(dashboard) * ROW_PIXELS + 400
    with served(built_page(), dashboard, work_dir) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium()), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            troubles: list[str] = []  # what the page met, for the message on a timeout

            def console(message: Any) -> None:
                if message.type == "error":
                    troubles.append(f"console: {message.text[:200]}")

            def response(answer: Any) -> None:
                if answer.status >= 400:
                    troubles.append(f"HTTP {answer.status}: {answer.request.method} "
                                    f"{answer.url[:200]}")

            def failed(request: Any) -> None:
                troubles.append(f"failed: {request.method} {request.url[:200]} "
                                f"({request.failure})")

            def page_error(error: Any) -> None:
                troubles.append(f"page error: {str(error)[:200]}")

            page.on("console", console)
            page.on("pageerror", page_error)
            page.on("requestfailed", failed)
            page.on("response", response)
            # One parameter a variable, its values joined by commas (Perses's query-params).
            selected = urllib.parse.urlencode(
                {f"var-{name}": ",".join(values) for name, values in (variables or {}).items()})
            page.goto(f"{url}?{selected}" if selected else url, timeout=timeout * 1000)
            out.parent.mkdir(parents=True, exist_ok=True)
            found: list[Obj] = []

            def now() -> list[DrawnPanel]:
                found[:] = page.evaluate(_PANELS)
                return _drawn(found, expected)

            # Perses's time-series charts draw without animation: drawn is final.
            try:
                drawn: list[DrawnPanel] = eventually(now, timeout)
            except AssertionError:
                page.screenshot(path=str(out), full_page=True)
                raise AssertionError(
                    f"{len(found)} of {expected} panels on the page, not drawn after "
                    f"{timeout}s: {_undrawn(found)}; the page as it was: {out}; what it met: "
                    f"{troubles[-12:]}") from None
            page.screenshot(path=str(out), full_page=True)
            return drawn
        finally:
            browser.close()
