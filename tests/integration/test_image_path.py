"""The agent's bundle path runs with nothing on PATH but what the image's runtime stage installs.

The executables come from the Containerfile (every binary its runtime stage copies onto
PATH), each the testbed's build of the same pin; the agent runs in a child interpreter
started by absolute path with ``PATH`` holding only those.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from addon_agent import kustomize
from testbed import build
from testbed.support.containerfile import CONTAINERFILE, runtime_executables

KUSTOMIZATION = """\
namePrefix: dev-
labels:
- pairs: {owner: devflags}
resources: [runtime.yaml]
"""
RUNTIME = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: runtime, namespace: kserve}
data: {image: example/runtime:v1}
"""
# devFlags.manifests as the agent receives it: a tarball, contextDir and sourcePath inside it.
AGENT = """\
import json, sys
from pathlib import Path
from addon_agent.io import bundle_source
from addon_agent.stacks import KSERVE
from addon_api.platform import ManifestsSource
tarball, bundles, cache = sys.argv[1:]
source = ManifestsSource(uri="file://" + tarball, contextDir="config", sourcePath="overlay")
try:
    text, stack = bundle_source.load(KSERVE, Path(bundles), source, Path(cache))
except bundle_source.BundleError as err:
    print(json.dumps({"error": str(err)}))
else:
    print(json.dumps({"yaml": text, "version": stack.version}))
"""


def _image_path(tmp_path: Path) -> Path:
    """A directory holding exactly the runtime stage's executables (the pinned builds)."""
    bin_dir = tmp_path / "image-bin"
    bin_dir.mkdir()
    executables = runtime_executables(CONTAINERFILE.read_text())
    assert executables, "the runtime stage copies no executables onto PATH"
    for name in executables:
        shutil.copy2(build.binary(name), bin_dir / name)
    return bin_dir


def _bundle_tarball(tmp_path: Path) -> Path:
    overlay = tmp_path / "src" / "repo" / "config" / "overlay"
    overlay.mkdir(parents=True)
    (overlay / "kustomization.yaml").write_text(KUSTOMIZATION)
    (overlay / "runtime.yaml").write_text(RUNTIME)
    tarball = tmp_path / "bundle.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(tmp_path / "src" / "repo", arcname="repo")
    return tarball


def _agent(tmp_path: Path, path: Path) -> dict[str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", AGENT, str(_bundle_tarball(tmp_path)), str(tmp_path / "bundles"),
         str(tmp_path / "cache")],
        env={"PATH": str(path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, str] = json.loads(proc.stdout)
    return result


@pytest.mark.testbed  # needs the Go-built kustomize (`make binaries`), whatever the folder
def test_devflags_kustomization_renders_with_only_the_runtime_stage_on_path(
    tmp_path: Path,
) -> None:
    bin_dir = _image_path(tmp_path)
    version = subprocess.run(
        [str(bin_dir / "kustomize"), "version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.strip() == kustomize.VERSION
    result = _agent(tmp_path, bin_dir)
    assert "error" not in result, result
    assert "name: dev-runtime" in result["yaml"] and "owner: devflags" in result["yaml"]
    assert result["version"] == "custom"


def test_without_the_runtime_stage_on_path_the_agent_says_what_is_missing(
    tmp_path: Path,
) -> None:
    (tmp_path / "empty").mkdir()
    result = _agent(tmp_path, tmp_path / "empty")
    assert result["error"].startswith(f"kustomize not found on PATH; the image ships it at "
                                      f"{kustomize.IMAGE_PATH}")
