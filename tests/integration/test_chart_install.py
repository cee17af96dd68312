"""The chart on the testbed hub, and the agent deployed by OCM's own addon manager."""

from __future__ import annotations

import json
from typing import Any

from addon_api import constants as c
from testbed.chart import CHART, helm
from testbed.fleet import Testbed
from testbed.support.waiting import eventually

RELEASE_NAMESPACE = "model-serving-system"


def _json(cluster: Any, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    for cond in obj.get("status", {}).get("conditions", []):
        if cond["type"] == kind:
            return str(cond["status"])
    return None


def test_install_and_enable_on_cluster1(testbed: Testbed) -> None:
    hub, spoke = testbed.hub, testbed.spokes[0]
    kubeconfig = f"--kubeconfig={hub.kubeconfig}"
    helm(
        "upgrade",
        "--install",
        "msa",
        str(CHART),
        "-n",
        RELEASE_NAMESPACE,
        "--create-namespace",
        "--wait=false",
        kubeconfig,
    )
    try:
        # Every object the chart renders was accepted by the hub API server.
        manager = _json(hub, "deployment", "model-serving-addon-manager", "-n", RELEASE_NAMESPACE)
        assert manager["spec"]["template"]["spec"]["serviceAccountName"] == (
            "model-serving-addon-manager"
        )
        assert (
            _json(hub, "clustermanagementaddon", c.ADDON_NAME)["spec"]["installStrategy"]["type"]
            == "Manual"
        )

        # Asking for ModelMesh is admitted, with the chart's deprecation warning (once the
        # API server has loaded the new policy).
        def dry_run(platform: str) -> str:
            return hub.kubectl(
                "apply", "--dry-run=server", "-n", "default", "-f", "-", input=json.dumps({
                    "apiVersion": c.API_VERSION, "kind": c.KIND_MODEL_SERVING,
                    "metadata": {"name": platform.lower()},
                    "spec": {"platform": platform, "placementRef": {"name": "p"}}})).stderr

        warned = eventually(lambda: (lambda err: err if "Warning:" in err and (
            "platform ModelMesh is deprecated" in err) else None)(dry_run("ModelMesh")),
            timeout=30)
        assert "model-serving-modelmesh-deprecated" in warned, warned
        assert "deprecated" not in dry_run("KServe")

        testbed.ensure_hub_controller("addon-manager")
        hub.apply_objects(
            [
                {
                    "apiVersion": "addon.open-cluster-management.io/v1alpha1",
                    "kind": "ManagedClusterAddOn",
                    "metadata": {"name": c.ADDON_NAME, "namespace": spoke.name},
                    "spec": {},
                }
            ]
        )

        def rendered_work() -> dict[str, Any] | None:
            works = _json(
                hub,
                "manifestworks",
                "-n",
                spoke.name,
                "-l",
                f"open-cluster-management.io/addon-name={c.ADDON_NAME}",
            )["items"]
            return works[0] if works else None

        work = eventually(rendered_work, timeout=90)
        dep = next(m for m in work["spec"]["workload"]["manifests"] if m["kind"] == "Deployment")
        container = dep["spec"]["template"]["spec"]["containers"][0]
        assert "--cluster-name=cluster1" in container["args"]
        assert "--log-level=INFO" in container["args"]
        assert container["image"].startswith("quay.io/opendatahub/model-serving-addon:")
        assert dep["metadata"]["namespace"] == c.AGENT_NAMESPACE

        # The work agent applied it on the spoke; kwok runs the pod, so it becomes Available.
        def agent_available() -> bool:
            got = _json(spoke, "deployment", "model-serving-agent", "-n", c.AGENT_NAMESPACE)
            return _condition(got, "Available") == "True"

        eventually(agent_available, timeout=120)
        for crd in ("servingplatforms", "sealedstorageconnections"):
            spoke.kubectl("get", "crd", f"{crd}.{c.GROUP}")

        def addon_available() -> bool:
            mca = _json(hub, "managedclusteraddon", c.ADDON_NAME, "-n", spoke.name)
            return _condition(mca, "Available") == "True"

        eventually(addon_available, timeout=120)

        # Disabling the add-on removes the agent but orphans the CRDs (and their objects).
        hub.kubectl("delete", "managedclusteraddon", c.ADDON_NAME, "-n", spoke.name)
        eventually(
            lambda: (
                spoke.kubectl(
                    "get", "deployment", "model-serving-agent", "-n", c.AGENT_NAMESPACE, check=False
                ).returncode
                != 0
            ),
            timeout=90,
        )
        spoke.kubectl("get", "crd", f"servingplatforms.{c.GROUP}")
    finally:
        hub.kubectl(
            "delete",
            "managedclusteraddon",
            c.ADDON_NAME,
            "-n",
            spoke.name,
            "--ignore-not-found",
            check=False,
        )
        helm("uninstall", "msa", "-n", RELEASE_NAMESPACE, kubeconfig, check=False)
