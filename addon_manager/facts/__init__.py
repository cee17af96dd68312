"""Facts: what the manager knows about the hub, as small immutable records and pure queries.

The records of ManifestWorks, ManagedClusters, add-ons, Secrets and ControllerRevisions as
the watches parse them, the deterministic names of what the manager writes, the ``World``
protocol the planner reads them through, and the sealing view the planner may read. No I/O
and no state: a module here imports the API contract (``addon_api``) and other ``facts``
modules only, never ``kinds``, ``engine`` or ``shell``.
"""
