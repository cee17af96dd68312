"""storage-config entries owned by SealedStorageConnections (pure merge logic)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from addon_agent import labels as lb

Obj = dict[str, Any]


class EntryConflict(ValueError):
    """The entry exists and was written by someone else."""


@dataclass(frozen=True)
class SecretEdit:
    """New data and owner map of a storage-config Secret (data None: delete the Secret)."""

    data: dict[str, str] | None
    owners: dict[str, str]


def owners_of(secret: Obj | None) -> dict[str, str]:
    """Entry name -> owning SealedStorageConnection (ns/name) recorded on the Secret."""
    annotations = ((secret or {}).get("metadata") or {}).get("annotations") or {}
    try:
        owners = json.loads(annotations.get(lb.ANNOTATION_OWNED_ENTRIES, "{}"))
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in owners.items()} if isinstance(owners, dict) else {}


def put_entry(secret: Obj | None, entry: str, owner: str, payload: dict[str, Any]) -> SecretEdit:
    """Add or update ``entry`` for ``owner``; refuse to overwrite an entry owned by others."""
    data = dict(((secret or {}).get("data")) or {})
    owners = owners_of(secret)
    if entry in data and owners.get(entry) != owner:
        who = owners.get(entry, "someone else")
        raise EntryConflict(f"entry {entry!r} already exists and belongs to {who}")
    data[entry] = base64.b64encode(json.dumps(payload, sort_keys=True).encode()).decode()
    owners[entry] = owner
    return SecretEdit(data, owners)


def remove_entry(
    secret: Obj | None, entry: str, owner: str, created_by_agent: bool
) -> SecretEdit | None:
    """Remove ``entry`` if ``owner`` owns it; None when nothing changes."""
    owners = owners_of(secret)
    if secret is None or owners.get(entry) != owner:
        return None
    data = dict(secret.get("data") or {})
    data.pop(entry, None)
    owners.pop(entry)
    if not data and created_by_agent:
        return SecretEdit(None, owners)
    return SecretEdit(data, owners)


def entries_owned_by(secret: Obj | None, owner: str) -> list[str]:
    """Entries of a Secret owned by ``owner``."""
    return sorted(e for e, o in owners_of(secret).items() if o == owner)


def json_owners(owners: dict[str, str]) -> str:
    """The owned-entries annotation value."""
    return json.dumps(owners, sort_keys=True, separators=(",", ":"))
