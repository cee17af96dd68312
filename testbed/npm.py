"""Pages of the testbed and the console built with npm: packages from the lock file, then Vite."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def build(web: Path, what: str, timeout: float = 600) -> None:
    """Build the page in ``web``: ``npm ci``, then ``npm run build``.

    ``npm ci`` runs only when ``node_modules`` is missing or older than the lock file;
    ``what`` names the page in the error when npm is missing.
    """
    npm = shutil.which("npm")
    assert npm, f"{what} is built with npm (Node.js 20.19 or newer)"
    lock = web / "package-lock.json"
    marker = web / "node_modules" / ".package-lock.json"
    if not marker.is_file() or marker.stat().st_mtime < lock.stat().st_mtime:
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=web, check=True,
                       timeout=timeout, capture_output=True)
    subprocess.run([npm, "run", "build"], cwd=web, check=True, timeout=timeout,
                   capture_output=True)
