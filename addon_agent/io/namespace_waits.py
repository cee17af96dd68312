"""Which sealed connections wait for which target namespaces to appear.

A delivery into a namespace that does not exist yet (or is still terminating) is Pending, not
failed. The agent records it here and delivers again the moment the namespace is there (its
namespace watch), instead of waiting for the next resync.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

Connection = tuple[str, str]
"""(namespace, name) of a SealedStorageConnection."""


class NamespaceWaits:
    """A thread-safe map from target namespace to the connections waiting for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, set[Connection]] = {}

    def wait(self, connection: Connection, namespaces: Iterable[str]) -> None:
        """Record that ``connection`` waits for ``namespaces`` (replacing what it waited for)."""
        with self._lock:
            self._forget(connection)
            for ns in namespaces:
                self._waiting.setdefault(ns, set()).add(connection)

    def done(self, connection: Connection) -> None:
        """``connection`` waits for nothing (delivered, failed for another reason, or gone)."""
        with self._lock:
            self._forget(connection)

    def take(self, namespace: str) -> list[Connection]:
        """The connections waiting for ``namespace``, sorted; they stop waiting for it."""
        with self._lock:
            return sorted(self._waiting.pop(namespace, set()))

    def waiting_for(self, namespace: str) -> bool:
        """Whether any connection waits for ``namespace``."""
        with self._lock:
            return bool(self._waiting.get(namespace))

    def _forget(self, connection: Connection) -> None:
        for ns in [ns for ns, conns in self._waiting.items() if connection in conns]:
            self._waiting[ns].discard(connection)
            if not self._waiting[ns]:
                del self._waiting[ns]
