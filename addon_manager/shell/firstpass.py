"""The order of the first reconciles after a start or a takeover: changed intents first.

When a manager starts (or a standby takes over), every intent's daemon plans at once, and
each plan of thousands of clusters holds the event loop for a while. An intent whose spec
changed while no manager acted (``metadata.generation`` ahead of its status's
``observedGeneration``) is what an admin waits for; the others only confirm what their
works already hold. So the unchanged intents wait until every changed one has been through
its first reconcile (at most :attr:`FirstPass.limit` seconds), then run as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

IntentKey = tuple[str, str, str]
"""(kind, namespace, name)."""


def generation(body: Mapping[str, Any]) -> int:
    """An intent's ``metadata.generation`` (0 when it has none)."""
    return int((body.get("metadata") or {}).get("generation") or 0)


def changed(body: Mapping[str, Any]) -> bool:
    """Whether an intent's spec changed since its status was last written (or it has none).

    An intent being deleted is not: its removal runs instead of a reconcile (no daemon runs
    for it), so the others must not wait for it.
    """
    if (body.get("metadata") or {}).get("deletionTimestamp"):
        return False
    current = generation(body)
    return current == 0 or (body.get("status") or {}).get("observedGeneration") != current


@dataclass
class FirstPass:
    """Which intents plan first after a start; the others wait for them."""

    limit: float = 30.0
    """Longest an unchanged intent waits (a changed one may be gone or failing)."""
    pending: set[IntentKey] | None = None
    """Changed intents not yet through their first reconcile (None: not yet known)."""
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once ``pending`` is empty."""

    async def turn(self, key: IntentKey, changed_now: Callable[[], Iterable[IntentKey]],
                   is_changed: bool = False) -> None:
        """Return when intent ``key`` may make its first reconcile.

        ``changed_now`` lists the changed intents; it is called once, by the first daemon
        that asks (every intent is in kopf's index by then). ``is_changed``: ``key`` itself
        is changed now (one created or edited after that list was made): it waits for no one.
        """
        if self.pending is None:
            self.pending = set(changed_now())
            if not self.pending:
                self.settled.set()
        if is_changed or key in self.pending or self.settled.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.settled.wait(), self.limit)

    def skip(self, key: IntentKey, changed_now: Callable[[], Iterable[IntentKey]]) -> None:
        """Take ``key`` out of the first pass: another replica plans it (sharded managers)."""
        if self.pending is None:
            self.pending = set(changed_now())
        self.pending.discard(key)
        if not self.pending:
            self.settled.set()

    def first(self, key: IntentKey) -> bool:
        """Whether ``key`` is a changed intent still before its first reconcile."""
        return self.pending is not None and key in self.pending

    def reconciled(self, key: IntentKey) -> None:
        """Record that ``key`` made its first reconcile (successful or not)."""
        if self.pending is not None and key in self.pending:
            self.pending.discard(key)
            if not self.pending:
                self.settled.set()
