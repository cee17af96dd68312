"""OCM's work agent applies the add-on's works with only the rights the add-on ships.

The work agent runs as the klusterlet's ServiceAccount (OCM's own roles, no admin); the
chart's AddOnTemplate adds one ClusterRole labelled ``aggregate-to-work`` for exactly the
kinds the manager renders. Without it the spoke refuses the work, and the hub must say so
(cluster, verb, resource) instead of waiting silently; restoring it heals without touching
the manager.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from addon_api import constants as c
from testbed import identities
from testbed.fleet import Testbed
from testbed.support.manager import (
    Manager,
    get_json,
    model_serving,
    placement,
    running_manager,
    set_platform_phase,
)
from testbed.support.waiting import eventually

WORK_ROLE = "open-cluster-management:model-serving:work"


@pytest.fixture(scope="module")
def manager(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Manager]:
    with running_manager(testbed, tmp_path_factory.mktemp("manager")) as mgr:
        yield mgr


def _entry(hub: Any, ns: str, cluster: str) -> dict[str, Any]:
    status = get_json(hub, "msv", "kserve", "-n", ns).get("status") or {}
    return next((e for e in status.get("clusters") or [] if e["cluster"] == cluster), {})


def _ready(hub: Any, ns: str) -> str:
    status = get_json(hub, "msv", "kserve", "-n", ns).get("status") or {}
    cond = next((x for x in status.get("conditions", []) if x["type"] == "Ready"), {})
    return str(cond.get("status", ""))


def test_forbidden_apply_is_reported_and_heals_when_the_role_returns(
    testbed: Testbed, hub_namespace: str, manager: Manager
) -> None:
    hub, spoke, ns = testbed.hub, testbed.spokes[0], hub_namespace
    label = f"t-{uuid.uuid4().hex[:6]}"
    hub.kubectl("label", "managedcluster", spoke.name, f"{label}=yes")
    assert manager.proc is not None
    pid = manager.proc.pid
    spoke.kubectl("delete", "clusterrole", WORK_ROLE)
    try:
        hub.apply_objects(
            [placement("p", ns, {label: "yes"}), model_serving("kserve", ns, "p")]
        )

        def refused() -> dict[str, Any]:
            entry = _entry(hub, ns, spoke.name)
            assert entry.get("reason") == "ApplyForbidden", entry
            return entry

        entry = eventually(refused, timeout=90)
        message = entry["message"]
        assert f"cluster {spoke.name}" in message
        assert identities.WORK_SA in message
        assert "servingplatforms.modelserving.opendatahub.io" in message
        assert " may not patch " in message or " may not create " in message, message
        assert entry["phase"] == "Failed" and not entry.get("ready")
        assert _ready(hub, ns) == "False"

        # The add-on's role comes back (as OCM re-applies the AddOnTemplate would).
        identities.addon_agent_kubeconfig(spoke, c.AGENT_NAMESPACE)
        eventually(lambda: spoke.kubectl("get", "servingplatform", "model-serving", "-o", "json"),
                   timeout=180)
        set_platform_phase(spoke, "Available")  # what the agent reports once installed

        def ready() -> bool:
            assert _entry(hub, ns, spoke.name).get("ready") is True, _entry(hub, ns, spoke.name)
            assert _ready(hub, ns) == "True"
            return True

        eventually(ready, timeout=120)
        assert manager.proc.pid == pid and manager.proc.poll() is None  # never restarted
    finally:
        identities.addon_agent_kubeconfig(spoke, c.AGENT_NAMESPACE)
        hub.kubectl("delete", "modelserving", "--all", "-n", ns, "--wait=false", check=False)
        hub.kubectl("label", "managedcluster", spoke.name, f"{label}-", check=False)
