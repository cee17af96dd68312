"""Command line for the testbed: ``build`` the binaries, or bring a fleet ``up``."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from testbed import build
from testbed.build import BuildError
from testbed.processes import ProcessFailed


def _up(spokes: int, run_dir: Path | None, state_file: Path | None,
        dataplane: bool = False) -> int:
    from testbed.fleet import Testbed

    def _on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _on_term)
    build.build_all()
    bed = Testbed(spokes=spokes, run_dir=run_dir, dataplane=dataplane)
    try:
        bed.start()
        print(bed.describe())
        for name, ingress in bed.ingresses.items():
            print(f"  {name:<10} ingress {ingress.url} (Host: the InferenceService's URL host)")
        if state_file is not None:
            state = {
                "run_dir": str(bed.run_dir),
                "pids": [p.pid for p in bed.processes],
                "kubeconfigs": {c.name: str(c.kubeconfig) for c in bed.all_clusters},
            }
            state_file.write_text(json.dumps(state))
        print("[testbed] up; press Ctrl-C to stop everything", flush=True)
        while True:
            time.sleep(2)
            bed.check_processes()
    except KeyboardInterrupt:
        return 0
    except ProcessFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        bed.stop()
        print("[testbed] stopped", flush=True)


def main(argv: Sequence[str]) -> int:
    """Parse arguments and run the chosen testbed command."""
    parser = argparse.ArgumentParser(prog="python -m testbed")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the Go binaries into the cache")
    b.add_argument("tools", nargs="*",
                   help="only these tools (`dataplane`: the Python model servers)")
    up = sub.add_parser("up", help="start a hub and N spokes until Ctrl-C")
    up.add_argument("--spokes", type=int, default=2)
    up.add_argument("--run-dir", type=Path, default=None)
    up.add_argument("--state-file", type=Path, default=None, help="write pids and paths as JSON")
    up.add_argument("--dataplane", action="store_true",
                    help="run predictor pods of known runtimes as real servers, with an S3 "
                         "server and an ingress per spoke")
    demo = sub.add_parser("demo", help="the whole add-on flow on a local fleet, shown live")
    demo.add_argument("--exit", action="store_true", help="exit 0 once every model is Ready")
    args = parser.parse_args(list(argv))
    # Ctrl-C stops the fleet even when started from a parent that ignores SIGINT (a background
    # job of a script, a pytest-xdist worker): the ignored disposition is inherited.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        if args.command == "build":
            return build.main(args.tools)
        if args.command == "demo":
            from testbed import demo as demo_module

            return demo_module.run(exit_when_done=args.exit)
        return _up(args.spokes, args.run_dir, args.state_file, args.dataplane)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
