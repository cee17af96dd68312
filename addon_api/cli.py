"""The ``model-serving-addon`` command: one entry point for every role.

``manager`` and ``agent`` hand the rest of the command line to their package's
``main(argv)``; each role is imported lazily so the manager never loads agent
code and the other way round. The fleet commands (``status``, ``explain``, ``clusters``,
``rollout``, ``render``, ``diff``) go to :mod:`addon_cli.main` the same way.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

ROLES = {
    "manager": ("addon_manager.main", "run the hub manager (kopf) against the hub cluster"),
    "agent": ("addon_agent.main", "run the spoke agent (kopf) on a managed cluster"),
    "agent-release": ("addon_agent.release", "remove the agent's credentials entries and "
                      "finalizers from a managed cluster (the add-on's pre-delete hook)"),
}


FLEET = {
    "status": "the fleet as a table: intents x clusters, phase, ready, URL, revision, why not",
    "explain": "why an intent is (not) serving on one cluster, link by link",
    "clusters": "managed clusters: add-on health, platform and version, intents, stale",
    "predict": "send a JSON input to a model on each cluster; the answers and their latency",
    "rollout": "a progressive rollout: status, history, pause, resume, undo, approve",
    "render": "the ManifestWorks the manager would write for an intent file (no hub needed)",
    "diff": "what an intent file would change in the hub's works, per cluster",
}
"""The fleet commands (``addon_cli``): they read the hub with the user's kubeconfig."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the subcommand named on the command line."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in and args_in[0] in ROLES:
        module = importlib.import_module(ROLES[args_in[0]][0])
        code: int = module.main(args_in[1:])
        return code
    if args_in and args_in[0] in FLEET:
        fleet = importlib.import_module("addon_cli.main")
        fleet_code: int = fleet.main(args_in)
        return fleet_code
    parser = argparse.ArgumentParser(prog="model-serving-addon")
    sub = parser.add_subparsers(dest="command", required=True)
    for role, (_, help_text) in ROLES.items():
        sub.add_parser(role, help=help_text, add_help=False)
    for command, help_text in FLEET.items():
        sub.add_parser(command, help=help_text, add_help=False)
    crds = sub.add_parser("crds", help="write crds/*.yaml (and docs/api.md) from the models")
    crds.add_argument("--out", default="crds", help="directory for the CRD files")
    crds.add_argument("--docs", default="docs/api.md", help="API reference to write")
    args = parser.parse_args(args_in)
    if args.command == "crds":
        from addon_api import crdgen

        return crdgen.main(args.out, args.docs)
    return 2
