"""Leader-election timings derived from --lease-duration."""

from __future__ import annotations

import pytest
from kubernetes.leaderelection import electionconfig

from addon_manager.shell.main import election_settings, parse_args


@pytest.mark.parametrize("duration", [4, 5, 6, 10, 15, 30, 137, 300])
def test_timings_are_ones_the_elector_accepts(duration: int) -> None:
    s = election_settings(parse_args([f"--lease-duration={duration}", "--leader-elect"]))
    assert s.lease_duration == duration
    assert s.lease_duration > s.renew_deadline > 1.2 * s.retry_period >= 1.2
    # The client's Config exits the process on timings it refuses.
    electionconfig.Config(  # type: ignore[no-untyped-call]
        object(), s.lease_duration, s.renew_deadline, s.retry_period, lambda: None, None
    )


def test_identity_is_the_pod_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "model-serving-addon-manager-7d9f-abcde")
    monkeypatch.setenv("POD_NAMESPACE", "ocm-addons")
    args = parse_args(["--leader-elect"])
    s = election_settings(args)
    assert (s.identity, s.namespace) == ("model-serving-addon-manager-7d9f-abcde", "ocm-addons")
