"""What planning may know of the manager's sealing state: agents' keys and a read-only view.

The sealer itself (keys, sequences, pins written to the hub) is the shell's
(:mod:`addon_manager.shell.sealkeys`); the planner and the kinds read it only through
:class:`SealingView`, and a new pin is returned in the plan, never recorded by them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class AgentKey:
    """An agent's published public key (from the identity work's feedback)."""

    public_key: str
    key_id: str


class HashKey(Protocol):
    """The render-hash key of works that carry sealed data (never logged)."""

    @property
    def hash_key(self) -> bytes:
        """HMAC key of the render hash."""


class SealingView(Protocol):
    """The sealer as planning reads it: the hash key, pins and approvals (read only)."""

    @property
    def keys(self) -> HashKey:
        """The manager's keys (planning reads the hash key only)."""

    def pinned(self, cluster: str) -> AgentKey | None:
        """The agent key pinned for ``cluster`` (None: none yet)."""

    def approved(self, cluster: str) -> str:
        """The key id a hub admin approved for ``cluster`` ("" for none)."""

    def approve_hint(self, cluster: str, key_id: str) -> str:
        """The command that approves ``key_id`` for ``cluster``."""
