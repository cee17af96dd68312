"""Benchmarks of the hub manager against OCM's own fan-out and the API server's limit.

Run with ``python -m bench.fanout``, ``python -m bench.steady``, ``python -m bench.status``;
results and how to read them are in ``docs/benchmarks.md``.
"""
