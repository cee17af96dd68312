"""Where the testbed keeps things outside the repository."""

from __future__ import annotations

import os
import subprocess
from functools import cache
from pathlib import Path


def cache_dir() -> Path:
    """Root of the testbed's cache (binaries, wrapper modules, rendered bundles)."""
    base = os.environ.get("MODEL_SERVING_ADDON_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "model-serving-addon"


@cache
def gomodcache() -> Path:
    """The Go module cache (``go env GOMODCACHE``)."""
    out = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())
