"""The Argo CD health check of the hub intents (docs/gitops.md), run as Argo CD runs it.

Argo CD evaluates ``resource.customizations.health.<group>_<kind>`` scripts in gopher-lua, a
Lua 5.1, with the live object decoded from JSON into Lua tables (objects and lists alike;
lists from index 1; ``null`` absent) as the global ``obj``; the script returns a table with
``status`` and ``message``. Here the script runs in Lua 5.1 (lupa) on the same decoding.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from lupa import lua51 as lupa

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "charts" / "model-serving-addon" / "files" / "argocd" / "health.lua"
PAGE = ROOT / "docs" / "gitops.md"
KINDS = ("ModelServing", "StorageConnection", "MultiClusterServingRuntime",
         "MultiClusterInferenceService")


def health(obj: dict[str, Any]) -> tuple[str, str]:
    """(status, message) of ``obj`` as the script judges it in a fresh Lua 5.1."""
    lua = lupa.LuaRuntime(unpack_returned_tuples=True)

    def table(value: Any) -> Any:
        if isinstance(value, dict):
            return lua.table_from({k: table(v) for k, v in value.items() if v is not None})
        if isinstance(value, list):
            return lua.table_from([table(v) for v in value])  # indexed from 1
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int | float):
            return float(value)  # JSON numbers are Lua numbers (float64)
        return value

    lua.globals().obj = table(obj)
    hs = lua.execute(SCRIPT.read_text())
    return str(hs["status"]), str(hs["message"])


def intent(phase: str | None = "Ready", generation: int = 3, observed: int = 3,
           rollout: dict[str, Any] | None = None, message: str = "") -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "modelserving.opendatahub.io/v1alpha1",
                           "kind": "MultiClusterInferenceService",
                           "metadata": {"name": "iris", "generation": generation}}
    if phase is not None:
        obj["status"] = {
            "observedGeneration": observed, "phase": phase,
            "summary": {"desired": 2, "ready": 1, "readyText": "1/2"},
            "conditions": [{"type": "Applied", "status": "True", "message": "applied"},
                           {"type": "Ready", "status": "False", "message": message}],
        }
        if rollout is not None:
            obj["status"]["rollout"] = rollout
    return obj


@pytest.mark.parametrize(("obj", "want"), [
    (intent(None), ("Progressing", "waiting for the model-serving manager")),
    (intent(observed=2), ("Progressing", "the manager has not seen generation 3 yet")),
    (intent("Ready"), ("Healthy", "Ready (1/2 clusters ready)")),
    (intent("Degraded", message="cluster2: CrashLooping"),
     ("Degraded", "Degraded (1/2 clusters ready): cluster2: CrashLooping")),
    (intent("Invalid", message="spec.targetNamespace: not allowed"),
     ("Degraded", "Invalid (1/2 clusters ready): spec.targetNamespace: not allowed")),
    (intent("Progressing", message="waiting for cluster2"),
     ("Progressing", "Progressing (1/2 clusters ready): waiting for cluster2")),
    (intent("Pending"), ("Progressing", "Pending (1/2 clusters ready): ")),
    (intent("Ready", rollout={"phase": "RolledBack", "message": "revision 2 failed"}),
     ("Degraded", "rollout RolledBack: revision 2 failed")),
    (intent("Progressing", rollout={"phase": "Halted", "message": "step 1 failed"}),
     ("Degraded", "rollout Halted: step 1 failed")),
    (intent("Progressing", rollout={"phase": "Paused", "message": "paused by annotation"}),
     ("Suspended", "rollout Paused: paused by annotation")),
    (intent("Progressing", rollout={"phase": "WaitingForApproval", "message": "step 2"}),
     ("Suspended", "rollout WaitingForApproval: step 2")),
    (intent("Ready", rollout={"phase": "Complete", "message": "done"}),
     ("Healthy", "Ready (1/2 clusters ready)")),
], ids=lambda v: v[0] if isinstance(v, tuple) else None)
def test_each_state_of_an_intent_has_its_argo_cd_health(obj: dict[str, Any],
                                                         want: tuple[str, str]) -> None:
    assert health(obj) == want


def test_a_status_without_conditions_or_summary_is_still_judged() -> None:
    obj = intent("Degraded")
    del obj["status"]["conditions"], obj["status"]["summary"]
    assert health(obj) == ("Degraded", "Degraded: ")


def test_the_pages_command_patches_argocd_cm_with_the_charts_script_for_each_kind() -> None:
    block = re.search(r"```sh\n(for kind in .*?)\ndone\n```", PAGE.read_text(), re.S)
    assert block, "docs/gitops.md lost its command"
    kinds = re.search(r"for kind in (.*?); do", block.group(1))
    assert kinds and tuple(kinds.group(1).split()) == KINDS
    jq = block.group(1).split("; do\n", 1)[1].split(" > ", 1)[0]
    for kind in KINDS:
        out = subprocess.run(["bash", "-c", f"kind={kind}; {jq}"], cwd=ROOT, check=True,
                             capture_output=True, text=True, timeout=30).stdout
        assert json.loads(out) == {"data": {
            f"resource.customizations.health.modelserving.opendatahub.io_{kind}":
                SCRIPT.read_text()}}
