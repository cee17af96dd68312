"""Engine: the pure decisions of a reconcile, from facts to a plan and from a plan to a status.

The planner (which works to apply, delete and pin, per cluster), the status aggregation,
progressive rollouts and their metric-gate arithmetic, the admin's policy judged on rendered
works, and the partition rule for clusters that are not Available. Everything is a function
of its inputs (no I/O, no clock read inside, no global state); a module here imports
``addon_api``, ``facts``, ``kinds`` and other ``engine`` modules, never ``shell``.
"""
