"""The agent's kustomize call: the command it runs and the errors it turns failures into."""

from __future__ import annotations

from pathlib import Path

import pytest

from addon_agent import kustomize
from addon_agent.io import bundle_source


def _kustomization(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "kustomization.yaml").write_text("resources: []\n")
    return root


def _fake_kustomize(bin_dir: Path, script: str) -> None:
    bin_dir.mkdir()
    exe = bin_dir / "kustomize"
    exe.write_text(f"#!/bin/sh\n{script}\n")
    exe.chmod(0o755)


def test_missing_kustomize_is_a_bundle_error_naming_the_image_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _kustomization(tmp_path / "k")
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(bundle_source.BundleError) as caught:
        bundle_source.render_dir(directory)
    assert str(caught.value).startswith(
        "kustomize not found on PATH; the image ships it at /usr/local/bin/kustomize"
    )
    assert not isinstance(caught.value.__cause__, FileNotFoundError)


def test_render_dir_runs_kustomize_build_on_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _kustomization(tmp_path / "k")
    _fake_kustomize(tmp_path / "bin", 'echo "args: $*"')
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert bundle_source.render_dir(directory) == f"args: build {directory}\n"


def test_kustomize_failure_is_a_bundle_error_with_its_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _kustomization(tmp_path / "k")
    _fake_kustomize(tmp_path / "bin", 'echo "bad resource" >&2; exit 1')
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(bundle_source.BundleError, match=r"kustomize build .*: bad resource"):
        bundle_source.render_dir(directory)


def test_unrunnable_kustomize_is_a_kustomize_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # on PATH and executable, but not a program the kernel can start
    (tmp_path / "bin").mkdir()
    exe = tmp_path / "bin" / "kustomize"
    exe.write_bytes(b"\x7fELF-not-really")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(kustomize.KustomizeError, match="cannot run"):
        kustomize.build(_kustomization(tmp_path / "k"))


def test_command_passes_flags_before_the_directory() -> None:
    argv = kustomize.command(Path("/d"), "--load-restrictor=LoadRestrictionsNone")
    assert argv == ["kustomize", "build", "--load-restrictor=LoadRestrictionsNone", "/d"]
