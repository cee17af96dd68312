"""Spoke-less fleets on the hub, and what the manager must have written for them.

The ManagedClusters here have no spoke (no agent): they exist on the hub with their
namespaces and are selected by a real Placement, so the hub's ManifestWorks are what counts.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import uuid
from collections.abc import Iterator
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from addon_api import constants as c
from addon_api.common import Resource
from addon_api.hub import ModelServing, MultiClusterInferenceService, MultiClusterServingRuntime
from addon_manager.facts import canonical, naming
from addon_manager.kinds import inference_service, model_serving, render, serving_runtime
from testbed.fleet import Testbed
from testbed.support.manager import differences

CLUSTERSET_LABEL = "cluster.open-cluster-management.io/clusterset"
CLUSTERS = ("cluster.open-cluster-management.io", "v1", "managedclusters")
DECISIONS = ("cluster.open-cluster-management.io", "v1beta1", "placementdecisions")
WORK = ("work.open-cluster-management.io", "v1", "manifestworks")
TOLERATIONS = [
    {"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists"},
    {"key": "cluster.open-cluster-management.io/unavailable", "operator": "Exists"},
]
PLATFORM_META = {
    "group": c.GROUP, "version": "v1alpha1", "kind": c.KIND_SERVING_PLATFORM,
    "resource": "servingplatforms", "name": naming.SERVING_PLATFORM_NAME, "namespace": "",
}
"""resourceMeta of the ServingPlatform manifest in a ModelServing's work status."""


class FakeFleet:
    """ManagedClusters (and their hub namespaces) without spokes, labelled ``label=yes``."""

    def __init__(self, api: client.ApiClient, label: str) -> None:
        self.api = api
        self.label = label
        self.names: list[str] = []

    def create(self, count: int, prefix: str) -> list[str]:
        """Create ``count`` more clusters in parallel; return their names."""
        core, custom = client.CoreV1Api(self.api), client.CustomObjectsApi(self.api)
        names = [f"{prefix}-{i:04d}" for i in range(len(self.names), len(self.names) + count)]

        def one(name: str) -> None:
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
            custom.create_cluster_custom_object(
                *CLUSTERS,
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
                *CLUSTERS, name, {"metadata": {"labels": {self.label: value}}}
            )

    def delete(self) -> None:
        """Delete every cluster and namespace this fleet created."""
        core, custom = client.CoreV1Api(self.api), client.CustomObjectsApi(self.api)

        def one(name: str) -> None:
            with contextlib.suppress(ApiException):
                custom.delete_cluster_custom_object(*CLUSTERS, name)
            with contextlib.suppress(ApiException):
                core.delete_namespace(name)

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(one, self.names))


@contextlib.contextmanager
def fake_fleet(testbed: Testbed) -> Iterator[FakeFleet]:
    """A :class:`FakeFleet` on the testbed's hub (its own client), deleted afterwards."""
    api = testbed.hub.api_client()
    api.configuration.connection_pool_maxsize = 16
    fleet = FakeFleet(api, f"fleet-{uuid.uuid4().hex[:6]}")
    try:
        yield fleet
    finally:
        fleet.delete()
        api.close()


def fleet_placement(ns: str, label: str, name: str = "fleet") -> dict[str, Any]:
    """A Placement of every cluster labelled ``label=yes`` (agent-less clusters tolerated)."""
    return {
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "clusterSets": ["default"],
            "tolerations": TOLERATIONS,
            "predicates": [
                {"requiredClusterSelector": {"labelSelector": {"matchLabels": {label: "yes"}}}}
            ],
        },
    }


def decided(custom: client.CustomObjectsApi, ns: str, name: str = "fleet") -> set[str]:
    """Clusters the decisions of Placement ``ns/name`` select."""
    pds = cast(
        dict[str, Any],
        custom.list_namespaced_custom_object(
            *DECISIONS[:2], ns, DECISIONS[2],
            label_selector=f"cluster.open-cluster-management.io/placement={name}",
        ),
    )["items"]
    return {d["clusterName"] for pd in pds for d in pd.get("status", {}).get("decisions") or []}


def intent_works(
    custom: client.CustomObjectsApi, ns: str, name: str, kind: str = c.KIND_MODEL_SERVING
) -> list[dict[str, Any]]:
    """Every ManifestWork the hub holds for one intent (by its owner labels)."""
    found = cast(
        dict[str, Any],
        custom.list_cluster_custom_object(
            *WORK,
            label_selector=f"{c.LABEL_INTENT_KIND}={kind},"
            f"{c.LABEL_INTENT_NAMESPACE}={ns},{c.LABEL_INTENT_NAME}={name}",
        ),
    )
    return list(found["items"])


def pure_render(intent: Resource, cluster: str) -> render.RenderedWork:
    """What the manager's pure rendering makes of ``intent`` for a label-less ``cluster``."""
    if isinstance(intent, ModelServing):
        return model_serving.render(intent, cluster, {})
    if isinstance(intent, MultiClusterServingRuntime):
        return serving_runtime.render(intent, cluster, {})
    if isinstance(intent, MultiClusterInferenceService):
        return inference_service.render(intent, cluster, {})
    raise TypeError(f"no pure render for {type(intent).__name__}")


def exact(custom: client.CustomObjectsApi, intent: Resource, clusters: set[str]) -> bool:
    """Whether the hub holds exactly the works the pure render says, and nothing else.

    Exactly one work per desired cluster, each with the content of the pure render; raises
    AssertionError naming what differs.
    """
    ns, name = str(intent.metadata.namespace), str(intent.metadata.name)
    found = intent_works(custom, ns, name, intent.kind)
    by_cluster = [w["metadata"]["namespace"] for w in found]
    assert sorted(by_cluster) == sorted(set(by_cluster)), "duplicate works"
    assert set(by_cluster) == clusters, (
        f"{len(set(by_cluster))} works for {len(clusters)} clusters: "
        f"missing {sorted(clusters - set(by_cluster))[:5]}, "
        f"leftover {sorted(set(by_cluster) - clusters)[:5]}"
    )
    for work in found:
        cluster = work["metadata"]["namespace"]
        expected = pure_render(intent, cluster)
        assert work["metadata"]["name"] == expected.name
        assert work["metadata"]["annotations"][c.ANNOTATION_RENDER_HASH] == expected.render_hash
        assert canonical.canonical_hash(work["spec"]["workload"]) == canonical.canonical_hash(
            expected.body["spec"]["workload"]
        ), f"{cluster}: content differs from the pure render"
        assert not differences(expected.body["spec"], work["spec"]), cluster
    return True
