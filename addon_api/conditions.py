"""The one condition builder of the manager and the agent (Kubernetes-style conditions)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from addon_api.common import Condition

MAX_MESSAGE = 32768
"""Longest condition message the API admits (as metav1.Condition)."""


def _kept_time(old: Condition | Mapping[str, Any], ctype: str, status: str) -> datetime | None:
    """The lastTransitionTime of ``old`` when it is a ``ctype`` condition with ``status``."""
    if isinstance(old, Condition):
        if old.type == ctype and old.status == status:
            return old.last_transition_time
        return None
    stamp = old.get("lastTransitionTime")
    if old.get("type") != ctype or old.get("status") != status or not stamp:
        return None
    if isinstance(stamp, datetime):
        return stamp
    try:
        return datetime.fromisoformat(str(stamp))
    except ValueError:
        return None  # not a time the API server would have stored: the transition is now


def condition(
    ctype: str,
    ok: bool,
    reason: str,
    message: str,
    *,
    previous: Iterable[Condition | Mapping[str, Any]] = (),
    generation: int | None = None,
    now: datetime | None = None,
    max_message: int = MAX_MESSAGE,
) -> Condition:
    """The ``ctype`` condition, status True when ``ok``.

    ``previous`` holds the conditions last written (models, or dicts as read from the API
    server): when one of this type has the same status and a lastTransitionTime, that time
    is kept (the status did not change; the last such entry wins); otherwise the transition
    is ``now`` (default: the current UTC second). ``message`` is cut to ``max_message``
    characters; ``generation`` is the observedGeneration (left out when None).
    ``Condition.to_dict()`` gives the wire form.
    """
    status: Literal["True", "False"] = "True" if ok else "False"
    since: datetime | None = None
    for old in previous:
        kept = _kept_time(old, ctype, status)
        if kept is not None:
            since = kept
    if since is None:
        since = now if now is not None else datetime.now(UTC).replace(microsecond=0)
    return Condition(
        type=ctype,
        status=status,
        reason=reason,
        message=message[:max_message],
        observed_generation=generation,
        last_transition_time=since,
    )
