"""`make demo ARGS=--exit`: the demo runs to the end on its own and exits 0."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path


def test_demo_runs_to_the_end(built_binaries: Callable[[str], Path]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "testbed", "demo", "--exit"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "every InferenceService Ready on both clusters" in proc.stdout
    last_table = proc.stdout.rsplit("OBJECT", 1)[-1]
    assert last_table.count("http://sklearn-iris-models.") == 2
    print(proc.stdout[proc.stdout.index("[demo] done") :])
