"""The manager's entry point: ``main(argv)`` runs the hub manager (:mod:`addon_manager.shell.main`).

The program's command line calls this function; the process itself (arguments, clients,
leader election, kopf) is built in the shell.
"""

from __future__ import annotations

from addon_manager.shell.main import main

__all__ = ["main"]
