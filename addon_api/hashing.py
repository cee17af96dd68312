"""The one truncated-hash helper of the manager, the agent and the API package."""

from __future__ import annotations

import hashlib


def short_hash(*parts: str | bytes, length: int) -> str:
    """The first ``length`` hex digits of the SHA-256 of ``parts`` joined by NUL bytes.

    Strings are UTF-8 encoded. The separator keeps parts from running together
    (``("ab", "c")`` and ``("a", "bc")`` differ); one part is hashed as it is.
    """
    data = b"\x00".join(p.encode() if isinstance(p, str) else p for p in parts)
    return hashlib.sha256(data).hexdigest()[:length]
