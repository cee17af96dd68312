"""The one truncated-hash helper of the manager, the agent and the API package."""

from __future__ import annotations

import hashlib
import hmac


def short_hash(*parts: str | bytes, length: int) -> str:
    """The first ``length`` hex digits of the SHA-256 of ``parts`` joined by NUL bytes.

    Strings are UTF-8 encoded. The separator keeps parts from running together
    (``("ab", "c")`` and ``("a", "bc")`` differ); one part is hashed as it is.
    """
    data = b"\x00".join(p.encode() if isinstance(p, str) else p for p in parts)
    return hashlib.sha256(data).hexdigest()[:length]


def keyed_hash(key: bytes, *parts: str | bytes, length: int) -> str:
    """The first ``length`` hex digits of HMAC-SHA256 under ``key`` of ``parts`` (NUL-joined).

    Unlike :func:`short_hash`, nobody without ``key`` can compute it, so publishing it does not
    let a reader test guesses of what went in.
    """
    data = b"\x00".join(p.encode() if isinstance(p, str) else p for p in parts)
    return hmac.new(key, data, hashlib.sha256).hexdigest()[:length]
