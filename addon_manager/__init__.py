"""Hub-side manager: hub intents to ManifestWorks, status back.

Four layers, each a package that imports only the ones below it (checked by import-linter,
``docs/architecture.md``, "Manager layout"): :mod:`addon_manager.shell` (kopf handlers,
informers, writes, the process) over :mod:`addon_manager.engine` (pure planning, status and
rollouts) over :mod:`addon_manager.kinds` (one module per hub kind and per helper work: its
render, gates, feedback and report) over :mod:`addon_manager.facts` (records and queries of
what the hub holds). :mod:`addon_manager.main` is the manager's entry point.
"""
