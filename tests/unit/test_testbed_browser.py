"""Chromium installed once when parallel workers all find it missing (testbed.browser)."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from testbed import browser


def test_parallel_callers_install_it_once_and_all_get_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = tmp_path / "chromium"
    monkeypatch.setattr(browser, "CHROMIUM", (binary,))
    monkeypatch.setattr(browser, "cache_dir", lambda: tmp_path / "cache")
    calls: list[tuple[str, ...]] = []

    def apt(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(tuple(argv))
        if "install" in argv:
            time.sleep(0.3)  # an install takes a while: the others must wait, not start theirs
            binary.write_text("#!/bin/sh\n")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(subprocess, "run", apt)
    found: list[Path] = []
    workers = [threading.Thread(target=lambda: found.append(browser.chromium()))
               for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert found == [binary] * 4
    assert [c for c in calls if "install" in c] == [
        (*browser.APT, "install", "-y", "-qq", "chromium")]


def test_a_failed_install_says_what_apt_said(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(browser, "CHROMIUM", (tmp_path / "chromium",))
    monkeypatch.setattr(browser, "cache_dir", lambda: tmp_path / "cache")
    monkeypatch.setattr(subprocess, "run", lambda argv, **_: subprocess.CompletedProcess(
        argv, 100, "", "E: Could not get lock /var/lib/dpkg/lock-frontend"))
    with pytest.raises(RuntimeError, match=r"(?s)update -qq failed \(100\).*Could not get lock"):
        browser.chromium()
