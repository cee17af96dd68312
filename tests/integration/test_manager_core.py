"""The manager end to end on the testbed: placement, rendering, status, removal, steady state.

One scenario, a class whose steps report separately (see tests/conftest.py).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from importlib import metadata
from typing import Any

import pytest

from addon_api import constants as c
from addon_api.hub import MultiClusterInferenceService
from addon_manager.kinds import inference_service as isvc_kind
from testbed.fleet import Testbed
from testbed.support.manager import (
    Manager,
    differences,
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


@pytest.fixture(scope="module")
def manager(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Manager]:
    """One manager for the module (addon enablement off: no addon manager in these tests)."""
    with running_manager(
        testbed,
        tmp_path_factory.mktemp("manager"),
        "--no-addon-enablement",
        "--deletion-blocked-after=5",
        # the pins and approvals read every 2 s, not 10: the steady-state window sees eight
        # rounds of them in 16 s (three in 30 s before)
        "--sealing-refresh=2",
    ) as mgr:
        yield mgr


def _isvc(name: str, namespace: str, placement_name: str) -> dict[str, Any]:
    override = {
        "clusterNames": ["cluster2"], "patch": {"template": {"predictor": {"minReplicas": 2}}}
    }
    return inference_service(name, namespace, placement_name, overrides=[override])


def _status(hub: Any, plural: str, ns: str, name: str) -> dict[str, Any]:
    return dict(get_json(hub, plural, name, "-n", ns).get("status") or {})


def _cond(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions", []) if c["type"] == ctype), {})


@dataclass
class TwoClusters:
    """What the steps of :class:`TestInferenceServiceOnTwoClusters` share."""

    hub: Any
    spoke1: Any
    spoke2: Any
    ns: str
    label: str
    works: dict[str, Any] = field(default_factory=dict)
    """The model's two works, once step 3 saw them."""
    isvcs: dict[str, Any] = field(default_factory=dict)
    """The InferenceService on each spoke (by cluster), once step 3 saw them."""

    def status(self) -> dict[str, Any]:
        return _status(self.hub, "mcisvc", self.ns, "iris")


@pytest.fixture(scope="class")
def two_clusters(
    testbed: Testbed, scenario_namespace: str, manager: Manager
) -> Iterator[TwoClusters]:
    """Both spokes labelled for a Placement; a ModelServing and, at once, an InferenceService
    (with an override for cluster2) on it."""
    hub, (spoke1, spoke2) = testbed.hub, testbed.spokes
    ns = scenario_namespace
    label = f"t-{uuid.uuid4().hex[:6]}"
    for spoke in testbed.spokes:
        hub.kubectl("label", "managedcluster", spoke.name, f"{label}=yes", "--overwrite")
    try:
        hub.apply_objects([placement("p", ns, {label: "yes"}), model_serving("kserve", ns, "p")])
        # The platform goes first; the InferenceService waits for it.
        hub.apply_objects([_isvc("iris", ns, "p")])
        yield TwoClusters(hub, spoke1, spoke2, ns, label)
    finally:
        hub.kubectl("delete", "msv,mcisvc", "--all", "-n", ns, "--wait=false", check=False)
        for spoke in testbed.spokes:
            hub.kubectl("label", "managedcluster", spoke.name, f"{label}-", check=False)
        eventually(lambda: not exists(hub, "msv", "kserve", "-n", ns), timeout=60)


class TestInferenceServiceOnTwoClusters:
    """A ModelServing and an InferenceService on two clusters: the model waits for the
    platform, is rendered exactly (with an override on one cluster), reports status back,
    leaves a relabelled cluster, stays quiet in steady state and is deleted cleanly."""

    def test_1_platform_works_on_both_clusters(self, two_clusters: TwoClusters) -> None:
        s = two_clusters
        eventually(
            lambda: set(works(s.hub, s.ns, "kserve", "ModelServing")) == {"cluster1", "cluster2"},
            timeout=60,
        )

    def test_2_model_waits_for_the_platform(self, two_clusters: TwoClusters) -> None:
        s = two_clusters

        def waiting() -> bool:
            st = s.status()
            return st.get("summary", {}).get("desired") == 2 and all(
                c["reason"] == "WaitingForPlatform" for c in st["clusters"]
            )

        eventually(waiting, timeout=30)
        assert works(s.hub, s.ns, "iris", "MultiClusterInferenceService") == {}

    @pytest.mark.needs("test_1_platform_works_on_both_clusters")
    def test_3_platform_available_model_on_both_clusters(self, two_clusters: TwoClusters) -> None:
        s = two_clusters
        for spoke in (s.spoke1, s.spoke2):
            eventually(partial(exists, spoke, "servingplatform", "model-serving"), timeout=60)
            set_platform_phase(spoke, "Available")

        def two_works() -> dict[str, Any]:
            found = works(s.hub, s.ns, "iris", "MultiClusterInferenceService")
            assert len(found) == 2, sorted(found)
            return found

        s.works = eventually(two_works, timeout=60)
        for spoke in (s.spoke1, s.spoke2):
            s.isvcs[spoke.name] = eventually(
                partial(get_json, spoke, "inferenceservice", "iris", "-n", "models"), timeout=60
            )

    @pytest.mark.needs("test_3_platform_available_model_on_both_clusters")
    def test_4_works_exactly_as_rendered(self, two_clusters: TwoClusters) -> None:
        s = two_clusters
        # Exactly as rendered, with the override on cluster2 only.
        intent = MultiClusterInferenceService.from_object(
            get_json(s.hub, "mcisvc", "iris", "-n", s.ns)
        )
        for cluster, work in s.works.items():
            labels = get_json(s.hub, "managedcluster", cluster)["metadata"].get("labels", {})
            expected = isvc_kind.render(intent, cluster, labels).body
            assert differences(expected["spec"], work["spec"]) == []
            assert work["metadata"]["labels"] == expected["metadata"]["labels"]
            assert (
                work["metadata"]["annotations"]["modelserving.opendatahub.io/render-hash"]
                == expected["metadata"]["annotations"]["modelserving.opendatahub.io/render-hash"]
            )

    @pytest.mark.needs("test_3_platform_available_model_on_both_clusters")
    def test_5_override_on_cluster2_only(self, two_clusters: TwoClusters) -> None:
        isvc1, isvc2 = two_clusters.isvcs["cluster1"], two_clusters.isvcs["cluster2"]
        assert isvc1["spec"]["predictor"]["minReplicas"] == 1
        assert isvc2["spec"]["predictor"]["minReplicas"] == 2
        assert isvc1["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "Standard"

    @pytest.mark.needs("test_3_platform_available_model_on_both_clusters")
    def test_6_spoke_status_reaches_the_hub(self, two_clusters: TwoClusters) -> None:
        s = two_clusters
        # A status written on the spoke (as KServe would) reaches the hub intent.
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        s.spoke1.kubectl(
            "patch",
            "inferenceservice",
            "iris",
            "-n",
            "models",
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(
                {
                    "status": {
                        "url": "http://iris.models.example",
                        "conditions": [
                            {"type": "Ready", "status": "True", "lastTransitionTime": now},
                            {"type": "PredictorReady", "status": "True", "lastTransitionTime": now},
                        ],
                        "modelStatus": {
                            "transitionStatus": "UpToDate",
                            "states": {"activeModelState": "Loaded", "targetModelState": "Loaded"},
                        },
                    }
                }
            ),
        )

        def reported() -> dict[str, Any]:
            st = s.status()
            entry = {c["cluster"]: c for c in st.get("clusters", [])}.get("cluster1", {})
            assert entry.get("ready") and st["summary"]["ready"] == 1, st
            return st

        st = eventually(reported, timeout=60)
        entry = {c["cluster"]: c for c in st["clusters"]}["cluster1"]
        assert entry["url"] == "http://iris.models.example"
        assert entry["modelState"] == "Loaded"
        assert st["summary"]["readyText"] == "1/2"
        assert st["clusters"][0]["cluster"] == "cluster2"  # non-ready first

    @pytest.mark.needs(
        "test_3_platform_available_model_on_both_clusters", "test_6_spoke_status_reaches_the_hub"
    )
    def test_7_relabelled_cluster_loses_only_its_work(self, two_clusters: TwoClusters) -> None:
        s = two_clusters
        # Relabelling cluster2 out of the placement removes only its work.
        s.hub.kubectl("label", "managedcluster", "cluster2", f"{s.label}=no", "--overwrite")
        eventually(
            lambda: set(works(s.hub, s.ns, "iris", "MultiClusterInferenceService")) == {"cluster1"},
            timeout=60,
        )
        eventually(
            lambda: not exists(s.spoke2, "inferenceservice", "iris", "-n", "models"), timeout=60
        )
        assert exists(s.spoke1, "inferenceservice", "iris", "-n", "models")
        eventually(lambda: s.status()["summary"].get("readyText") == "1/1", timeout=30)

    @pytest.mark.needs("test_3_platform_available_model_on_both_clusters")
    def test_8_steady_state_writes_nothing(
        self, two_clusters: TwoClusters, manager: Manager
    ) -> None:
        s = two_clusters

        def versions() -> dict[str, str]:
            return {
                n: w["metadata"]["resourceVersion"]
                for n, w in works(s.hub, s.ns, "iris", "MultiClusterInferenceService").items()
            }

        # Steady state: no writes at all for a while.
        before = manager.wait_quiet()
        work_rvs = versions()
        intent_rv = get_json(s.hub, "mcisvc", "iris", "-n", s.ns)["metadata"]["resourceVersion"]
        # The subject: 16 s of steady state bring no write at all: the manager's sealing
        # refresh eight times, the work agents' status sync sixteen, and the end of the
        # 15 s its last write is trusted before the watch shows it (WATCH_GRACE).
        time.sleep(16)
        assert manager.writes() == before
        assert versions() == work_rvs
        assert (
            get_json(s.hub, "mcisvc", "iris", "-n", s.ns)["metadata"]["resourceVersion"]
            == intent_rv
        )

    @pytest.mark.needs("test_3_platform_available_model_on_both_clusters")
    def test_9_deletion_waits_for_the_works(self, two_clusters: TwoClusters) -> None:
        s = two_clusters
        # Deletion: the finalizer holds the intent until its works are gone.
        s.hub.kubectl("delete", "mcisvc", "iris", "-n", s.ns, "--wait=false")
        eventually(lambda: not exists(s.hub, "mcisvc", "iris", "-n", s.ns), timeout=60)
        assert works(s.hub, s.ns, "iris", "MultiClusterInferenceService") == {}
        eventually(
            lambda: not exists(s.spoke1, "inferenceservice", "iris", "-n", "models"), timeout=60
        )


def test_the_manager_brings_the_hub_crds_to_its_schema_unless_a_newer_one_did(
    testbed: Testbed, manager: Manager,
) -> None:
    """Helm never upgrades a chart's crds/: the manager does, as it starts to act, with the
    chart's identity (patch on these CRDs only). One applied by a newer manager it leaves."""
    from addon_manager.shell import crds

    hub = testbed.hub
    name = f"multiclusterinferenceservices.{c.GROUP}"
    rollout = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/rollout"

    def crd() -> dict[str, Any]:
        return dict(get_json(hub, "crd", name))

    def has_rollout() -> bool:
        spec = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        return "rollout" in spec["properties"]

    def older_schema(mark: str) -> None:
        """The CRD as an older chart installed it: no spec.rollout."""
        hub.kubectl("patch", "crd", name, "--type=json", "-p", json.dumps([
            {"op": "remove", "path": rollout},
            {"op": "add", "path": "/metadata/annotations",
             "value": {crds.VERSION_ANNOTATION: mark}}]))
        assert not has_rollout()

    try:
        older_schema("0.0.1")
        manager.kill()
        manager.start()
        eventually(has_rollout, timeout=60)
        assert crd()["metadata"]["annotations"][crds.VERSION_ANNOTATION] == metadata.version(
            "model-serving-addon")
        # a newer manager's CRD (a rolling update's old replica restarting): left alone
        older_schema("99.0.0")
        manager.kill()
        manager.start()
        eventually(lambda: "was applied by a newer manager (99.0.0)" in manager.tail(200),
                   timeout=60)
        assert not has_rollout()
    finally:
        hub.kubectl("annotate", "crd", name, f"{crds.VERSION_ANNOTATION}-", check=False)
        manager.kill()
        manager.start()
        eventually(has_rollout, timeout=60)
