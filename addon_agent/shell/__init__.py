"""The agent's shell: kopf wiring, the reconciles that read, decide and write, the loops.

May import every other part of the agent (``addon_agent.io``, ``addon_agent.pure``, the tools,
the base modules ``stacks``, ``labels``, ``config``) and ``addon_api``; only the program
``addon_agent.main`` imports it. In rows, top to bottom: ``handlers`` registers the kopf
handlers, each calling one method; ``agent`` (the client and the two reconcilers, built
once) and ``background`` (key refresh, model metrics and data-plane loops); ``platform``
(ServingPlatforms: read through ``io``, ask ``pure.decisions``, write the one status in
``Platforms.finish``) and ``sealed`` (SealedStorageConnections: deliver, write the status).
Modules of one row do not import each other.
"""
