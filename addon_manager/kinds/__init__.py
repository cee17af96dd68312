"""Kinds: what differs between the works the manager writes, one module per kind of work.

A module per hub kind (ModelServing, StorageConnection, MultiClusterServingRuntime,
MultiClusterInferenceService) and per helper work (the agent's identity, a tenant's access)
owns that work's render, feedback rules, gates and report; ``registry`` lists them, and the
engine and shell read a kind only through its ``KindSpec``. Pure: a module here imports
``addon_api``, ``facts`` and other ``kinds`` modules, never ``engine`` or ``shell``.
"""
