"""Spoke-side agent: installs the serving stack and reports status.

Its floor plan, top to bottom; a part imports only from the parts below it
(``.importlinter``, ``docs/architecture.md``, "Agent layout"): the programs
``main`` (``model-serving-addon agent``) and ``release`` (``agent-release``, OCM's
pre-delete hook); ``shell`` (kopf wiring, the agent's state and reconciles, the loops);
``io`` (reads and writes of the cluster, disk and network, deciding nothing); the build
tools ``bundle_render`` and ``kustomize``; ``pure`` (decisions and planning, no I/O); the
base modules ``stacks`` (the pins), ``labels`` and ``config``, which import only
``addon_api``. Each package's docstring says what it holds and may import.
"""
