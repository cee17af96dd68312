"""Whether a model keeps serving while something under it changes (a stack upgrade, say).

KServe's own Ready on an InferenceService is not that: in Standard (raw) mode, while the
predictor Deployment rolls (a new runtime image after an upgrade), KServe sets the predictor's
condition, and so Ready, to Unknown with the Deployment's Progressing reason until the new
ReplicaSet is available, although the old pods serve throughout. A rolling update keeps the
Deployment's available replicas up (a single replica's rounded-down maxUnavailable is 0), so
"serving" is: Ready, or not Ready only because the predictor is rolling, and never Failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ROLLING_REASONS = frozenset({"NewReplicaSetCreated", "FoundNewReplicaSet", "ReplicaSetUpdated"})
"""A Deployment's Progressing reasons while a new ReplicaSet rolls out (KServe passes them on)."""


def hub_entry_serving(entry: Mapping[str, Any]) -> bool:
    """Whether a hub status entry of an InferenceService says the model serves.

    Ready, or Progressing only because KServe rolls the model's Deployment (the hub, honestly,
    does not call that Ready).
    """
    if entry.get("ready"):
        return True
    return entry.get("phase") == "Progressing" and entry.get("reason") in ROLLING_REASONS


def isvc_serving(isvc: Mapping[str, Any]) -> bool:
    """KServe's Ready condition is True, or Unknown only because the predictor rolls."""
    ready: Mapping[str, Any] = next((x for x in (isvc.get("status") or {}).get("conditions") or []
                  if x.get("type") == "Ready"), {})
    return ready.get("status") == "True" or (
        ready.get("status") == "Unknown" and ready.get("reason") in ROLLING_REASONS)
