"""HAProxy for the fleet endpoint's tests: Debian's package, unpacked into the binary cache.

``apt-get download`` fetches HAProxy and the two libraries it needs that a plain Debian lacks
(Lua 5.3, the OpenTracing wrapper), ``dpkg-deb -x`` unpacks them under the cache, and a small
launcher sets the library path: nothing is installed system-wide, no service starts.
``apt-get update`` runs first when the package lists do not know HAProxy yet (as root, as
Debian's Chromium is installed for the console's tests).
"""

from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

from testbed.paths import cache_dir

PACKAGES = ("haproxy", "liblua5.3-0", "libopentracing-c-wrapper0", "libopentracing1")
"""Debian (bookworm) packages unpacked: HAProxy 2.6 and the libraries Debian's build links."""


def binary() -> Path:
    """The HAProxy launcher, unpacked on first use."""
    root = cache_dir() / "haproxy"
    launcher = root / "haproxy"
    if launcher.is_file():
        return launcher
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if launcher.is_file():
            return launcher
        debs = root / "debs"
        debs.mkdir(exist_ok=True)
        download = ["apt-get", "download", *PACKAGES]
        if subprocess.run(download, cwd=debs, capture_output=True, timeout=300).returncode:
            subprocess.run(["apt-get", "update", "-qq"], check=True, timeout=600,
                           capture_output=True)
            subprocess.run(download, cwd=debs, check=True, timeout=300, capture_output=True)
        tree = root / "tree"
        for deb in sorted(debs.glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True, timeout=120)
        (libs,) = (tree / "usr" / "lib").glob("*-linux-gnu")  # the machine's multiarch
        part = launcher.with_suffix(".part")
        part.write_text(f'#!/bin/sh\nLD_LIBRARY_PATH="{libs}" exec "{tree}/usr/sbin/haproxy" '
                        '"$@"\n')
        part.chmod(0o755)
        subprocess.run([str(part), "-v"], check=True, timeout=30, capture_output=True)
        part.replace(launcher)
    return launcher
