"""What the image build relies on: the Containerfile's promises and the package it installs.

No container engine runs here, so the image itself is not built in CI; every step it runs is
exercised elsewhere (bundle rendering by the agent tests, the package below, the agent's
bundle path with only the runtime stage's executables in tests/integration/test_image_path.py).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from addon_agent import kustomize
from addon_cli import troubleshooting
from testbed import build
from testbed.support.containerfile import runtime_executables, stages

ROOT = Path(__file__).resolve().parents[2]


def test_containerfile_pins_bases_renders_bundles_and_runs_unprivileged() -> None:
    text = (ROOT / "Containerfile").read_text()
    bases = [stage.base for stage in stages(text)]
    assert len(bases) == 3
    assert [s.base for s in stages(text, {"GO_BASE": "go:1", "NODE_BASE": "node:3",
                                          "RUNTIME_BASE": "py:2"})] == ["go:1", "node:3", "py:2"]
    for base in bases:
        name, _, tag = base.rpartition(":")
        assert name and tag and tag != "latest" and re.search(r"\d", tag), base
    assert "python -m addon_agent.bundle_render --out /bundles" in text
    assert "COPY --from=bundles /bundles /opt/model-serving/bundles" in text
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users[-1] not in ("0", "root")
    assert 'ENTRYPOINT ["model-serving-addon"]' in text


def test_chart_points_the_agent_at_the_image_bundle_dir() -> None:
    addon = (ROOT / "charts/model-serving-addon/templates/addon.yaml").read_text()
    assert "--bundle-dir=/opt/model-serving/bundles" in addon


def _context_ignored(source: str) -> list[str]:
    """What .containerignore keeps out of the build context under ``source`` (base names)."""
    lines = [line.strip() for line in (ROOT / ".containerignore").read_text().splitlines()]
    return [Path(line).name for line in lines
            if line and not line.startswith("#") and line.startswith(f"{source}/")]


def _runtime_context(into: Path) -> Path:
    """What the runtime stage copies from the build context, laid out as it copies it."""
    text = (ROOT / "Containerfile").read_text()
    for copy in stages(text)[-1].copies():
        if copy.from_stage:
            continue
        for source in copy.sources:
            target = into / (source if copy.dest.endswith("/") else copy.dest)
            if (ROOT / source).is_dir():
                shutil.copytree(ROOT / source, target, ignore=shutil.ignore_patterns(
                    "__pycache__", *_context_ignored(source)))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / source, target)
    return into


def test_wheel_has_every_role_and_the_console_script(tmp_path: Path) -> None:
    # Built from exactly what the runtime stage copies (as `pip install .` there sees it),
    # not from the working tree, whose ignored build/ directory may hold stale packages.
    context = _runtime_context(tmp_path / "context")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",  # the venv's setuptools: no index, no network
            "-q",
            "-w",
            str(tmp_path / "wheels"),
            str(context),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    wheel = next((tmp_path / "wheels").glob("model_serving_addon-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    harness = [n for n in names if n.startswith(("testbed/", "tests/", "bench/"))]
    assert not harness, "the test harness must not ship"
    assert not [n for n in names if "node_modules" in n], "the console's npm tree must not ship"
    for module in (
        "model_serving_addon/cli.py",
        "model_serving_addon/__main__.py",
        "addon_manager/main.py",
        "addon_manager/shell/main.py",
        "addon_agent/main.py",
        "addon_agent/bundle_render.py",
        "addon_api/sealing.py",
    ):
        assert module in names, module
    # explain's troubleshooting prose is package data: every family's YAML file ships
    for family in troubleshooting.FAMILIES:
        data = f"addon_cli/troubleshooting/{family}.yaml"
        assert data in names, data
        assert zipfile.ZipFile(wheel).read(data) == (ROOT / data).read_bytes(), data
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "model-serving-addon = model_serving_addon.cli:main" in text


def test_image_ships_the_agents_pinned_kustomize() -> None:
    text = (ROOT / "Containerfile").read_text()
    bundles, _, runtime = stages(text)
    # built once, from the agent's pin, statically (the runtime base has another libc)
    installs = [shlex.split(r) for r in bundles.runs() if f"{kustomize.MODULE}@" in r]
    tool = next(t for t in build.TOOLS if "kustomize" in t.packages)
    assert installs == [
        [
            "CGO_ENABLED=0",
            "GOBIN=/usr/local/bin",
            "go",
            "install",
            f"-ldflags={tool.ldflags}",
            f"{kustomize.MODULE}@{kustomize.VERSION}",
        ]
    ]
    assert f"provenance.version={kustomize.VERSION}" in tool.ldflags
    # and copied onto the runtime PATH where the agent's error message says it is
    assert runtime_executables(text) == {kustomize.EXECUTABLE: kustomize.IMAGE_PATH}
    assert any(c.from_stage == bundles.name and c.sources == ("/usr/local/bin/kustomize",)
               for c in runtime.copies())
    # the testbed builds the same pin (same flags) for the PATH test
    assert (tool.module, tool.version) == (kustomize.MODULE, kustomize.VERSION)


def test_no_stage_copies_the_test_harness() -> None:
    text = (ROOT / "Containerfile").read_text()
    for stage in stages(text):
        sources = {s.rstrip("/") for c in stage.copies() if not c.from_stage for s in c.sources}
        assert sources <= {"pyproject.toml", "README.md", "model_serving_addon", "addon_api",
                           "addon_agent", "addon_manager", "addon_cli",
                           "addon_cli/console/web"}, stage.base
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"testbed*"' not in pyproject


def test_the_image_carries_the_console_page_built_as_make_console_builds_it() -> None:
    """Issue 33's page in the image: a Node stage runs the same locked npm build as ``make
    console`` (which the console's browser tests use), and the runtime stage takes only the
    built page, before ``pip install .`` so the package data carries it. (Building the image
    needs podman, which this machine lacks: ``make image``.)"""
    text = (ROOT / "Containerfile").read_text()
    _, console, runtime = stages(text)
    assert console.name == "console"
    make = (ROOT / "Makefile").read_text()
    recipe = make.split("\nconsole:\n", 1)[1].splitlines()[0].strip()
    where, _, build_steps = recipe.partition(" && ")
    assert where == "cd addon_cli/console/web"
    assert console.runs() == [build_steps]
    assert [c.sources for c in console.copies()] == [("addon_cli/console/web",)]
    assert "WORKDIR /src/addon_cli/console/web" in console.instructions
    # vite writes the page next to the package, where the server serves it from
    vite = (ROOT / "addon_cli/console/web/vite.config.ts").read_text()
    assert 'outDir: "../static"' in vite
    from addon_cli.console import server

    assert server.STATIC == ROOT / "addon_cli/console/static"
    page = [c for c in runtime.copies() if c.from_stage == "console"]
    assert [(c.sources, c.dest) for c in page] == [
        (("/src/addon_cli/console/static",), "addon_cli/console/static")]
    order = runtime.instructions
    copied = order.index("COPY --from=console /src/addon_cli/console/static "
                         "addon_cli/console/static")
    assert copied < next(i for i, line in enumerate(order) if "pip install" in line)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"addon_cli.console" = ["static/*", "static/assets/*"]' in pyproject
    # and the build context never carries a local build or the npm tree
    ignored = (ROOT / ".containerignore").read_text().splitlines()
    assert {"addon_cli/console/static", "addon_cli/console/web/node_modules"} <= set(ignored)
