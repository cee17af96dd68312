"""The agent's I/O: reads and writes of the cluster, the disk and the network; no decisions.

May import ``addon_agent.pure``, the base modules (``stacks``, ``labels``, ``config``), the
build tools ``bundle_render`` and ``kustomize``, and ``addon_api``; never
``addon_agent.shell``. In rows, top to bottom (a module imports only rows below its own):
``planner`` (bundle + facts + webhook certificates -> a plan) and ``applier`` (a plan ->
ordered writes, pruning, uninstall), which do not import each other; ``observe`` (the reads
the decisions need), ``webhook_ca``, ``namespaces``, ``delivery``, ``identity``, ``ledger``,
``lease``, ``bundle_source``, ``login``, ``metrics`` (the process's ``/metrics``),
``namespace_waits`` (which connections wait for which namespace, in memory); ``inventory``,
``crd_cache``; ``kube``, the client every other module goes through.
"""
