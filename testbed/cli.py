"""Command line for the testbed: ``build`` and ``up``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from testbed import build


def main(argv: Sequence[str]) -> int:
    """Parse arguments and run the chosen testbed command."""
    parser = argparse.ArgumentParser(prog="python -m testbed")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the Go binaries into the cache")
    b.add_argument("tools", nargs="*", help="only these tools")
    args = parser.parse_args(list(argv))
    if args.command == "build":
        return build.main(args.tools)
    return 2
