"""Run the fleet command line (``model-serving-addon status ...``) as a user would."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / ".venv" / "bin" / "model-serving-addon"


def run(kubeconfig: Path | None, *args: str, timeout: float = 120
        ) -> subprocess.CompletedProcess[str]:
    """The command's result (not checked: tests assert on exit codes).

    No kubeconfig: none is passed (``render`` reads no hub).
    """
    given = [f"--kubeconfig={kubeconfig}"] if kubeconfig is not None else []
    return subprocess.run([str(CLI), *args, *given], capture_output=True, text=True,
                          timeout=timeout, check=False)


def json_of(kubeconfig: Path, *args: str) -> Any:
    """The command's ``-o json`` output (it must succeed)."""
    out = run(kubeconfig, *args, "-o", "json")
    assert out.returncode == 0, (out.returncode, out.stderr)
    return json.loads(out.stdout)
