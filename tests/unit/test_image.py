"""What the image build relies on: the Containerfile's promises and the package it installs.

No container engine runs here, so the image itself is not built in CI; every step it runs is
exercised elsewhere (bundle rendering by the agent tests, the package below).
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_containerfile_pins_bases_renders_bundles_and_runs_unprivileged() -> None:
    text = (ROOT / "Containerfile").read_text()
    bases = re.findall(r"^FROM\s+(\S+)", text, re.M)
    assert len(bases) == 2
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


def test_wheel_has_every_role_and_the_console_script(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    wheel = next(tmp_path.glob("model_serving_addon-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for module in (
        "addon_api/cli.py",
        "addon_manager/main.py",
        "addon_agent/main.py",
        "addon_agent/bundle_render.py",
        "addon_api/sealing.py",
    ):
        assert module in names, module
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "model-serving-addon = addon_api.cli:main" in text
