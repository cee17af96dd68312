"""The agent's shell: kopf wiring, the agent's state and reconciles, the background loops.

May import every other part of the agent (``addon_agent.io``, ``addon_agent.pure``, the base
modules ``stacks``, ``labels``, ``config``) and ``addon_api``; only the programs
(``addon_agent.main``, ``addon_agent.release``) import it. ``handlers`` registers the kopf
handlers, each calling one method of ``agent.Agent``; ``agent`` reads through ``io``, asks
``pure.decisions`` for the status and writes it once (``Agent.finish``); ``background`` runs
the key refresh and the model metrics and data-plane loops. ``agent`` and ``background``
do not import each other.
"""
