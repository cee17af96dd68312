"""The manager's sealer without a hub, for tests: state in memory, one set of keys per process.

The manager itself always loads its keys and keeps its pins on the hub
(:func:`addon_manager.shell.main.sealer_from_hub`); tests that reconcile on the fake hub build
their :class:`~addon_manager.shell.reconcile.Reconciler` with :func:`memory_sealer`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from addon_manager.shell.sealkeys import (
    APPROVE_PREFIX,
    PIN_PREFIX,
    SEQUENCE,
    Sealer,
    SealingKeys,
    next_block,
)


@dataclass
class MemoryStore:
    """A :class:`~addon_manager.shell.sealkeys.Store` in memory."""

    data: dict[str, str] = field(default_factory=dict)

    def allocate(self, size: int) -> int:
        """Allocate a block of sequences above the stored counter and the wall clock."""
        start, stored = next_block(int(self.data.get(SEQUENCE, "0")),
                                   time.time_ns() // 1000, size)
        self.data[SEQUENCE] = str(stored)
        return start

    def read_state(self) -> dict[str, str]:
        """The state ConfigMap's data, as a copy."""
        return dict(self.data)

    def write_pin(self, cluster: str, public_key: str) -> None:
        """Pin ``public_key`` for ``cluster`` and clear its approval."""
        self.data[PIN_PREFIX + cluster] = public_key
        self.data.pop(APPROVE_PREFIX + cluster, None)


_PROCESS_KEYS: list[SealingKeys] = []


def process_keys() -> SealingKeys:
    """The signing and hash keys of this test process (generated once)."""
    if not _PROCESS_KEYS:
        _PROCESS_KEYS.append(SealingKeys.generate())
    return _PROCESS_KEYS[0]


def memory_sealer() -> Sealer:
    """A sealer with no hub: this process's keys, nothing pinned yet."""
    return Sealer(process_keys(), MemoryStore())
