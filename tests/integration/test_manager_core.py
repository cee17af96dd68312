"""The manager end to end on the testbed: placement, rendering, status, removal, steady state."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from addon_api.hub import MultiClusterInferenceService
from addon_manager import render
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


def test_inference_service_on_two_clusters(
    testbed: Testbed, hub_namespace: str, manager: Manager
) -> None:
    hub, (spoke1, spoke2) = testbed.hub, testbed.spokes
    ns = hub_namespace
    label = f"t-{uuid.uuid4().hex[:6]}"
    for spoke in testbed.spokes:
        hub.kubectl("label", "managedcluster", spoke.name, f"{label}=yes", "--overwrite")
    try:
        hub.apply_objects([placement("p", ns, {label: "yes"}), model_serving("kserve", ns, "p")])
        # The platform goes first; the InferenceService waits for it.
        hub.apply_objects([_isvc("iris", ns, "p")])
        eventually(
            lambda: set(works(hub, ns, "kserve", "ModelServing")) == {"cluster1", "cluster2"},
            timeout=60,
        )

        def waiting() -> bool:
            st = _status(hub, "mcisvc", ns, "iris")
            return st.get("summary", {}).get("desired") == 2 and all(
                c["reason"] == "WaitingForPlatform" for c in st["clusters"]
            )

        eventually(waiting, timeout=30)
        assert works(hub, ns, "iris", "MultiClusterInferenceService") == {}

        for spoke in (spoke1, spoke2):
            eventually(partial(exists, spoke, "servingplatform", "model-serving"), timeout=60)
            set_platform_phase(spoke, "Available")

        def two_works() -> dict[str, Any]:
            found = works(hub, ns, "iris", "MultiClusterInferenceService")
            assert len(found) == 2, sorted(found)
            return found

        got = eventually(two_works, timeout=60)

        # Exactly as rendered, with the override on cluster2 only.
        intent = MultiClusterInferenceService.from_object(get_json(hub, "mcisvc", "iris", "-n", ns))
        for cluster, work in got.items():
            labels = get_json(hub, "managedcluster", cluster)["metadata"].get("labels", {})
            expected = render.render_inference_service(intent, cluster, labels).body
            assert differences(expected["spec"], work["spec"]) == []
            assert work["metadata"]["labels"] == expected["metadata"]["labels"]
            assert (
                work["metadata"]["annotations"]["modelserving.opendatahub.io/render-hash"]
                == expected["metadata"]["annotations"]["modelserving.opendatahub.io/render-hash"]
            )
        isvc1 = eventually(
            lambda: get_json(spoke1, "inferenceservice", "iris", "-n", "models"), timeout=60
        )
        isvc2 = eventually(
            lambda: get_json(spoke2, "inferenceservice", "iris", "-n", "models"), timeout=60
        )
        assert isvc1["spec"]["predictor"]["minReplicas"] == 1
        assert isvc2["spec"]["predictor"]["minReplicas"] == 2
        assert isvc1["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "Standard"

        # A status written on the spoke (as KServe would) reaches the hub intent.
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        spoke1.kubectl(
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
            st = _status(hub, "mcisvc", ns, "iris")
            entry = {c["cluster"]: c for c in st.get("clusters", [])}.get("cluster1", {})
            assert entry.get("ready") and st["summary"]["ready"] == 1, st
            return st

        st = eventually(reported, timeout=60)
        entry = {c["cluster"]: c for c in st["clusters"]}["cluster1"]
        assert entry["url"] == "http://iris.models.example"
        assert entry["modelState"] == "Loaded"
        assert st["summary"]["readyText"] == "1/2"
        assert st["clusters"][0]["cluster"] == "cluster2"  # non-ready first

        # Relabelling cluster2 out of the placement removes only its work.
        hub.kubectl("label", "managedcluster", "cluster2", f"{label}=no", "--overwrite")
        eventually(
            lambda: set(works(hub, ns, "iris", "MultiClusterInferenceService")) == {"cluster1"},
            timeout=60,
        )
        eventually(
            lambda: not exists(spoke2, "inferenceservice", "iris", "-n", "models"), timeout=60
        )
        assert exists(spoke1, "inferenceservice", "iris", "-n", "models")
        eventually(
            lambda: _status(hub, "mcisvc", ns, "iris")["summary"].get("readyText") == "1/1",
            timeout=30,
        )

        # Steady state: no writes at all for a while.
        before = manager.wait_quiet()
        versions = {
            n: w["metadata"]["resourceVersion"]
            for n, w in works(hub, ns, "iris", "MultiClusterInferenceService").items()
        }
        intent_rv = get_json(hub, "mcisvc", "iris", "-n", ns)["metadata"]["resourceVersion"]
        time.sleep(30)  # the subject: 30 s of steady state bring no write at all
        assert manager.writes() == before
        assert {
            n: w["metadata"]["resourceVersion"]
            for n, w in works(hub, ns, "iris", "MultiClusterInferenceService").items()
        } == versions
        assert get_json(hub, "mcisvc", "iris", "-n", ns)["metadata"]["resourceVersion"] == intent_rv

        # Deletion: the finalizer holds the intent until its works are gone.
        hub.kubectl("delete", "mcisvc", "iris", "-n", ns, "--wait=false")
        eventually(lambda: not exists(hub, "mcisvc", "iris", "-n", ns), timeout=60)
        assert works(hub, ns, "iris", "MultiClusterInferenceService") == {}
        eventually(
            lambda: not exists(spoke1, "inferenceservice", "iris", "-n", "models"), timeout=60
        )
    finally:
        hub.kubectl("delete", "msv,mcisvc", "--all", "-n", ns, "--wait=false", check=False)
        for spoke in testbed.spokes:
            hub.kubectl("label", "managedcluster", spoke.name, f"{label}-", check=False)
        eventually(lambda: not exists(hub, "msv", "kserve", "-n", ns), timeout=60)
