"""Running the real helm binary against the chart."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from testbed.build import binary

CHART = Path(__file__).resolve().parent.parent / "charts" / "model-serving-addon"


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run helm; raise with its stderr when ``check`` and it fails."""
    proc = subprocess.run([str(binary("helm")), *args], capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{proc.stderr}")
    return proc


def render(*sets: str, namespace: str = "model-serving-system") -> list[dict[str, Any]]:
    """``helm template`` with ``--set`` values; the rendered objects (CRDs included)."""
    args = ["template", "msa", str(CHART), "-n", namespace, "--include-crds"]
    for s in sets:
        args += ["--set", s]
    return [d for d in yaml.safe_load_all(helm(*args).stdout) if d]
