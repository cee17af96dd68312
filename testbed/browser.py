"""Debian's Chromium for the console's browser tests, installed with apt when missing.

``make test`` installs it before the tests start (``python -m testbed.browser``), so that no
test's time goes to a download; a test that finds it missing installs it the same way. Parallel
test workers install it once: the first takes a file lock in the testbed's cache, the others
wait on it and then find it there; apt itself waits for another apt's lock instead of failing.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

from testbed.paths import cache_dir

CHROMIUM = (Path("/usr/lib/chromium/chromium"), Path("/usr/bin/chromium"))
"""Debian's Chromium binary (the first; /usr/bin/chromium is its launcher script)."""

APT = ("apt-get", "-o", "DPkg::Lock::Timeout=600")
"""apt-get, waiting up to 10 minutes for another apt or dpkg to finish (it fails at once
otherwise, with exit status 100)."""


def installed() -> Path | None:
    """Chromium's binary, if it is installed."""
    return next((p for p in CHROMIUM if p.is_file()), None)


def chromium() -> Path:
    """Chromium's binary, installed with apt first when it is not there (needs root)."""
    found = installed()
    if found is not None:
        return found
    lock = cache_dir() / "chromium.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another worker may be installing it
        found = installed()
        if found is not None:
            return found
        env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        for args in (("update", "-qq"), ("install", "-y", "-qq", "chromium")):
            proc = subprocess.run([*APT, *args], capture_output=True, text=True, timeout=900,
                                  env=env, check=False)
            if proc.returncode != 0:
                raise RuntimeError(f"apt-get {' '.join(args)} failed ({proc.returncode}):\n"
                                   f"{proc.stdout}{proc.stderr}")
    found = installed()
    if found is None:
        raise RuntimeError("apt-get installed chromium, but none of "
                           f"{', '.join(map(str, CHROMIUM))} is there")
    return found


def main() -> int:
    """``python -m testbed.browser``: install Chromium if missing; print its path."""
    try:
        print(chromium())
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
