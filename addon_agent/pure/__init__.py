"""The agent's decisions and planning: pure functions, no I/O (no cluster client, no kopf).

May import the base modules (``addon_agent.stacks``, ``labels``, ``config``) and
``addon_api``; never ``addon_agent.io`` or ``addon_agent.shell``. In rows, top to bottom:
``decisions`` (the ServingPlatform reconcile: what was read -> the status to write);
``planning`` (the generic planner), ``dataplane``, ``ownership``, ``removal``, ``status``,
``tenancy``, ``storage``, ``certs``; one module per stack, ``kserve_plan`` and
``modelmesh_plan``, which do not import each other; ``pod_security``, ``profiles``,
``manifests`` (object helpers).
"""
