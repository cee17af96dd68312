"""What a spoke feeds back never breaks the hub's status fold (issue 29, item 6).

A tenant's container can write a 4 KiB termination message that KServe copies into the
InferenceService's ``lastFailureInfo``; an agent on a compromised cluster can write anything
into its ServingPlatform's status. The hub shows every fed-back string bounded (cut, with a
marker) and inert (no control characters or bidirectional overrides), and its reconcile never
fails on one: the property test feeds random oversized and hostile feedback through the real
reconciler.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from addon_api.base import TRUNCATED, sanitized
from addon_api.common import ClusterStatus, Condition
from tests.unit.test_status_truth_table import MCIS, MSV, healthy_fleet

HOSTILE = hs.text(alphabet=hs.characters(codec="utf-8"), max_size=6000) | hs.sampled_from([
    "x" * 5000, "\x1b[31mred\x1b[0m" * 300, "\u202etxt.exe" * 10, "\x00" * 2000,
    "line\nline\ttab\r\x07" * 400,
])


def _inert(text: str) -> bool:
    return all(ch in "\n\t" or (unicodedata.category(ch) != "Cc"
                                and ch not in "\u202a\u202b\u202c\u202d\u202e")
               for ch in text)


def test_sanitized_cuts_with_a_marker_and_drops_controls() -> None:
    assert sanitized("ok", 10) == "ok"
    cut = sanitized("a" * 50, 20)
    assert len(cut) == 20 and cut.endswith(TRUNCATED)
    assert sanitized("a\x1b[1mb\u202ec\x00d\ne\tf", 100) == "a[1mbcd\ne\tf"
    assert len(sanitized("a" * 50, 5)) == 5


def test_models_take_an_oversized_status_string_bounded() -> None:
    entry = ClusterStatus(cluster="c1", message="m" * 5000, reason="R" * 999,
                          phase="P" * 200, url="http://" + "u" * 3000)
    assert len(entry.message) == 1024 and entry.message.endswith(TRUNCATED)
    assert (len(entry.reason), len(entry.phase), len(entry.url)) == (256, 64, 2048)
    cond = Condition(type="Ready", status="False", message="x" * 40000)
    assert len(cond.message) == 32768


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=HOSTILE, reason=HOSTILE, url=HOSTILE, state=HOSTILE, transition=hs.sampled_from(
    ["BlockedByFailedLoad", "InvalidSpec", "InProgress", "UpToDate"]) | HOSTILE)
def test_hostile_model_feedback_never_breaks_the_status_fold(
    message: str, reason: str, url: str, state: str, transition: str
) -> None:
    fleet = healthy_fleet()
    fleet.report(MCIS, {"status": {
        "url": url,
        "conditions": [{"type": "Ready", "status": "False", "reason": reason,
                        "message": message}],
        "modelStatus": {"transitionStatus": transition,
                        "states": {"activeModelState": state, "targetModelState": state},
                        "lastFailureInfo": {"reason": reason, "message": message}}}})
    fleet.reconcile(MCIS)
    status = fleet.hub.statuses["iris"]
    entry = next(e for e in status["clusters"] if e["cluster"] == "c1")
    assert entry["ready"] is False
    assert len(entry.get("message", "")) <= 1024 and len(entry.get("reason", "")) <= 256
    assert len(entry.get("url", "")) <= 2048 and len(entry.get("modelState", "")) <= 64
    assert all(_inert(s) for s in _strings(status)), status


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(phase=HOSTILE, message=HOSTILE, version=HOSTILE, leftovers=HOSTILE)
def test_hostile_platform_feedback_never_breaks_the_status_fold(
    phase: str, message: str, version: str, leftovers: str
) -> None:
    fleet = healthy_fleet()
    fleet.report(MSV, {"status": {"phase": phase, "message": message, "stackVersion": version,
                                  "leftovers": leftovers, "observedGeneration": 1},
                       "metadata": {"generation": 1}})
    fleet.reconcile(MSV)
    status = fleet.hub.statuses["kserve"]
    entry = next(e for e in status["clusters"] if e["cluster"] == "c1")
    assert len(entry.get("phase", "")) <= 64 and len(entry.get("message", "")) <= 1024
    assert len(entry.get("version", "")) <= 64 and len(entry.get("leftovers", "")) <= 1024
    assert all(_inert(s) for s in _strings(status)), status


def test_namespaces_the_agent_kept_reach_the_hubs_entry_without_making_it_not_ready() -> None:
    """Issue 29, item 9: the agent's ServingPlatform status (as it writes it) names a kept
    namespace; the work's feedback carries the line to the ModelServing's entry, which stays
    Ready, and a later status with nothing kept clears it."""
    from addon_agent.pure import status as agent_status
    from addon_api.spoke import ServingPlatformStatus
    from tests.unit.test_status_truth_table import _platform

    fleet = healthy_fleet()
    ready = ServingPlatformStatus.model_validate(_platform("Available")["status"])
    kept = agent_status.with_kept(ready, {"team-a": ["PersistentVolumeClaim team-a/data",
                                                     "Job team-a/train"]})
    fleet.report(MSV, {"status": kept.to_patch()})
    fleet.reconcile(MSV)
    status = fleet.hub.statuses["kserve"]
    entry = next(e for e in status["clusters"] if e["cluster"] == "c1")
    assert entry["ready"] is True and entry["phase"] == "Available", entry
    assert entry["leftovers"] == "namespace team-a kept: holds Job team-a/train (1 more)"
    assert status["phase"] == "Ready"
    fleet.report(MSV, {"status": agent_status.with_kept(ready, {}).to_patch()})
    fleet.reconcile(MSV)
    entry = next(e for e in fleet.hub.statuses["kserve"]["clusters"] if e["cluster"] == "c1")
    assert not entry.get("leftovers") and entry["ready"] is True
