"""Shell: everything that talks to the hub or keeps the process's state.

The kopf handlers, the informers that turn
watch events into facts, the writer and the executor that carry out a plan, the reconciler
that runs plan, execute and status write in sequence, leader election, the hub HTTP client,
Prometheus metrics, the Secret watches, the sealing keys' store and ``main``. A module here
may import every layer below (``engine``, ``kinds``, ``facts``) and ``addon_api``; nothing
below imports it.
"""
