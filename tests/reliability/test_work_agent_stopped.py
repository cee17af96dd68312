"""A work agent stopped for one cluster: its entries go stale, the other cluster is unaffected,
and starting the agent again heals it.

Two real spokes with real OCM work agents. The manager runs with a short ``--stale-after`` so
the test does not wait a minute. The intent is a ModelServing; its ServingPlatform status on
each spoke is written as the agent would (no agent runs here), which the work agents feed back.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from testbed.fleet import Testbed
from testbed.support.manager import (
    Manager,
    exists,
    get_json,
    model_serving,
    placement,
    running_manager,
    set_platform_phase,
    works,
)
from testbed.support.waiting import eventually

STALE_AFTER = 8


@pytest.fixture(scope="module")
def manager(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Manager]:
    """One manager with a short --stale-after (addon enablement off: no OCM addon manager)."""
    with running_manager(
        testbed,
        tmp_path_factory.mktemp("manager"),
        "--no-addon-enablement",
        f"--stale-after={STALE_AFTER}",
    ) as mgr:
        yield mgr


def _status(hub: Any, ns: str, name: str) -> dict[str, Any]:
    return dict(get_json(hub, "msv", name, "-n", ns).get("status") or {})


def _entries(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["cluster"]: e for e in status.get("clusters", [])}


def _platform_spec(spoke: Any) -> dict[str, Any]:
    return dict(get_json(spoke, "servingplatform", "model-serving")["spec"])


def _when(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_stopped_work_agent_goes_stale_and_heals(
    testbed: Testbed, hub_namespace: str, manager: Manager
) -> None:
    hub, (spoke1, spoke2) = testbed.hub, testbed.spokes
    ns = hub_namespace
    label = f"s-{uuid.uuid4().hex[:6]}"
    for spoke in (spoke1, spoke2):
        hub.kubectl("label", "managedcluster", spoke.name, f"{label}=yes", "--overwrite")
    stopped = False
    try:
        hub.apply_objects([placement("p", ns, {label: "yes"}), model_serving("msv", ns, "p")])
        eventually(lambda: set(works(hub, ns, "msv", "ModelServing")) == {"cluster1", "cluster2"},
                   timeout=60)
        for spoke in (spoke1, spoke2):
            eventually(lambda s=spoke: exists(s, "servingplatform", "model-serving"), timeout=60)
            set_platform_phase(spoke, "Available")

        def ready_everywhere() -> dict[str, Any]:
            st = _status(hub, ns, "msv")
            assert st.get("phase") == "Ready" and st["summary"]["readyText"] == "2/2", st
            return st

        before = eventually(ready_everywhere, timeout=90)
        assert all(e["stale"] is False for e in _entries(before).values())
        updated_before = {c: _when(e["lastUpdateTime"]) for c, e in _entries(before).items()}

        # Stop cluster1's work agent, then change the intent.
        testbed.stop_work_agent(spoke1)
        stopped = True
        changed_at = time.monotonic()
        hub.kubectl("patch", "msv", "msv", "-n", ns, "--type=merge",
                    "-p", json.dumps({"spec": {"servingNamespaces": ["models"]}}))

        # cluster2 picks the change up as usual: its work is observed, its ServingPlatform
        # has the new spec, its entry stays ready and current.
        def cluster2_current() -> bool:
            work = works(hub, ns, "msv", "ModelServing")["cluster2"]
            gens = {c.get("observedGeneration") for c in work["status"]["conditions"]}
            assert gens == {work["metadata"]["generation"]} and work["metadata"]["generation"] > 1
            assert _platform_spec(spoke2).get("servingNamespaces") == ["models"]
            return True

        eventually(cluster2_current, timeout=60)

        def cluster1_stale() -> dict[str, Any]:
            st = _status(hub, ns, "msv")
            entry = _entries(st)["cluster1"]
            assert entry.get("stale") is True, entry
            return st

        st = eventually(cluster1_stale, timeout=STALE_AFTER + 60)
        went_stale = time.monotonic() - changed_at
        entry1, entry2 = _entries(st)["cluster1"], _entries(st)["cluster2"]
        work1 = works(hub, ns, "msv", "ModelServing")["cluster1"]
        # What is stale and since when, said plainly.
        assert entry1["phase"] == "Stale" and entry1["ready"] is False
        assert entry1["reason"] == "WorkNotObserved"
        assert f"generation {work1['metadata']['generation']}" in entry1["message"]
        assert work1["metadata"]["name"] in entry1["message"]
        assert entry1["message"].endswith("last reported: Available")
        assert entry1["staleSince"] in entry1["message"]
        assert _when(entry1["lastUpdateTime"]) >= _when(entry1["staleSince"])
        # The other cluster is unaffected.
        assert entry2["ready"] is True and entry2["stale"] is False
        assert entry2["phase"] == "Available"
        # The intent says so: not ready, degraded because of a stale cluster, counted.
        assert st["phase"] == "Degraded"
        assert (st["summary"]["ready"], st["summary"]["stale"]) == (1, 1)
        degraded = next(c for c in st["conditions"] if c["type"] == "Degraded")
        assert degraded["status"] == "True" and degraded["reason"] == "ClustersStale"
        assert "cluster1" in degraded["message"]
        # Nothing reached cluster1 while its work agent was down.
        assert _platform_spec(spoke1).get("servingNamespaces") != ["models"]
        assert entry1["lastUpdateTime"] != updated_before["cluster1"]

        # Stale is a settled state too: re-checks write nothing.
        writes = manager.wait_quiet(reconciles=False)  # re-checks reconcile, but write nothing
        rv = get_json(hub, "msv", "msv", "-n", ns)["metadata"]["resourceVersion"]
        time.sleep(STALE_AFTER + 5)  # the subject: a whole re-check period writes nothing
        assert manager.writes() == writes
        assert get_json(hub, "msv", "msv", "-n", ns)["metadata"]["resourceVersion"] == rv

        # Start the work agent again: it applies the change and cluster1 heals.
        restarted_at = time.monotonic()
        testbed.start_work_agent(spoke1)
        stopped = False

        def healed() -> dict[str, Any]:
            st = _status(hub, ns, "msv")
            entry = _entries(st)["cluster1"]
            assert entry["stale"] is False and entry["ready"] is True, entry
            assert st["phase"] == "Ready" and st["summary"]["stale"] == 0, st
            return st

        st = eventually(healed, timeout=120)
        heal = time.monotonic() - restarted_at
        assert _platform_spec(spoke1).get("servingNamespaces") == ["models"]
        entry1 = _entries(st)["cluster1"]
        assert "staleSince" not in entry1 and entry1["phase"] == "Available"
        assert _when(entry1["lastUpdateTime"]) > updated_before["cluster1"]
        degraded = next(c for c in st["conditions"] if c["type"] == "Degraded")
        assert degraded["status"] == "False"
        print(f"work agent stopped: stale after {went_stale:.1f}s (--stale-after={STALE_AFTER}), "
              f"healed {heal:.1f}s after the restart")
    finally:
        if stopped:
            testbed.start_work_agent(spoke1)
        hub.kubectl("delete", "msv", "--all", "-n", ns, "--wait=false", check=False)
        for spoke in (spoke1, spoke2):
            hub.kubectl("label", "managedcluster", spoke.name, f"{label}-", check=False)
        eventually(lambda: not exists(hub, "msv", "msv", "-n", ns), timeout=90)


def test_unavailable_cluster_goes_stale_and_heals(
    testbed: Testbed, hub_namespace: str, manager: Manager
) -> None:
    """A cluster whose lease is not renewed: OCM's registration controller marks it Unknown,
    its entry goes stale at once (no --stale-after wait), the real spoke's entry is unaffected;
    Available again (written as its registration agent would) heals it."""
    hub, spoke2 = testbed.hub, testbed.spokes[1]
    ns = hub_namespace
    label = f"u-{uuid.uuid4().hex[:6]}"
    lost = f"lost-{uuid.uuid4().hex[:6]}"
    hub.apply_objects([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": lost}},
        {
            "apiVersion": "cluster.open-cluster-management.io/v1",
            "kind": "ManagedCluster",
            "metadata": {"name": lost, "labels": {
                label: "yes", "cluster.open-cluster-management.io/clusterset": "default"}},
            # No registration agent renews this lease: the hub marks the cluster Unknown
            # after 5 lease durations (15 s).
            "spec": {"hubAcceptsClient": True, "leaseDurationSeconds": 3},
        },
    ])
    hub.kubectl("label", "managedcluster", spoke2.name, f"{label}=yes", "--overwrite")
    try:
        # OCM taints an unreachable cluster NoSelect: without a toleration the Placement drops
        # it (and the manager removes its work). Tolerating it, as admins do to ride out short
        # outages, keeps it selected: that is when its entry must say it is stale.
        tolerant = placement("p", ns, {label: "yes"})
        tolerant["spec"]["tolerations"] = [
            {"key": f"cluster.open-cluster-management.io/{t}", "operator": "Exists"}
            for t in ("unreachable", "unavailable")
        ]
        hub.apply_objects([tolerant, model_serving("msv", ns, "p")])
        eventually(lambda: set(works(hub, ns, "msv", "ModelServing")) == {lost, "cluster2"},
                   timeout=60)
        eventually(lambda: exists(spoke2, "servingplatform", "model-serving"), timeout=60)
        set_platform_phase(spoke2, "Available")

        def lost_stale() -> dict[str, Any]:
            st = _status(hub, ns, "msv")
            entry = _entries(st)[lost]
            assert entry.get("stale") is True and entry["reason"] == "ClusterUnavailable", entry
            assert _entries(st)["cluster2"]["ready"] is True, st
            return st

        st = eventually(lost_stale, timeout=120)
        mc = get_json(hub, "managedcluster", lost)
        cond = next(c for c in mc["status"]["conditions"]
                    if c["type"] == "ManagedClusterConditionAvailable")
        entry = _entries(st)[lost]
        assert cond["status"] == "Unknown"
        assert entry["staleSince"] == cond["lastTransitionTime"]
        assert "not Available (Unknown)" in entry["message"]
        assert entry["message"].endswith("last reported: Applying (WorkNotApplied)")
        assert _entries(st)["cluster2"]["stale"] is False
        assert (st["phase"], st["summary"]["stale"], st["summary"]["ready"]) == ("Degraded", 1, 1)

        # The cluster's agent comes back: lease renewed, Available written as it would.
        now = datetime.now(UTC)
        hub.kubectl("patch", "lease", "managed-cluster-lease", "-n", lost, "--type=merge", "-p",
                    json.dumps({"spec": {"leaseDurationSeconds": 3600,
                                         "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}))
        hub.kubectl("patch", "managedcluster", lost, "--type=merge",
                    "-p", json.dumps({"spec": {"leaseDurationSeconds": 3600}}))
        conds = [c for c in mc["status"]["conditions"]
                 if c["type"] != "ManagedClusterConditionAvailable"]
        conds.append({"type": "ManagedClusterConditionAvailable", "status": "True",
                      "reason": "ManagedClusterAvailable", "message": "back",
                      "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ")})
        hub.kubectl("patch", "managedcluster", lost, "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": {"conditions": conds}}))

        def lost_current() -> bool:
            entry = _entries(_status(hub, ns, "msv"))[lost]
            assert entry["stale"] is False and entry["phase"] == "Applying", entry
            return True

        eventually(lost_current, timeout=60)
    finally:
        hub.kubectl("delete", "msv", "--all", "-n", ns, "--wait=false", check=False)
        hub.kubectl("label", "managedcluster", spoke2.name, f"{label}-", check=False)
        # No work agent ever put its finalizer on the spoke-less cluster's work: it goes at once.
        eventually(lambda: not exists(hub, "msv", "msv", "-n", ns), timeout=90)
        hub.kubectl("delete", "managedcluster", lost, "--wait=false", check=False)
        hub.kubectl("delete", "namespace", lost, "--wait=false", check=False)
