"""The program: the ``model-serving-addon`` command, the one entry point above every role.

It owns the command line and nothing else: ``manager`` runs :mod:`addon_manager`, ``agent``
and ``agent-release`` run :mod:`addon_agent`, the fleet commands (``status``, ``explain``, ...)
run :mod:`addon_cli`, and ``crds`` writes the CRDs through :mod:`addon_api.crdgen`. It is the
top layer and may import every product package (each role only inside its own subcommand, so
the manager never loads agent code and the other way round); no product package imports it,
and it never imports the harness (``testbed``, ``tests``, ``bench``). The contracts in
``.importlinter`` enforce this.
"""
