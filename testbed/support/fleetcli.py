"""Run the fleet command line (``model-serving-addon status ...``) as a user would."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from model_serving_addon import cli

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"


def run(kubeconfig: Path | None, *args: str, timeout: float = 120
        ) -> subprocess.CompletedProcess[str]:
    """The command's result (not checked: tests assert on exit codes).

    It runs in this process, through the same entry point as the ``model-serving-addon``
    executable (a process each time cost seconds of imports on a loaded machine); see
    :func:`kubectl_plugin` for the executable itself. No kubeconfig: none is passed
    (``render`` reads no hub).
    """
    del timeout  # kept for callers' symmetry with :func:`kubectl_plugin`
    argv = [*args, *([f"--kubeconfig={kubeconfig}"] if kubeconfig is not None else [])]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exit_:  # argparse's usage errors
            code = int(exit_.code or 0)
    return subprocess.CompletedProcess(["model-serving-addon", *argv], code, out.getvalue(),
                                       err.getvalue())


def kubectl_plugin(kubeconfig: Path, *args: str, timeout: float = 120
                   ) -> subprocess.CompletedProcess[str]:
    """``kubectl modelserving ARGS``: kubectl finds the plugin executable on PATH."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(["kubectl", "modelserving", *args, f"--kubeconfig={kubeconfig}"],
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env=env)


def json_of(kubeconfig: Path, *args: str) -> Any:
    """The command's ``-o json`` output (it must succeed)."""
    out = run(kubeconfig, *args, "-o", "json")
    assert out.returncode == 0, (out.returncode, out.stderr)
    return json.loads(out.stdout)
