"""A work agent stopped for one cluster: its entries go stale, the other cluster is unaffected,
and starting the agent again heals it.

Two real spokes with real OCM work agents. The manager runs with a short ``--stale-after`` so
the test does not wait a minute. The intent is a ModelServing; its ServingPlatform status on
each spoke is written as the agent would (no agent runs here), which the work agents feed back.
Each scenario is a class whose steps report separately (see tests/conftest.py).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest

from testbed.fleet import Testbed
from testbed.support.manager import (
    Manager,
    exists,
    get_json,
    inference_service,
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


# --- cluster1's work agent stopped while the intent changes, then started again. ---


@dataclass
class StoppedAgent:
    """What the steps of :class:`TestStoppedWorkAgentGoesStaleAndHeals` share."""

    hub: Any
    spoke1: Any
    spoke2: Any
    ns: str
    stopped: bool = False
    """cluster1's work agent is stopped (the teardown starts it again)."""
    updated_before: dict[str, datetime] = field(default_factory=dict)
    """Each entry's lastUpdateTime while Ready everywhere (step 1)."""
    changed_at: float = 0.0
    went_stale: float | None = None
    """Seconds from the change to cluster1's entry turning stale (step 3)."""
    stale: dict[str, Any] = field(default_factory=dict)
    """The intent's status once cluster1 was stale (step 3)."""

    def status(self) -> dict[str, Any]:
        return _status(self.hub, self.ns, "msv")


@pytest.fixture(scope="class")
def stopped_agent(
    testbed: Testbed, scenario_namespace: str, manager: Manager
) -> Iterator[StoppedAgent]:
    """A ModelServing on both spokes (labelled for its Placement)."""
    hub, (spoke1, spoke2) = testbed.hub, testbed.spokes
    ns = scenario_namespace
    label = f"s-{uuid.uuid4().hex[:6]}"
    for spoke in (spoke1, spoke2):
        hub.kubectl("label", "managedcluster", spoke.name, f"{label}=yes", "--overwrite")
    state = StoppedAgent(hub, spoke1, spoke2, ns)
    try:
        hub.apply_objects([placement("p", ns, {label: "yes"}), model_serving("msv", ns, "p")])
        yield state
    finally:
        if state.stopped:
            testbed.start_work_agent(spoke1)
        hub.kubectl("delete", "msv", "--all", "-n", ns, "--wait=false", check=False)
        for spoke in (spoke1, spoke2):
            hub.kubectl("label", "managedcluster", spoke.name, f"{label}-", check=False)
        eventually(lambda: not exists(hub, "msv", "msv", "-n", ns), timeout=90)


class TestStoppedWorkAgentGoesStaleAndHeals:
    """Ready on both clusters; cluster1's work agent stopped and the intent changed: cluster2
    follows, cluster1's entry goes stale and says why, nothing is written while it stays so;
    the work agent started again heals it."""

    def test_1_ready_on_both_clusters(self, stopped_agent: StoppedAgent) -> None:
        s = stopped_agent
        eventually(
            lambda: set(works(s.hub, s.ns, "msv", "ModelServing")) == {"cluster1", "cluster2"},
            timeout=60,
        )
        for spoke in (s.spoke1, s.spoke2):
            eventually(partial(exists, spoke, "servingplatform", "model-serving"), timeout=60)
            set_platform_phase(spoke, "Available")

        def ready_everywhere() -> dict[str, Any]:
            st = s.status()
            assert st.get("phase") == "Ready" and st["summary"]["readyText"] == "2/2", st
            return st

        before = eventually(ready_everywhere, timeout=90)
        assert all(e["stale"] is False for e in _entries(before).values())
        s.updated_before = {c: _when(e["lastUpdateTime"]) for c, e in _entries(before).items()}

    @pytest.mark.needs("test_1_ready_on_both_clusters")
    def test_2_change_reaches_the_running_cluster(
        self, stopped_agent: StoppedAgent, testbed: Testbed
    ) -> None:
        s = stopped_agent
        # Stop cluster1's work agent, then change the intent.
        testbed.stop_work_agent(s.spoke1)
        s.stopped = True
        s.changed_at = time.monotonic()
        s.hub.kubectl("patch", "msv", "msv", "-n", s.ns, "--type=merge",
                      "-p", json.dumps({"spec": {"servingNamespaces": ["models"]}}))

        # cluster2 picks the change up as usual: its work is observed, its ServingPlatform
        # has the new spec, its entry stays ready and current.
        def cluster2_current() -> bool:
            work = works(s.hub, s.ns, "msv", "ModelServing")["cluster2"]
            gens = {c.get("observedGeneration") for c in work["status"]["conditions"]}
            assert gens == {work["metadata"]["generation"]} and work["metadata"]["generation"] > 1
            assert _platform_spec(s.spoke2).get("servingNamespaces") == ["models"]
            return True

        eventually(cluster2_current, timeout=60)

    @pytest.mark.needs("test_2_change_reaches_the_running_cluster")
    def test_3_stopped_cluster_goes_stale(self, stopped_agent: StoppedAgent) -> None:
        s = stopped_agent

        def cluster1_stale() -> dict[str, Any]:
            st = s.status()
            entry = _entries(st)["cluster1"]
            assert entry.get("stale") is True, entry
            return st

        s.stale = eventually(cluster1_stale, timeout=STALE_AFTER + 60)
        s.went_stale = time.monotonic() - s.changed_at

    @pytest.mark.needs("test_3_stopped_cluster_goes_stale")
    def test_4_stale_entry_says_what_and_since_when(self, stopped_agent: StoppedAgent) -> None:
        s = stopped_agent
        entry1 = _entries(s.stale)["cluster1"]
        work1 = works(s.hub, s.ns, "msv", "ModelServing")["cluster1"]
        # What is stale and since when, said plainly.
        assert entry1["phase"] == "Stale" and entry1["ready"] is False
        assert entry1["reason"] == "WorkNotObserved"
        assert f"generation {work1['metadata']['generation']}" in entry1["message"]
        assert work1["metadata"]["name"] in entry1["message"]
        assert entry1["message"].endswith("last reported: Available")
        assert entry1["staleSince"] in entry1["message"]
        assert _when(entry1["lastUpdateTime"]) >= _when(entry1["staleSince"])

    @pytest.mark.needs("test_3_stopped_cluster_goes_stale")
    def test_5_other_cluster_unaffected(self, stopped_agent: StoppedAgent) -> None:
        entry2 = _entries(stopped_agent.stale)["cluster2"]
        assert entry2["ready"] is True and entry2["stale"] is False
        assert entry2["phase"] == "Available"

    @pytest.mark.needs("test_3_stopped_cluster_goes_stale")
    def test_6_intent_degraded_by_the_stale_cluster(self, stopped_agent: StoppedAgent) -> None:
        st = stopped_agent.stale
        # The intent says so: not ready, degraded because of a stale cluster, counted.
        assert st["phase"] == "Degraded"
        assert (st["summary"]["ready"], st["summary"]["stale"]) == (1, 1)
        degraded = next(c for c in st["conditions"] if c["type"] == "Degraded")
        assert degraded["status"] == "True" and degraded["reason"] == "ClustersStale"
        assert "cluster1" in degraded["message"]

    @pytest.mark.needs("test_3_stopped_cluster_goes_stale")
    def test_7_nothing_reached_the_stopped_cluster(self, stopped_agent: StoppedAgent) -> None:
        s = stopped_agent
        # Nothing reached cluster1 while its work agent was down.
        assert _platform_spec(s.spoke1).get("servingNamespaces") != ["models"]
        entry1 = _entries(s.stale)["cluster1"]
        assert _when(entry1["lastUpdateTime"]) != s.updated_before["cluster1"]

    @pytest.mark.needs("test_3_stopped_cluster_goes_stale")
    def test_8_stale_is_settled_rechecks_write_nothing(
        self, stopped_agent: StoppedAgent, manager: Manager
    ) -> None:
        s = stopped_agent
        # Stale is a settled state too: re-checks write nothing.
        writes = manager.wait_quiet(reconciles=False)  # re-checks reconcile, but write nothing
        rv = get_json(s.hub, "msv", "msv", "-n", s.ns)["metadata"]["resourceVersion"]
        time.sleep(STALE_AFTER + 5)  # the subject: a whole re-check period writes nothing
        assert manager.writes() == writes
        assert get_json(s.hub, "msv", "msv", "-n", s.ns)["metadata"]["resourceVersion"] == rv

    @pytest.mark.needs("test_2_change_reaches_the_running_cluster")
    def test_9_work_agent_started_again_heals(
        self, stopped_agent: StoppedAgent, testbed: Testbed
    ) -> None:
        s = stopped_agent
        # Start the work agent again: it applies the change and cluster1 heals.
        restarted_at = time.monotonic()
        testbed.start_work_agent(s.spoke1)
        s.stopped = False

        def healed() -> dict[str, Any]:
            st = s.status()
            entry = _entries(st)["cluster1"]
            assert entry["stale"] is False and entry["ready"] is True, entry
            assert st["phase"] == "Ready" and st["summary"]["stale"] == 0, st
            return st

        st = eventually(healed, timeout=120)
        heal = time.monotonic() - restarted_at
        assert _platform_spec(s.spoke1).get("servingNamespaces") == ["models"]
        entry1 = _entries(st)["cluster1"]
        assert "staleSince" not in entry1 and entry1["phase"] == "Available"
        assert _when(entry1["lastUpdateTime"]) > s.updated_before["cluster1"]
        degraded = next(c for c in st["conditions"] if c["type"] == "Degraded")
        assert degraded["status"] == "False"
        stale = "not seen" if s.went_stale is None else f"after {s.went_stale:.1f}s"
        print(f"work agent stopped: stale {stale} (--stale-after={STALE_AFTER}), "
              f"healed {heal:.1f}s after the restart")


# --- A cluster whose lease nobody renews goes Unknown, then Available again. ---


@dataclass
class LostCluster:
    """What the steps of :class:`TestUnavailableClusterGoesStaleAndHeals` share."""

    hub: Any
    spoke2: Any
    ns: str
    lost: str
    stale: dict[str, Any] = field(default_factory=dict)
    """The intent's status once the lost cluster was stale (step 2)."""
    managed_cluster: dict[str, Any] = field(default_factory=dict)
    """The lost cluster's ManagedCluster then."""

    def status(self) -> dict[str, Any]:
        return _status(self.hub, self.ns, "msv")


@pytest.fixture(scope="class")
def lost_cluster(
    testbed: Testbed, scenario_namespace: str, manager: Manager
) -> Iterator[LostCluster]:
    """A spoke-less ManagedCluster (no registration agent renews its lease) and cluster2,
    both selected by a Placement that tolerates unreachable clusters, and a ModelServing."""
    hub, spoke2 = testbed.hub, testbed.spokes[1]
    ns = scenario_namespace
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
        yield LostCluster(hub, spoke2, ns, lost)
    finally:
        hub.kubectl("delete", "msv", "--all", "-n", ns, "--wait=false", check=False)
        hub.kubectl("label", "managedcluster", spoke2.name, f"{label}-", check=False)
        # No work agent ever put its finalizer on the spoke-less cluster's work: it goes at once.
        eventually(lambda: not exists(hub, "msv", "msv", "-n", ns), timeout=90)
        hub.kubectl("delete", "managedcluster", lost, "--wait=false", check=False)
        hub.kubectl("delete", "namespace", lost, "--wait=false", check=False)


class TestUnavailableClusterGoesStaleAndHeals:
    """A cluster whose lease is not renewed: OCM's registration controller marks it Unknown,
    its entry goes stale at once (no --stale-after wait), the real spoke's entry is unaffected;
    Available again (written as its registration agent would) heals it."""

    def test_1_works_on_both_clusters(self, lost_cluster: LostCluster) -> None:
        s = lost_cluster
        eventually(lambda: set(works(s.hub, s.ns, "msv", "ModelServing")) == {s.lost, "cluster2"},
                   timeout=60)
        eventually(lambda: exists(s.spoke2, "servingplatform", "model-serving"), timeout=60)
        set_platform_phase(s.spoke2, "Available")

    @pytest.mark.needs("test_1_works_on_both_clusters")
    def test_2_unavailable_cluster_goes_stale(self, lost_cluster: LostCluster) -> None:
        s = lost_cluster

        def lost_stale() -> dict[str, Any]:
            st = s.status()
            entry = _entries(st)[s.lost]
            assert entry.get("stale") is True and entry["reason"] == "ClusterUnavailable", entry
            assert _entries(st)["cluster2"]["ready"] is True, st
            return st

        s.stale = eventually(lost_stale, timeout=120)
        s.managed_cluster = get_json(s.hub, "managedcluster", s.lost)

    @pytest.mark.needs("test_2_unavailable_cluster_goes_stale")
    def test_3_stale_entry_says_since_when_and_why(self, lost_cluster: LostCluster) -> None:
        s = lost_cluster
        cond = next(c for c in s.managed_cluster["status"]["conditions"]
                    if c["type"] == "ManagedClusterConditionAvailable")
        entry = _entries(s.stale)[s.lost]
        assert cond["status"] == "Unknown"
        assert entry["staleSince"] == cond["lastTransitionTime"]
        assert "not Available (Unknown)" in entry["message"]
        assert entry["message"].endswith("last reported: Applying (WorkNotApplied)")

    @pytest.mark.needs("test_2_unavailable_cluster_goes_stale")
    def test_4_other_cluster_unaffected_intent_degraded(self, lost_cluster: LostCluster) -> None:
        st = lost_cluster.stale
        assert _entries(st)["cluster2"]["stale"] is False
        assert (st["phase"], st["summary"]["stale"], st["summary"]["ready"]) == ("Degraded", 1, 1)

    @pytest.mark.needs("test_2_unavailable_cluster_goes_stale")
    def test_5_available_again_heals(self, lost_cluster: LostCluster) -> None:
        s = lost_cluster
        # The cluster's agent comes back: lease renewed, Available written as it would.
        now = datetime.now(UTC)
        s.hub.kubectl("patch", "lease", "managed-cluster-lease", "-n", s.lost, "--type=merge",
                      "-p", json.dumps({"spec": {"leaseDurationSeconds": 3600,
                                                 "renewTime": now.strftime(
                                                     "%Y-%m-%dT%H:%M:%S.%fZ")}}))
        s.hub.kubectl("patch", "managedcluster", s.lost, "--type=merge",
                      "-p", json.dumps({"spec": {"leaseDurationSeconds": 3600}}))
        conds = [c for c in s.managed_cluster["status"]["conditions"]
                 if c["type"] != "ManagedClusterConditionAvailable"]
        conds.append({"type": "ManagedClusterConditionAvailable", "status": "True",
                      "reason": "ManagedClusterAvailable", "message": "back",
                      "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ")})
        s.hub.kubectl("patch", "managedcluster", s.lost, "--subresource=status", "--type=merge",
                      "-p", json.dumps({"status": {"conditions": conds}}))

        def lost_current() -> bool:
            entry = _entries(s.status())[s.lost]
            assert entry["stale"] is False and entry["phase"] == "Applying", entry
            return True

        eventually(lost_current, timeout=60)


# --- cluster1 partitioned (its OCM agents stopped) under a Placement without tolerations. ---

TAINT_UNREACHABLE = "cluster.open-cluster-management.io/unreachable"
PARTITION_LEASE = 3
"""Lease duration of the partitioned cluster while its agents are stopped: the hub marks it
Unknown after 5 of them (15 s) instead of OCM's default 5 minutes."""


@dataclass
class Partition:
    """What the steps of :class:`TestPartitionedClusterKeepsItsModels` share."""

    hub: Any
    spoke1: Any
    spoke2: Any
    ns: str
    lease: int = 60
    """cluster1's leaseDurationSeconds before the partition (restored when it ends)."""
    partitioned: bool = False
    """cluster1's registration and work agents are stopped (the teardown starts them)."""
    work_uids: dict[str, str] = field(default_factory=dict)
    """uid of cluster1's ManifestWork per intent kind, while serving (step 1)."""
    spoke_objects: dict[str, tuple[str, int]] = field(default_factory=dict)
    """(uid, generation) of cluster1's ServingPlatform and InferenceService (step 1)."""

    def status(self, plural: str, name: str) -> dict[str, Any]:
        return dict(get_json(self.hub, plural, name, "-n", self.ns).get("status") or {})

    def cluster1_works(self) -> dict[str, dict[str, Any]]:
        out = {}
        for kind, name in (("ModelServing", "msv"), ("MultiClusterInferenceService", "iris")):
            found = works(self.hub, self.ns, name, kind).get("cluster1")
            if found is not None:
                out[kind] = found
        return out

    def decided(self) -> set[str]:
        items = get_json(self.hub, "placementdecisions", "-n", self.ns, "-l",
                         "cluster.open-cluster-management.io/placement=p")["items"]
        return {d["clusterName"] for item in items for d in item["status"]["decisions"]}

    def spoke1_objects(self) -> dict[str, tuple[str, int]]:
        sp = get_json(self.spoke1, "servingplatform", "model-serving")["metadata"]
        isvc = get_json(self.spoke1, "inferenceservice", "iris", "-n", "models")["metadata"]
        return {"ServingPlatform": (sp["uid"], sp["generation"]),
                "InferenceService": (isvc["uid"], isvc["generation"])}


def _available(mc: dict[str, Any]) -> str:
    conds = mc.get("status", {}).get("conditions", [])
    return next((c["status"] for c in conds if c["type"] == "ManagedClusterConditionAvailable"),
                "")


def _end_partition(testbed: Testbed, s: Partition) -> None:
    """cluster1's lease duration restored and its agents started again."""
    s.hub.kubectl("patch", "managedcluster", "cluster1", "--type=merge",
                  "-p", json.dumps({"spec": {"leaseDurationSeconds": s.lease}}))
    testbed.start_registration_agent(s.spoke1)
    testbed.start_work_agent(s.spoke1)
    s.partitioned = False


@pytest.fixture(scope="class")
def partition(
    testbed: Testbed, scenario_namespace: str, manager: Manager
) -> Iterator[Partition]:
    """A ModelServing and a MultiClusterInferenceService on both spokes, through a Placement
    that does not tolerate OCM's unreachable/unavailable taints."""
    hub, (spoke1, spoke2) = testbed.hub, testbed.spokes
    ns = scenario_namespace
    label = f"q-{uuid.uuid4().hex[:6]}"
    for spoke in (spoke1, spoke2):
        hub.kubectl("label", "managedcluster", spoke.name, f"{label}=yes", "--overwrite")
    state = Partition(hub, spoke1, spoke2, ns)
    state.lease = int(testbed.managed_cluster("cluster1")["spec"].get("leaseDurationSeconds")
                      or 60)
    try:
        hub.apply_objects([placement("p", ns, {label: "yes"}), model_serving("msv", ns, "p"),
                           inference_service("iris", ns, "p")])
        yield state
    finally:
        if state.partitioned:
            _end_partition(testbed, state)
        eventually(lambda: _available(testbed.managed_cluster("cluster1")) == "True",
                   timeout=90)
        for kind in ("mcisvc", "msv"):
            hub.kubectl("delete", kind, "--all", "-n", ns, "--wait=false", check=False)
        for spoke in (spoke1, spoke2):
            hub.kubectl("label", "managedcluster", spoke.name, f"{label}-", check=False)
        eventually(lambda: not exists(hub, "msv", "msv", "-n", ns), timeout=90)


class TestPartitionedClusterKeepsItsModels:
    """cluster1's registration and work agents stopped past OCM's taint time under a Placement
    without tolerations: OCM drops cluster1 from the decisions, yet no ManifestWork of
    cluster1 is deleted and the hub says ClusterUnavailable and until when the works are kept;
    back again, cluster1 is selected again and nothing on it was reinstalled or restarted."""

    def test_1_serving_on_both_clusters(self, partition: Partition) -> None:
        s = partition
        eventually(lambda: set(works(s.hub, s.ns, "msv", "ModelServing")) == {
            "cluster1", "cluster2"}, timeout=60)
        for spoke in (s.spoke1, s.spoke2):
            eventually(partial(exists, spoke, "servingplatform", "model-serving"), timeout=60)
            set_platform_phase(spoke, "Available")
        eventually(lambda: set(works(s.hub, s.ns, "iris", "MultiClusterInferenceService")) == {
            "cluster1", "cluster2"}, timeout=90)
        eventually(partial(exists, s.spoke1, "inferenceservice", "iris", "-n", "models"),
                   timeout=60)

        def cluster1_ready() -> bool:
            entry = _entries(s.status("msv", "msv"))["cluster1"]
            assert entry["ready"] is True and entry["stale"] is False, entry
            return True

        eventually(cluster1_ready, timeout=60)
        s.work_uids = {k: w["metadata"]["uid"] for k, w in s.cluster1_works().items()}
        assert set(s.work_uids) == {"ModelServing", "MultiClusterInferenceService"}
        s.spoke_objects = s.spoke1_objects()

    @pytest.mark.needs("test_1_serving_on_both_clusters")
    def test_2_partition_takes_cluster1_out_of_the_placement(
        self, partition: Partition, testbed: Testbed
    ) -> None:
        s = partition
        testbed.stop_registration_agent(s.spoke1)
        testbed.stop_work_agent(s.spoke1)
        s.partitioned = True
        # OCM's own path, sooner: the hub marks the lease-less cluster Unknown, taints it
        # unreachable, and the Placement (no tolerations) drops it.
        s.hub.kubectl("patch", "managedcluster", "cluster1", "--type=merge",
                      "-p", json.dumps({"spec": {"leaseDurationSeconds": PARTITION_LEASE}}))

        def dropped() -> bool:
            mc = testbed.managed_cluster("cluster1")
            assert _available(mc) == "Unknown", mc.get("status")
            taints = {t["key"] for t in mc["spec"].get("taints", [])}
            assert TAINT_UNREACHABLE in taints, taints
            assert s.decided() == {"cluster2"}, s.decided()
            return True

        eventually(dropped, timeout=5 * PARTITION_LEASE + 60)

    @pytest.mark.needs("test_2_partition_takes_cluster1_out_of_the_placement")
    def test_3_works_kept_and_the_hub_says_why(self, partition: Partition) -> None:
        s = partition

        def kept() -> dict[str, dict[str, Any]]:
            entries = {}
            for plural, name in (("msv", "msv"), ("mcisvc", "iris")):
                entry = _entries(s.status(plural, name))["cluster1"]
                assert entry["reason"] == "ClusterUnavailable", entry
                assert "left the Placement while not Available" in entry["message"], entry
                entries[plural] = entry
            return entries

        entries = eventually(kept, timeout=60)
        for entry in entries.values():
            assert (entry["phase"], entry["stale"], entry["ready"]) == ("Stale", True, False)
            assert "kept until" in entry["message"]
            assert "not Available (Unknown)" in entry["message"]
        # The works are there, the same objects, not being deleted.
        now = s.cluster1_works()
        assert {k: w["metadata"]["uid"] for k, w in now.items()} == s.work_uids
        assert not any(w["metadata"].get("deletionTimestamp") for w in now.values())
        st = s.status("msv", "msv")
        assert st["phase"] == "Degraded" and st["summary"]["stale"] == 1

    @pytest.mark.needs("test_2_partition_takes_cluster1_out_of_the_placement")
    def test_4_back_nothing_reinstalled(self, partition: Partition, testbed: Testbed) -> None:
        s = partition
        _end_partition(testbed, s)

        def healed() -> bool:
            assert _available(testbed.managed_cluster("cluster1")) == "True"
            assert s.decided() == {"cluster1", "cluster2"}, s.decided()
            entry = _entries(s.status("msv", "msv"))["cluster1"]
            assert entry["stale"] is False and entry["ready"] is True, entry
            assert _entries(s.status("mcisvc", "iris"))["cluster1"]["stale"] is False
            return True

        eventually(healed, timeout=120)
        now = s.cluster1_works()
        assert {k: w["metadata"]["uid"] for k, w in now.items()} == s.work_uids
        assert not any(w["metadata"].get("deletionTimestamp") for w in now.values())
        # Neither the stack nor the model was removed, re-created or changed on the spoke.
        assert s.spoke1_objects() == s.spoke_objects
