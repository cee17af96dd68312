"""The fleet console in tests: its page built, a browser, the console process.

The page is built from ``addon_cli/console/web`` with the npm registry's packages (``npm ci``
from the committed lock file, then Vite) when missing or older than its sources, or copied
from the testbed's cache when these sources were built before; the browser
is Debian's Chromium (installed with apt when missing), driven by Playwright.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from testbed import npm
from testbed.browser import chromium
from testbed.paths import cache_dir, sources_digest
from testbed.processes import Process, free_port

WEB = Path(__file__).resolve().parents[2] / "addon_cli" / "console" / "web"
STATIC = WEB.parent / "static"
AXE = WEB / "node_modules" / "axe-core" / "axe.min.js"
"""axe-core, Deque's accessibility engine (npm, a dev dependency of the page: `npm ci` of
:func:`built_page` installs it; :func:`axe_script` finds it)."""
EXPECT_SECONDS = 90
"""How long a page's expectation, or a navigation's load, waits for what it expects (it ends
as soon as it holds). Playwright's 30 s default for a navigation was not enough on this
session's machine: with the suite's four workers busy (a load average of 15 to 20 on 2
cores) the console's first page took longer than that to load in Chromium (2026-12-07)."""


def _newest(paths: list[Path]) -> float:
    return max((p.stat().st_mtime for p in paths if p.is_file()), default=0.0)


def built_page() -> Path:
    """The console's built page (``static/``), built first when missing or stale.

    Workers of one run may ask at once (the hub testbed's console tests, the data-plane
    fleet's): a file lock lets one build while the others wait, then find it built. A build
    is kept in the testbed's cache under the digest of its sources and lock file (with the
    axe-core script the accessibility test injects), so a clean clone of the same sources
    copies it instead of running ``npm ci`` and Vite again (about 20 CPU-seconds, 15 s).
    """
    with (WEB.parent / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build()


def axe_script() -> Path:
    """axe-core's script: from ``node_modules`` when installed, else from the kept build."""
    return AXE if AXE.is_file() else _kept() / AXE.name


def _sources() -> list[Path]:
    return sorted(p for p in [*WEB.glob("*.json"), *WEB.glob("*.ts"), WEB / "index.html",
                              *WEB.joinpath("src").rglob("*")] if p.is_file())


def _kept() -> Path:
    """Where the build of the current sources is kept (the testbed's cache)."""
    return cache_dir() / "console" / sources_digest(WEB, _sources())[:16]


def _build() -> Path:
    index = STATIC / "index.html"
    if index.is_file() and index.stat().st_mtime >= _newest(_sources()):
        return STATIC
    kept = _kept()
    if (kept / "static" / "index.html").is_file() and (kept / AXE.name).is_file():
        shutil.rmtree(STATIC, ignore_errors=True)
        shutil.copytree(kept / "static", STATIC, copy_function=shutil.copy)  # mtime: now
        return STATIC
    npm.build(WEB, "the console's page")
    staging = kept.with_name(f"{kept.name}.{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(STATIC, staging / "static")
    shutil.copy(AXE, staging / AXE.name)
    shutil.rmtree(kept, ignore_errors=True)
    staging.rename(kept)
    return STATIC


class Console:
    """A running ``model-serving-addon console --proxy`` and HTTP calls to it."""

    def __init__(self, cli: Path, server: str, ca: Path, log_dir: Path,
                 static: Path = STATIC) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = Process("console", [
            str(cli), "console", "--proxy", f"--hub-server={server}", f"--hub-ca={ca}",
            f"--listen=127.0.0.1:{self.port}", f"--static={static}"], log_dir)

    def start(self) -> Console:
        """Start it; return once it answers."""
        self.process.start()
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=2):
                    return self
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        """Stop it."""
        self.process.stop()

    def get(self, path: str, token: str | None = None) -> tuple[int, Any]:
        """(status, JSON body) of ``GET path`` with ``token`` as the proxy would pass it."""
        return self.call("GET", path, token)

    def call(self, method: str, path: str, token: str | None = None, body: Any = None,
             page: bool = True) -> tuple[int, Any]:
        """(status, JSON body) of a request; ``page``: with the header the page sends."""
        request = urllib.request.Request(
            f"{self.url}{path}", method=method,
            data=None if body is None else json.dumps(body).encode())
        if body is not None:
            request.add_header("Content-Type", "application/json")
        if page:
            request.add_header("X-Console-Request", "1")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}")


def tenant_user(hub: Any, namespace: str, name: str, users: str = "console-users",
                role: str = "model-serving-addon-tenant") -> tuple[str, str]:
    """A hub user with only ``role`` in ``namespace``: (subject, token).

    A ServiceAccount of ``users`` bound there, and a token for it (what an authenticating
    proxy would pass).
    """
    from testbed.chart import render

    hub.apply_objects([o for o in render() if o["kind"] == "ClusterRole"
                       and o["metadata"]["name"] == role])
    hub.kubectl("create", "namespace", users, check=False)
    hub.kubectl("create", "serviceaccount", name, "-n", users)
    hub.kubectl("create", "rolebinding", f"console-{name}", "-n", namespace,
                f"--clusterrole={role}", f"--serviceaccount={users}:{name}")
    token = hub.create_token(name, users, "1h")
    return f"system:serviceaccount:{users}:{name}", token


WCAG = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa")
"""The rule sets checked: WCAG 2.0, 2.1 and 2.2, levels A and AA."""

_AXE_RUN = """async (tags) => {
  const result = await axe.run(document, {runOnly: {type: "tag", values: tags}});
  return result.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ")),
  }));
}"""


def accessibility_violations(page: Any) -> list[str]:
    """What axe-core finds against :data:`WCAG` on the page as it is shown now.

    One line per violation (rule, impact, what it asks, where); empty when nothing.
    """
    page.add_script_tag(path=str(axe_script()))
    found = page.evaluate(_AXE_RUN, list(WCAG))
    return [f"{v['id']} ({v['impact']}): {v['help']} at {v['nodes']}" for v in found]


@contextlib.contextmanager
def signed_in(*tokens: str) -> Iterator[list[Any]]:
    """A page of Debian's Chromium (Playwright) per token.

    Each page's requests carry its token as the authenticating proxy in front of the console
    would (X-Forwarded-Access-Token).
    """
    from playwright.sync_api import expect, sync_playwright

    # What a page waits for comes from the hub (a list, a watch event, the manager's status):
    # on a loaded 2-core machine that can take longer than Playwright's 5 s default.
    expect.set_options(timeout=EXPECT_SECONDS * 1000)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium()), args=["--no-sandbox"])
        try:
            pages = [browser.new_context(
                extra_http_headers={"X-Forwarded-Access-Token": t}).new_page() for t in tokens]
            for page in pages:
                page.set_default_timeout(EXPECT_SECONDS * 1000)  # navigations and actions
            yield pages
        finally:
            browser.close()

