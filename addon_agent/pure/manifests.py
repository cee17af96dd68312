"""Pure helpers on Kubernetes objects as dicts, shared by the planners.

A leaf: imports nothing of the agent.
"""

from __future__ import annotations

import base64
import json
from typing import Any

Obj = dict[str, Any]


def b64(text: str) -> str:
    """Base64 of a UTF-8 string (Secret ``data`` values)."""
    return base64.b64encode(text.encode()).decode()


def json_of(data: dict[str, str], key: str) -> dict[str, Any]:
    """The JSON object under ``key`` of a ConfigMap's data ({} when absent or not one)."""
    try:
        current = json.loads(data.get(key) or "{}")
    except ValueError:
        return {}
    return current if isinstance(current, dict) else {}


def edit_json(data: dict[str, str], key: str, values: dict[str, Any]) -> None:
    """Merge ``values`` into the JSON object under ``key`` of a ConfigMap's data."""
    current = json_of(data, key)
    current.update(values)
    data[key] = json.dumps(current, indent=2, sort_keys=True)
