"""The test-support library: what ``tests/`` and ``bench/`` share besides the fleet itself.

It is test harness, not product: like the rest of ``testbed`` it never ships in the wheel or
the image, and nothing here imports ``tests``.

| module | holds |
|---|---|
| ``waiting`` | ``eventually``: poll until a check passes |
| ``manager`` | the manager as a subprocess, hub CRDs and identities, intents, work status |
| ``fake_fleet`` | spoke-less ManagedClusters on the hub and what the manager must write for them |
| ``agent`` | rendered bundles, the agent as a subprocess, ServingPlatform helpers |
| ``containerfile`` | the Containerfile read as a builder reads it (stages, COPY, runtime PATH) |

The chart helpers (real helm against the chart) are :mod:`testbed.chart`. The pytest fixtures
built on these (``spoke``, ``agent``, ``bundles``, ``testbed``, ...) live in
``tests/conftest.py``.
"""
