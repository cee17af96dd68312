"""The ``kustomize`` the agent runs, pinned in this one place.

The agent renders a ``devFlags.manifests`` kustomization at run time with the standalone
``kustomize build``.  The image's build stage installs exactly this module and version and
its runtime stage copies the binary to :data:`IMAGE_PATH`; the testbed builds the same pin
(``testbed.build``), and a unit test checks that the Containerfile says the same.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Final

MODULE: Final = "sigs.k8s.io/kustomize/kustomize/v5"
"""Go module (and main package) of the standalone kustomize."""

VERSION: Final = "v5.5.0"
"""Pinned kustomize release."""

EXECUTABLE: Final = "kustomize"
"""Name looked up on ``PATH``."""

IMAGE_PATH: Final = "/usr/local/bin/kustomize"
"""Where the runtime image ships the binary (a ``PATH`` directory)."""


class KustomizeError(RuntimeError):
    """kustomize is missing or failed; the message says which and why."""


def command(directory: Path, *flags: str) -> list[str]:
    """The argv that renders the kustomization in ``directory``."""
    return [EXECUTABLE, "build", *flags, str(directory)]


def build(directory: Path, *flags: str) -> str:
    """The rendered kustomization in ``directory`` (``kustomize build``)."""
    argv = command(directory, *flags)
    executable = shutil.which(argv[0])
    if executable is None:
        raise KustomizeError(
            f"{EXECUTABLE} not found on PATH; the image ships it at {IMAGE_PATH} "
            f"({MODULE}@{VERSION})"
        )
    try:
        proc = subprocess.run([executable, *argv[1:]], capture_output=True, text=True)
    except OSError as err:
        raise KustomizeError(f"cannot run {executable}: {err}") from err
    if proc.returncode != 0:
        raise KustomizeError(f"kustomize build {directory}: {proc.stderr.strip()[:500]}")
    return proc.stdout
