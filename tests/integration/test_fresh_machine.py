"""A fresh machine: the first Go module download works before ``~/go`` exists.

Downloads a small pinned module from the Go module proxy (network) into an empty, not yet
created ``GOPATH``/``GOMODCACHE``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed import paths, upstream

pytestmark = pytest.mark.testbed  # needs `go` and the Go module proxy, whatever the folder

MODULE = "github.com/google/uuid"
VERSION = "v1.6.0"


@pytest.fixture
def fresh_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Go's module and build caches under a home that does not exist yet."""
    gopath = tmp_path / "home" / "go"
    monkeypatch.setenv("GOPATH", str(gopath))
    monkeypatch.setenv("GOMODCACHE", str(gopath / "pkg" / "mod"))
    monkeypatch.setenv("GOCACHE", str(tmp_path / "home" / ".cache" / "go-build"))
    monkeypatch.setenv("GOFLAGS", "-modcacherw")  # so tmp_path can be removed afterwards
    monkeypatch.chdir(tmp_path)
    paths.gomodcache.cache_clear()
    yield gopath
    paths.gomodcache.cache_clear()


def test_module_download_into_an_empty_gopath(fresh_go: Path) -> None:
    assert not fresh_go.parent.exists()
    directory = upstream.module_dir(MODULE, VERSION)
    assert directory == fresh_go / "pkg" / "mod" / f"{MODULE}@{VERSION}"
    assert (directory / "go.mod").read_text().startswith(f"module {MODULE}")
    # a second call finds it in the cache
    assert upstream.module_dir(MODULE, VERSION) == directory
