"""Fan-out to many clusters, kill -9 in the middle, restart, converge exactly.

ManagedClusters here have no spoke (no agent): the hub's ManifestWorks are what counts.
The fan-out benchmark is ``python -m bench.fanout`` (see docs/benchmarks.md).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any, cast

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from addon_api import constants as c
from addon_api.hub import ModelServing
from addon_manager import naming, render
from testbed.fleet import Testbed
from tests.helpers import eventually
from tests.integration.manager_support import (
    Manager,
    manager_identity,
    model_serving,
    prepare,
    report_work_status,
)

CLUSTERSET_LABEL = "cluster.open-cluster-management.io/clusterset"
WORK = ("work.open-cluster-management.io", "v1", "manifestworks")
TOLERATIONS = [
    {"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists"},
    {"key": "cluster.open-cluster-management.io/unavailable", "operator": "Exists"},
]


class FakeFleet:
    """ManagedClusters (and their hub namespaces) without spokes, labelled ``label=yes``."""

    def __init__(self, api: client.ApiClient, label: str) -> None:
        self.api = api
        self.label = label
        self.names: list[str] = []

    def create(self, count: int, prefix: str) -> list[str]:
        """Create ``count`` clusters in parallel; return their names."""
        core, custom = client.CoreV1Api(self.api), client.CustomObjectsApi(self.api)
        names = [f"{prefix}-{i:04d}" for i in range(count)]

        def one(name: str) -> None:
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
            custom.create_cluster_custom_object(
                "cluster.open-cluster-management.io",
                "v1",
                "managedclusters",
                {
                    "apiVersion": "cluster.open-cluster-management.io/v1",
                    "kind": "ManagedCluster",
                    "metadata": {
                        "name": name,
                        "labels": {self.label: "yes", CLUSTERSET_LABEL: "default"},
                    },
                    # No registration agent renews a spoke-less cluster's lease: a day-long
                    # lease keeps the hub from marking it Unknown after 5 minutes (which would,
                    # rightly, make its status entries stale).
                    "spec": {"hubAcceptsClient": True, "leaseDurationSeconds": 86400},
                },
            )

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(one, names))
        self.names.extend(names)
        return names

    def relabel(self, names: list[str], value: str) -> None:
        """Set this fleet's label on some clusters to ``value``."""
        custom = client.CustomObjectsApi(self.api)
        for name in names:
            custom.patch_cluster_custom_object(
                "cluster.open-cluster-management.io",
                "v1",
                "managedclusters",
                name,
                {"metadata": {"labels": {self.label: value}}},
            )

    def delete(self) -> None:
        """Delete every cluster and namespace this fleet created."""
        core, custom = client.CoreV1Api(self.api), client.CustomObjectsApi(self.api)

        def one(name: str) -> None:
            with contextlib.suppress(ApiException):
                custom.delete_cluster_custom_object(
                    "cluster.open-cluster-management.io", "v1", "managedclusters", name
                )
            with contextlib.suppress(ApiException):
                core.delete_namespace(name)

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(one, self.names))


def _placement(ns: str, label: str) -> dict[str, Any]:
    return {
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": {"name": "fleet", "namespace": ns},
        "spec": {
            "clusterSets": ["default"],
            "tolerations": TOLERATIONS,
            "predicates": [
                {"requiredClusterSelector": {"labelSelector": {"matchLabels": {label: "yes"}}}}
            ],
        },
    }


def _decided(custom: client.CustomObjectsApi, ns: str, name: str = "fleet") -> set[str]:
    pds = cast(
        dict[str, Any],
        custom.list_namespaced_custom_object(
            "cluster.open-cluster-management.io",
            "v1beta1",
            ns,
            "placementdecisions",
            label_selector=f"cluster.open-cluster-management.io/placement={name}",
        ),
    )["items"]
    return {d["clusterName"] for pd in pds for d in pd.get("status", {}).get("decisions") or []}


def _works(custom: client.CustomObjectsApi, ns: str, name: str) -> list[dict[str, Any]]:
    found = cast(
        dict[str, Any],
        custom.list_cluster_custom_object(
            *WORK,
            label_selector=f"{c.LABEL_INTENT_KIND}={c.KIND_MODEL_SERVING},"
            f"{c.LABEL_INTENT_NAMESPACE}={ns},{c.LABEL_INTENT_NAME}={name}",
        ),
    )
    return list(found["items"])


@pytest.fixture
def fleet(testbed: Testbed) -> Iterator[FakeFleet]:
    """A fleet of spoke-less clusters, deleted afterwards."""
    prepare(testbed)
    api = testbed.hub.api_client()
    api.configuration.connection_pool_maxsize = 16
    f = FakeFleet(api, f"fleet-{uuid.uuid4().hex[:6]}")
    try:
        yield f
    finally:
        f.delete()


def _exact(
    custom: client.CustomObjectsApi, ns: str, name: str, clusters: set[str], intent: ModelServing
) -> bool:
    """Exactly one work per desired cluster, each as rendered, and nothing else."""
    found = _works(custom, ns, name)
    by_cluster = [w["metadata"]["namespace"] for w in found]
    assert sorted(by_cluster) == sorted(set(by_cluster)), "duplicate works"
    assert set(by_cluster) == clusters, (
        f"missing {sorted(clusters - set(by_cluster))[:5]}, "
        f"leftover {sorted(set(by_cluster) - clusters)[:5]}"
    )
    for work in found:
        expected = render.render_model_serving(intent, work["metadata"]["namespace"], {})
        assert work["metadata"]["name"] == expected.name
        assert work["metadata"]["annotations"][c.ANNOTATION_RENDER_HASH] == expected.render_hash
    return True


def test_kill_during_fan_out_then_converge_exactly(
    testbed: Testbed, hub_namespace: str, fleet: FakeFleet, tmp_path: Any
) -> None:
    hub, ns = testbed.hub, hub_namespace
    custom = client.CustomObjectsApi(fleet.api)
    names = fleet.create(50, f"f{uuid.uuid4().hex[:4]}")
    hub.apply_objects([_placement(ns, fleet.label)])
    eventually(lambda: _decided(custom, ns) == set(names), timeout=90)

    # A slow first manager (one write at a time), killed with -9 in the middle of the fan-out.
    mgr = Manager(
        manager_identity(testbed),
        tmp_path / "manager.log",
        "--no-addon-enablement",
        "--concurrency=1",
    ).start()
    try:
        eventually(mgr.metrics, timeout=30, interval=0.2)
        hub.apply_objects([model_serving("fleet", ns, "fleet")])
        eventually(
            lambda: mgr.total("model_serving_manifestwork_applies_total") >= 5,
            timeout=60,
            interval=0.02,
        )
        mgr.kill()
        partial = len(_works(custom, ns, "fleet"))
        assert 0 < partial < 50, f"{partial} works at the kill: not in the middle"

        # While it is down, ten clusters leave the placement: their works become leftovers.
        leaving = names[-10:]
        fleet.relabel(leaving, "no")
        eventually(lambda: _decided(custom, ns) == set(names[:-10]), timeout=60)

        started = time.monotonic()
        mgr.start()
        intent = ModelServing.from_object(
            json.loads(hub.kubectl("get", "msv", "fleet", "-n", ns, "-o", "json").stdout)
        )
        eventually(lambda: _exact(custom, ns, "fleet", set(names[:-10]), intent), timeout=120)
        converged = time.monotonic() - started
        print(f"restart converged to 40 works (from {partial}) in {converged:.1f}s")

        # And stays exact: nothing more is written.
        time.sleep(3)
        writes = mgr.writes()
        time.sleep(5)
        assert mgr.writes() == writes
        _exact(custom, ns, "fleet", set(names[:-10]), intent)

        hub.kubectl("delete", "msv", "fleet", "-n", ns, "--wait=false")
        eventually(lambda: _works(custom, ns, "fleet") == [], timeout=120)
        eventually(
            lambda: hub.kubectl("get", "msv", "fleet", "-n", ns, check=False).returncode != 0,
            timeout=60,
        )
    finally:
        hub.kubectl("delete", "msv", "--all", "-n", ns, "--wait=false", check=False)
        mgr.stop()
        mgr.print_tail()


def _status_writes(mgr: Manager, plural: str) -> float:
    return sum(
        v for k, v in mgr.metrics().items()
        if k.startswith("model_serving_api_writes_total{")
        and 'verb="patch-status"' in k and f'resource="{plural}"' in k
    )


@pytest.mark.parametrize("min_interval", ["1.0", "0"], ids=["coalesced", "uncoalesced-control"])
def test_status_writes_are_coalesced_under_churn(
    testbed: Testbed, hub_namespace: str, fleet: FakeFleet, tmp_path: Any, min_interval: str
) -> None:
    """Feedback changes ~20 times a second on 4 clusters for 12 s: the intent's status is
    written at most once a second (the default ``--min-interval``), and the last change is
    not lost. The control run with ``--min-interval=0`` writes far more often, which shows
    the bound is what the coalescing does, not the speed of this machine."""
    hub, ns = testbed.hub, hub_namespace
    custom = client.CustomObjectsApi(fleet.api)
    names = fleet.create(4, f"c{uuid.uuid4().hex[:4]}")
    hub.apply_objects([_placement(ns, fleet.label)])
    eventually(lambda: _decided(custom, ns) == set(names), timeout=90)
    mgr = Manager(
        manager_identity(testbed), tmp_path / "manager.log",
        "--no-addon-enablement", f"--min-interval={min_interval}",
    ).start()
    work = naming.work_name(c.KIND_MODEL_SERVING, ns, "churn")
    meta = {
        "group": c.GROUP, "version": "v1alpha1", "kind": c.KIND_SERVING_PLATFORM,
        "resource": "servingplatforms", "name": naming.SERVING_PLATFORM_NAME, "namespace": "",
    }

    def messages() -> dict[str, str]:
        status = json.loads(hub.kubectl("get", "msv", "churn", "-n", ns, "-o", "json").stdout)
        return {e["cluster"]: e.get("message", "") for e in status["status"].get("clusters", [])}

    try:
        eventually(mgr.metrics, timeout=30, interval=0.2)
        hub.apply_objects([model_serving("churn", ns, "fleet")])
        eventually(lambda: len(_works(custom, ns, "churn")) == 4, timeout=60)
        for name in names:
            report_work_status(fleet.api, name, work, meta, {"phase": "Installing",
                                                            "message": "start"})
        eventually(lambda: set(messages().values()) == {"start"}, timeout=60)
        time.sleep(2)  # let the last write of the settling land

        before = _status_writes(mgr, "modelservings")
        started = time.monotonic()
        step = 0
        while time.monotonic() - started < 12:
            step += 1
            report_work_status(fleet.api, names[step % 4], work, meta,
                               {"phase": "Installing", "message": f"step {step}"})
            time.sleep(0.05)
        churn = time.monotonic() - started
        last = {names[(step - i) % 4]: f"step {step - i}" for i in range(4)}
        # Nothing is lost: the status ends with every cluster's last message...
        eventually(lambda: messages() == last, timeout=30)
        time.sleep(2)
        written = _status_writes(mgr, "modelservings") - before
        print(f"min-interval {min_interval}: {step} feedback changes in {churn:.1f}s, "
              f"{written:.0f} status writes")
        bound = churn + 2  # one write per second of churn, plus the settling write after it
        if min_interval == "1.0":
            assert written <= bound, f"{written} status writes in {churn:.1f}s of churn"
            assert written >= churn / 4, f"status fell behind: {written} writes"
        else:
            assert written > 2 * bound, f"control run wrote only {written} times"
    finally:
        hub.kubectl("delete", "msv", "churn", "-n", ns, "--wait=false", check=False)
        eventually(lambda: _works(custom, ns, "churn") == [], timeout=120)
        mgr.stop()
        mgr.print_tail()
