"""The agent's own ServiceMonitor: applied when the kind is served, never fatal."""

from __future__ import annotations

from typing import Any

from addon_agent import selfmonitor


class Kube:
    def __init__(self, served: bool, fail: bool = False) -> None:
        self._served, self.fail, self.applied = served, fail, []  # type: ignore[var-annotated]

    def served(self, api_version: str, kind: str) -> bool:
        return self._served and (api_version, kind) == ("monitoring.coreos.com/v1",
                                                        "ServiceMonitor")

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        if self.fail:
            raise RuntimeError("forbidden")
        self.applied.append(obj)
        return obj


def test_applied_only_where_the_kind_is_served_and_a_failure_is_not_fatal() -> None:
    kube = Kube(served=True)
    assert selfmonitor.ensure(kube, "agent-ns") is True
    [monitor] = kube.applied
    assert monitor["metadata"]["namespace"] == "agent-ns"
    # It selects the Service the AddOnTemplate deploys, by that Service's port name.
    assert monitor["spec"]["selector"]["matchLabels"] == selfmonitor.SELECTOR
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics"}]
    assert selfmonitor.ensure(Kube(served=False), "agent-ns") is False
    assert selfmonitor.ensure(Kube(served=True, fail=True), "agent-ns") is False
