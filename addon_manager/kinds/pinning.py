"""Which agent key the manager seals to on a cluster: the pinned one, and explicit rotation.

Pure decisions. The pins and approvals live in the manager-owned ConfigMap
``model-serving-sealing`` in the manager's namespace (see :mod:`addon_manager.shell.sealkeys`): only
hub admins of that namespace and the manager write there, not the authors of ManifestWorks
in cluster namespaces, who could otherwise substitute the key they read credentials with.

* No pin yet: the key the agent publishes is pinned (trust on first use) and sealed to.
* The published current key is the pinned one: sealed to. When the agent also publishes a
  next key (a rotation it was asked for) and a hub admin approved that key id
  (``approve.<cluster>``), the next key is pinned and everything is resealed to it.
* The pinned key is the agent's published next key (rotation approved, agent not yet
  switched): sealed to it; the agent opens with either key meanwhile.
* Anything else is a changed key (``AgentKeyChanged``): nothing is sealed to it, what was
  delivered stays, until a hub admin approves that key id.
"""

from __future__ import annotations

from dataclasses import dataclass

from addon_api import constants as c
from addon_api import sealing
from addon_api.reasons import ClusterReason
from addon_manager.facts.records import WorkFact
from addon_manager.facts.sealing import AgentKey

REASON_KEY_CHANGED = ClusterReason.AGENT_KEY_CHANGED
REASON_IDENTITY_INVALID = ClusterReason.IDENTITY_WORK_INVALID


@dataclass(frozen=True)
class Published:
    """What the agent publishes through the identity work: its key, and a next one."""

    current: AgentKey
    next: AgentKey | None = None


@dataclass(frozen=True)
class Decision:
    """The key to seal to (None: do not seal), a new pin to record, or why not."""

    key: AgentKey | None
    pin: AgentKey | None = None
    reason: str = ""
    message: str = ""


def decide(
    cluster: str, pinned: AgentKey | None, approved: str, published: Published,
    approve_hint: str = "",
) -> Decision:
    """What to seal to on ``cluster`` (see the module docstring).

    ``pinned`` is the key recorded on the hub, ``approved`` a key id a hub admin approved
    ("" for none) and ``approve_hint`` the command that approves (for the message).
    """
    current, nxt = published.current, published.next
    if pinned is None:
        return Decision(current, pin=current)
    if pinned.public_key == current.public_key:
        if nxt is not None and approved == nxt.key_id:
            return Decision(nxt, pin=nxt)
        return Decision(current)
    if nxt is not None and pinned.public_key == nxt.public_key:
        return Decision(nxt)
    if approved == current.key_id:
        return Decision(current, pin=current)
    return Decision(
        None, reason=REASON_KEY_CHANGED,
        message=(
            f"cluster {cluster}: the agent publishes key {current.key_id}, not the key "
            f"{pinned.key_id} pinned on the hub; nothing is sealed to it (what was delivered "
            f"stays) until a hub admin approves key {current.key_id}"
            + (f": {approve_hint}" if approve_hint else "")
        ),
    )


def published(identity: WorkFact | None) -> Published | None:
    """The keys an identity work reports (None when the agent has published none)."""
    if identity is None:
        return None

    def key(pk: str, kid: str) -> AgentKey | None:
        public = identity.value(pk)
        if not isinstance(public, str) or not public:
            return None
        try:  # the id is computed here, never taken from the feedback
            return AgentKey(public, sealing.key_id(public))
        except sealing.SealError:
            return None

    current = key(c.IDENTITY_PUBLIC_KEY, c.IDENTITY_KEY_ID)
    if current is None:
        return None
    return Published(current, key(c.IDENTITY_NEXT_PUBLIC_KEY, c.IDENTITY_NEXT_KEY_ID))
