"""The binary builder's pure parts (what needs the Go module cache is in
tests/integration/test_testbed_upstream.py)."""

from __future__ import annotations

from testbed import build


def test_every_tool_has_a_version_keyed_cache_dir() -> None:
    dirs = {t.bin_dir for t in build.TOOLS}
    assert len(dirs) == len(build.TOOLS)
    for tool in build.TOOLS:
        assert tool.bin_dir.name == f"{tool.name}-{tool.version}"
