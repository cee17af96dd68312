"""The rollout settings of MultiClusterInferenceService and MultiClusterServingRuntime."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from addon_api.rollout import Rollout, seconds


def test_durations_read_as_seconds() -> None:
    assert seconds("30s") == 30
    assert seconds("1h30m") == 5400
    assert seconds("2m5s") == 125
    with pytest.raises(ValueError, match="not a duration"):
        seconds("5 minutes")


def test_defaults_are_todays_behaviour() -> None:
    rollout = Rollout()
    assert (rollout.strategy, rollout.max_concurrency, rollout.failure_policy) == (
        "All", 1, "Rollback")
    assert seconds(rollout.progress_deadline) == 600


@pytest.mark.parametrize("value", [1, 7, "1%", "25%", "100%"])
def test_concurrency_is_a_count_or_a_percentage(value: int | str) -> None:
    assert Rollout(strategy="Progressive", max_concurrency=value).max_concurrency == value


@pytest.mark.parametrize("value", [0, -1, "0%", "101%", "25", "x"])
def test_other_concurrencies_are_refused_naming_the_field(value: int | str) -> None:
    with pytest.raises(ValidationError, match="maxConcurrency must be a count"):
        Rollout(strategy="Progressive", max_concurrency=value)
