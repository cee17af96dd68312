"""The shared condition builder and truncated-hash helper (addon_api)."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

from addon_api.common import Condition
from addon_api.conditions import MAX_MESSAGE, condition
from addon_api.hashing import short_hash

THEN = datetime(2020, 1, 1, tzinfo=UTC)
NOW = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


def test_status_reason_message_and_generation() -> None:
    cond = condition("Ready", False, "NotYet", "x" * (MAX_MESSAGE + 5), generation=3, now=NOW)
    assert (cond.type, cond.status, cond.reason) == ("Ready", "False", "NotYet")
    assert len(cond.message) == MAX_MESSAGE
    assert cond.observed_generation == 3 and cond.last_transition_time == NOW
    assert condition("Ready", True, "R", "m", now=NOW).status == "True"
    assert "observedGeneration" not in condition("Ready", True, "R", "m", now=NOW).to_dict()
    assert len(condition("Ready", True, "R", "m" * 2000, max_message=1024).message) == 1024


def test_transition_time_kept_while_the_status_holds_from_models() -> None:
    old = [Condition(type="Ready", status="True", last_transition_time=THEN),
           Condition(type="Degraded", status="False", last_transition_time=THEN)]
    assert condition("Ready", True, "R", "m", previous=old, now=NOW).last_transition_time == THEN
    assert condition("Ready", False, "R", "m", previous=old, now=NOW).last_transition_time == NOW
    assert condition("Other", True, "R", "m", previous=old, now=NOW).last_transition_time == NOW
    untimed = [Condition(type="Ready", status="True")]
    assert condition("Ready", True, "R", "m", previous=untimed, now=NOW).last_transition_time == (
        NOW
    )


def test_transition_time_kept_from_wire_dicts_as_written() -> None:
    old = [{"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]
    wire = condition("Ready", True, "R", "m", previous=old).to_dict()
    assert wire["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    for bad in ({**old[0], "lastTransitionTime": ""}, {**old[0], "lastTransitionTime": "soon"}):
        fresh = condition("Ready", True, "R", "m", previous=[bad]).to_dict()
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", fresh["lastTransitionTime"])
        assert fresh["lastTransitionTime"] != "2020-01-01T00:00:00Z"


def test_short_hash_is_the_truncated_sha256_of_nul_joined_parts() -> None:
    assert short_hash("a", "b", length=8) == hashlib.sha256(b"a\x00b").hexdigest()[:8]
    assert short_hash(b"\x01\x02", length=16) == hashlib.sha256(b"\x01\x02").hexdigest()[:16]
    assert short_hash(length=32) == hashlib.sha256(b"").hexdigest()[:32]
    assert short_hash("ab", "c", length=12) != short_hash("a", "bc", length=12)
