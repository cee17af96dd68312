"""The ``model-serving-addon`` command: one entry point for every role.

Subcommands import their role lazily so that the manager never loads agent code
and the other way round.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the subcommand named on the command line."""
    parser = argparse.ArgumentParser(prog="model-serving-addon")
    sub = parser.add_subparsers(dest="command", required=True)
    crds = sub.add_parser("crds", help="write crds/*.yaml (and docs/api.md) from the models")
    crds.add_argument("--out", default="crds", help="directory for the CRD files")
    crds.add_argument("--docs", default="docs/api.md", help="API reference to write")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.command == "crds":
        from addon_api import crdgen

        return crdgen.main(args.out, args.docs)
    return 2
