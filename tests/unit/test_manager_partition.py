"""Partition safety: when the works of a cluster that left its Placement are kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from addon_manager.engine.partition import RETURN_SETTLE, hold
from addon_manager.facts.records import ClusterFact

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def test_unreachable_or_unavailable_is_kept_for_the_grace_from_when_it_changed() -> None:
    for available in ("Unknown", "False"):
        kept = hold(ClusterFact(available=available, since=NOW - HOUR), NOW, 7200)
        assert kept is not None and kept.unavailable
        assert kept.until == NOW + HOUR
        assert "2026-03-01T13:00:00Z" in kept.message
        assert "--unavailable-grace=7200s" in kept.message
        assert hold(ClusterFact(available=available, since=NOW - 2 * HOUR), NOW, 7200) is None


def test_without_a_transition_time_the_clock_starts_now() -> None:
    kept = hold(ClusterFact(available="Unknown"), NOW, 60)
    assert kept is not None and kept.until == NOW + timedelta(seconds=60)


def test_available_again_settles_briefly_then_goes() -> None:
    kept = hold(ClusterFact(available="True", since=NOW - timedelta(seconds=10)), NOW, 7200)
    assert kept is not None and not kept.unavailable
    assert kept.until == NOW + timedelta(seconds=RETURN_SETTLE - 10)
    assert hold(ClusterFact(available="True", since=NOW - HOUR), NOW, 7200) is None
    assert hold(ClusterFact(available="True"), NOW, 7200) is None


def test_nothing_is_kept_for_unknown_clusters_or_with_the_grace_off() -> None:
    assert hold(None, NOW, 7200) is None
    assert hold(ClusterFact(available="", since=NOW), NOW, 7200) is None
    assert hold(ClusterFact(available="Unknown", since=NOW), NOW, 0) is None
