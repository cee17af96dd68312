"""What the manager keeps of hub Secrets and of its right to read them: records, no I/O.

The watches (:mod:`addon_manager.shell.secrets`) parse each Secret into a :class:`SecretFact`
(a digest of its data, its key names and the keys whose value is not base64 of UTF-8 text;
never the data) and each namespace's access into a :class:`SecretAccess`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from addon_api.hashing import short_hash


@dataclass(frozen=True)
class SecretFact:
    """What the manager keeps of a hub Secret (never the data)."""

    digest: str
    keys: tuple[str, ...]
    undecodable: tuple[str, ...] = ()
    """Keys whose value is not valid base64 of UTF-8 text."""


@dataclass(frozen=True)
class SecretAccess:
    """Whether the manager can read the Secrets of a namespace."""

    state: Literal["readable", "pending", "forbidden"]
    detail: str = ""


READABLE = SecretAccess("readable")
PENDING = SecretAccess("pending")


def decode_value(value: str) -> str | None:
    """A Secret's ``data`` value as text, None when it is not base64 of UTF-8."""
    try:
        return base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        return None


def parse_secret(data: Mapping[str, Any] | None) -> SecretFact:
    """The :class:`SecretFact` of a Secret's ``data`` (base64 values)."""
    data = dict(data or {})
    digest = short_hash(*(f"{k}={data[k]}" for k in sorted(data)), length=32)
    bad = tuple(sorted(k for k, v in data.items() if decode_value(str(v)) is None))
    return SecretFact(digest, tuple(sorted(data)), bad)


def forbidden_detail(namespace: str, reason: str = "") -> str:
    """What a hub admin grants so that the manager may read the Secrets of ``namespace``."""
    return (
        f"the manager may not read Secrets in namespace {namespace}"
        + (f" ({reason})" if reason else "")
        + f"; a hub admin grants it get, list and watch on secrets there: add {namespace} to "
        "the chart's manager.secretNamespaces (a RoleBinding there to the manager's "
        "ClusterRole <release>-manager-secrets)"
    )
