"""The manager's view of hub Secrets: one list+watch per namespace that holds StorageConnections.

The manager has no cluster-wide right on Secrets. A hub admin grants it a namespaced Role
(get, list, watch on ``secrets``) in each namespace whose StorageConnections it may deliver
(the chart's ``manager.secretNamespaces``). The manager starts a watch for a namespace when a
StorageConnection there is first reconciled; a 403 marks the namespace forbidden (its
StorageConnections show ``SecretForbidden``) and the watch is retried, so a grant made later
takes effect without a restart.

The store keeps, per Secret, a :class:`~addon_manager.facts.secrets.SecretFact` (a digest of
its data, its key names and the keys whose value is not base64 of UTF-8 text): never the data
(the reconcile reads a Secret right before sealing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from addon_manager.facts.secrets import (
    PENDING,
    READABLE,
    SecretAccess,
    SecretFact,
    forbidden_detail,
    parse_secret,
)
from addon_manager.shell.corev1 import CoreV1

log = logging.getLogger(__name__)

RETRY_FORBIDDEN = 10.0
"""Seconds between two attempts to list Secrets in a namespace the manager may not read."""
RETRY_ERROR = 2.0
WATCH_TIMEOUT = 240
"""Seconds a watch request lasts before it is renewed (from the last resourceVersion)."""


@dataclass
class _Namespace:
    access: SecretAccess = PENDING
    secrets: dict[str, SecretFact] = field(default_factory=dict)
    settled: asyncio.Event = field(default_factory=asyncio.Event)


Changed = Callable[[str, str | None], None]
"""Called on the event loop with (namespace, Secret name) when a Secret changed, or
(namespace, None) when the namespace's access changed."""


class SecretWatches:
    """Per-namespace Secret watches (one thread each) feeding a store read on the event loop."""

    def __init__(self, api_client: client.ApiClient, on_change: Changed) -> None:
        self.core = CoreV1(api_client)
        self.on_change = on_change
        self._ns: dict[str, _Namespace] = {}
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def stop(self) -> None:
        """Stop every watch (threads end at their next event or timeout)."""
        self._stop.set()

    def ensure(self, namespace: str) -> None:
        """Start watching ``namespace`` (once); call on the event loop."""
        if namespace in self._ns:
            return
        self._loop = asyncio.get_running_loop()
        self._ns[namespace] = _Namespace()
        threading.Thread(
            target=self._run, args=(namespace,), daemon=True, name=f"secrets-{namespace}"
        ).start()

    async def settled(self, namespace: str, timeout: float = 10.0) -> None:
        """Start watching ``namespace`` and wait until its first list succeeded or failed."""
        self.ensure(namespace)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ns[namespace].settled.wait(), timeout)

    def access(self, namespace: str) -> SecretAccess:
        """Whether the Secrets of ``namespace`` are readable (pending before the first list)."""
        found = self._ns.get(namespace)
        return found.access if found else PENDING

    def get(self, namespace: str, name: str) -> SecretFact | None:
        """The Secret as last seen, None when it does not exist (or is not known)."""
        found = self._ns.get(namespace)
        return found.secrets.get(name) if found else None

    # event-loop side ------------------------------------------------------------------------

    def _post(self, fn: Callable[..., None], *args: Any) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(fn, *args)

    def _listed(self, namespace: str, facts: dict[str, SecretFact]) -> None:
        ns = self._ns[namespace]
        before, old = ns.access, ns.secrets
        ns.secrets, ns.access = facts, READABLE
        ns.settled.set()
        if before != READABLE:
            self.on_change(namespace, None)
        for name in set(old) | set(facts):
            if old.get(name) != facts.get(name):
                self.on_change(namespace, name)

    def _event(self, namespace: str, kind: str, name: str, fact: SecretFact) -> None:
        ns = self._ns[namespace]
        before = ns.secrets.get(name)
        if kind == "DELETED":
            ns.secrets.pop(name, None)
        else:
            ns.secrets[name] = fact
        if before != ns.secrets.get(name):
            self.on_change(namespace, name)

    def _denied(self, namespace: str, detail: str) -> None:
        ns = self._ns[namespace]
        new = SecretAccess("forbidden", detail)
        changed = ns.access != new
        ns.access, ns.secrets = new, {}
        ns.settled.set()
        if changed:
            log.warning("Secrets of %s: %s", namespace, detail)
            self.on_change(namespace, None)

    # watch threads --------------------------------------------------------------------------

    def _run(self, namespace: str) -> None:
        while not self._stop.is_set():
            try:
                listed = self.core.list("secrets", namespace)
                facts = {s["metadata"]["name"]: parse_secret(s.get("data"))
                         for s in listed.get("items") or []}
                self._post(self._listed, namespace, facts)
                version = str(listed["metadata"]["resourceVersion"])
                while not self._stop.is_set():
                    for event in self.core.watch("secrets", namespace, version, WATCH_TIMEOUT):
                        obj = event["object"]
                        version = str(obj["metadata"]["resourceVersion"])
                        self._post(self._event, namespace, event["type"],
                                   obj["metadata"]["name"], parse_secret(obj.get("data")))
            except ApiException as err:
                if err.status in (401, 403):
                    self._post(self._denied, namespace,
                               forbidden_detail(namespace, f"HTTP {err.status} {err.reason}"))
                    self._stop.wait(RETRY_FORBIDDEN)
                    continue
                log.info("watch of Secrets in %s ended (%s); listing again", namespace,
                         err.status)
                self._stop.wait(RETRY_ERROR)
            except Exception as err:  # connection reset, API server restart: list again
                log.info("watch of Secrets in %s failed (%s); listing again", namespace, err)
                self._stop.wait(RETRY_ERROR)
