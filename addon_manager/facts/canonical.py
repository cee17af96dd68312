"""Hashes of JSON values in canonical form (sorted keys, no spaces): render and revision digests."""

from __future__ import annotations

import json
from typing import Any

from addon_api.hashing import keyed_hash, short_hash


def canonical_hash(value: Any) -> str:
    """SHA-256 (hex, first 32 digits) of the canonical JSON form of ``value``."""
    data = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return short_hash(data, length=32)


def keyed_canonical_hash(key: bytes, value: Any) -> str:
    """HMAC-SHA256 (hex, first 32 digits) under ``key`` of the canonical JSON of ``value``."""
    data = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return keyed_hash(key, data, length=32)
