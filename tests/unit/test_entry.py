"""The ``model-serving-addon`` command (``model_serving_addon``): one entry above the roles."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from model_serving_addon import cli

ROOT = Path(__file__).resolve().parents[2]

LOADED = """
import json, sys
from model_serving_addon import cli
try:
    cli.main([{command!r}, "--help"])
except SystemExit:
    pass
print(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}})))
"""


@pytest.mark.parametrize(
    ("command", "loads", "never"),
    [("manager", "addon_manager", {"addon_agent", "addon_cli"}),
     ("agent", "addon_agent", {"addon_manager", "addon_cli"}),
     ("agent-release", "addon_agent", {"addon_manager", "addon_cli"})],
)
def test_a_role_loads_its_own_package_and_no_other_role(
    command: str, loads: str, never: set[str]
) -> None:
    out = subprocess.run([sys.executable, "-c", LOADED.format(command=command)], cwd=ROOT,
                         capture_output=True, text=True, check=True, timeout=120)
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    assert loads in loaded
    assert not loaded & never


def test_python_m_runs_the_same_command() -> None:
    ok = subprocess.run([sys.executable, "-m", "model_serving_addon", "--help"], cwd=ROOT,
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("usage: model-serving-addon ")
    for command in [*cli.ROLES, *cli.FLEET, "crds"]:
        assert f"\n    {command} " in ok.stdout, command
    bare = subprocess.run([sys.executable, "-m", "model_serving_addon"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert bare.returncode == 2
    assert "the following arguments are required: command" in bare.stderr


def test_crds_writes_the_crds_and_the_api_reference(tmp_path: Path) -> None:
    assert cli.main(["crds", "--out", str(tmp_path / "crds"), "--docs",
                     str(tmp_path / "api.md")]) == 0
    assert sorted(p.name for p in (tmp_path / "crds").iterdir()) == sorted(
        p.name for p in (ROOT / "crds").glob("*.yaml"))
    assert (tmp_path / "api.md").read_text() == (ROOT / "docs" / "api.md").read_text()
