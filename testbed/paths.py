"""Where the testbed keeps things outside the repository."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterable
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


def sources_digest(root: Path, paths: Iterable[Path]) -> str:
    """A cache key of built sources: sha256 over each file's path below ``root`` and its bytes."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
