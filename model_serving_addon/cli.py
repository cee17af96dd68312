"""The ``model-serving-addon`` command: one entry point for every role.

``manager`` and ``agent`` hand the rest of the command line to their package's
``main(argv)``; each role is imported inside its own subcommand, so the manager never loads
agent code and the other way round. The fleet commands (``status``, ``explain``, ``clusters``,
``rollout``, ``render``, ``diff``, ``check``, ``version``) go to :mod:`addon_cli.main` the same way.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

ROLES = {
    "manager": "run the hub manager (kopf) against the hub cluster",
    "agent": "run the spoke agent (kopf) on a managed cluster",
    "agent-release": "remove the agent's credentials entries and finalizers from a managed "
                     "cluster (the add-on's pre-delete hook)",
    "console": "serve the fleet console (a web page) as you, or behind an authenticating proxy",
}
"""The long-running processes (and the agent's release hook), with their help texts."""

FLEET = {
    "status": "the fleet as a table: intents x clusters, phase, ready, URL, revision, why not",
    "explain": "why an intent is (not) serving on one cluster, link by link",
    "clusters": "managed clusters: add-on health, platform and version, intents, stale",
    "predict": "send a JSON input to a model on each cluster; the answers and their latency",
    "endpoint": "a model's fleet endpoint: its serving set (show), or HAProxy kept to every "
                "model's (serve)",
    "rollout": "a progressive rollout: status, history, pause, resume, undo, approve",
    "render": "the ManifestWorks the manager would write for an intent file (no hub needed)",
    "diff": "what an intent file would change in the hub's works, per cluster",
    "check": "preflight and health: the hub, OCM, the chart, the manager, each cluster",
    "version": "this command's version and the chart's on the hub",
    "uninstall-guard": "the chart's pre-delete hook: refuses an uninstall while intents exist",
}
"""The fleet commands (``addon_cli``): they read the hub with the user's kubeconfig."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the subcommand named on the command line; its exit code."""
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (argcomplete)
        import argcomplete

        argcomplete.autocomplete(full_parser())
    args_in = list(sys.argv[1:] if argv is None else argv)
    command, rest = (args_in[0], args_in[1:]) if args_in else ("", [])
    if command == "manager":
        from addon_manager import main as manager

        return manager.main(rest)
    if command == "agent":
        from addon_agent import main as agent

        return agent.main(rest)
    if command == "agent-release":
        from addon_agent import release

        return release.main(rest)
    if command == "console":
        from addon_cli.console import main as console

        return console.main(rest)
    if command in FLEET:
        from addon_cli import main as fleet

        return fleet.main(args_in)
    return _usage_or_crds(args_in)


def _own_commands(sub: Any) -> None:
    """``crds`` and ``completion``: the commands of this module itself."""
    crds = sub.add_parser("crds", help="write crds/*.yaml (and docs/api.md) from the models")
    crds.add_argument("--out", default="crds", help="directory for the CRD files")
    crds.add_argument("--docs", default="docs/api.md", help="API reference to write")
    comp = sub.add_parser("completion", help="print the shell code that completes this command "
                          "and kubectl-modelserving: eval \"$(model-serving-addon completion "
                          "bash)\"")
    comp.add_argument("shell", choices=("bash", "zsh", "fish", "tcsh", "powershell"))


def full_parser() -> argparse.ArgumentParser:
    """Every subcommand with its arguments: the fleet commands' own parsers (for completion)."""
    from addon_cli import main as fleet

    parser = argparse.ArgumentParser(prog="model-serving-addon")
    sub = parser.add_subparsers(dest="command", required=True)
    for command, help_text in ROLES.items():
        sub.add_parser(command, help=help_text, add_help=False)
    fleet.add_commands(sub)
    _own_commands(sub)
    return parser


def _usage_or_crds(args_in: list[str]) -> int:
    """``crds``, ``completion``, or argparse's help and usage errors for the whole command."""
    parser = argparse.ArgumentParser(prog="model-serving-addon")
    sub = parser.add_subparsers(dest="command", required=True)
    for command, help_text in {**ROLES, **FLEET}.items():
        sub.add_parser(command, help=help_text, add_help=False)
    _own_commands(sub)
    args = parser.parse_args(args_in)
    if args.command == "crds":
        from addon_api import crdgen

        return crdgen.main(args.out, args.docs)
    if args.command == "completion":
        from argcomplete.shell_integration import shellcode

        sys.stdout.write(shellcode(["model-serving-addon", "kubectl-modelserving"],
                                   shell=args.shell))
        return 0
    return 2
