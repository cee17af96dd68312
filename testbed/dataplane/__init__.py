"""The testbed's real data plane: predictor pods of known serving runtimes run as processes.

``podspec`` translates a Pod object into processes (pure, no I/O); ``runner`` runs them like a
kubelet would (init containers in order, restarts with back-off, readiness from the server's
own endpoint); ``envs`` installs the real servers into virtualenvs of their own under the cache
and trains the models they serve. ``entrypoints/`` holds the small scripts that run *inside*
those virtualenvs: they import the servers' packages, never the testbed.
"""
