"""Where the manager's fan-out time goes: the fan-out benchmark's ``ours`` run at one size
with the manager under pyinstrument (``.venv/bin/pip install pyinstrument``).

``python -m bench.profile --clusters 1000 --out /tmp/manager.pyisession``, then e.g.
``pyinstrument --load=/tmp/manager.pyisession --show '*/kopf/*'`` (or ``-r html``).

The profile covers the manager's whole life in this run: start-up (initial lists), the
ModelServing fan-out that opens the gate, then the MultiClusterInferenceService's create,
change and delete. pyinstrument samples the main thread (kopf's event loop, where watch
events, indexes, rendering and status live); the API calls run in the writer's thread pool
and show up there as awaits.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import (
    Fleet,
    Platforms,
    api_client,
    ensure_placement,
    hub,
    log,
    wait_for,
)
from bench.fanout import PLACEMENT, run_ours
from testbed import identities
from testbed.support.manager import ROOT, Manager, free_port


class ProfiledManager(Manager):
    """The manager started under pyinstrument; stopped with SIGINT so the profile is saved."""

    def __init__(self, kubeconfig: Path, log_path: Path, out: Path) -> None:
        super().__init__(kubeconfig, log_path, "--no-addon-enablement", "--log-format=text")
        self.out = out

    def start(self) -> ProfiledManager:
        """Start the manager under the profiler."""
        self.port = free_port()
        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(
                [
                    str(ROOT / ".venv/bin/pyinstrument"), "-r", "pyisession",
                    "-o", str(self.out),
                    str(ROOT / ".venv/bin/model-serving-addon"), "manager",
                    f"--kubeconfig={self.kubeconfig}", f"--metrics-port={self.port}",
                    f"--namespace={identities.MANAGER_NAMESPACE}",
                    *self.args,
                ],
                stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT,
            )
        return self

    def stop(self) -> None:
        """SIGINT (kopf stops, pyinstrument writes the profile), then the usual stop."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                super().stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=Path("/tmp/manager.pyisession"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp, hub() as tb:
        api = api_client(tb)
        clusters = Fleet(api).grow(args.clusters)
        ensure_placement(api, PLACEMENT, args.clusters)
        mgr = ProfiledManager(
            identities.manager_kubeconfig(tb.hub), Path(tmp) / "manager.log", args.out
        ).start()
        try:
            wait_for(lambda: _ready(mgr), 900, "manager ready", interval=0.5)
            log(f"platforms Available after {Platforms(api).ensure(PLACEMENT, clusters):.1f}s")
            time.sleep(2)
            run = run_ours(tb, api, args.clusters)
            log(f"ours under the profiler: {run.seconds}")
        finally:
            mgr.stop()
    log(f"profile in {args.out}")


def _ready(mgr: Manager) -> bool:
    try:
        return mgr.total("model_serving_manager_ready") == 1
    except OSError:
        return False


if __name__ == "__main__":
    main()
