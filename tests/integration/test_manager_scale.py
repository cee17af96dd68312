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
from addon_manager import render
from testbed.fleet import Testbed
from tests.helpers import eventually
from tests.integration.manager_support import Manager, manager_identity, model_serving, prepare

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
                    "spec": {"hubAcceptsClient": True},
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
