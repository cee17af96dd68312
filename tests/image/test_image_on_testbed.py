"""The manager and one agent run from the container image against the testbed (issue 11, 4).

Not part of ``make test``: it needs podman and the image ``make image`` builds. Run it with
``make image-test`` (builds the image, then ``pytest -m image tests/image``), passing this
machine's podman flags the same way as to ``make image``::

    make image-test LOCAL_BASES=1 PODMAN_FLAGS="--runtime runc --ulimit nofile=1024:1024 \
      --ulimit nproc=1024:1024 -v /etc/ssl/certs:/etc/ssl/certs:ro"

Every test here carries the ``image`` marker: ``make test`` deselects it (``-m "not image"``)
and tests/conftest.py skips it unless the ``-m`` expression names ``image``. It first checks
that the image holds this tree's code (a stale image fails, naming the modules that differ).

The flow is the demo's, with podman in place of a kubelet: the chart is installed on the hub
with helm, OCM's add-on manager deploys the agent's ServiceAccount, RBAC, CRDs and Deployment
to each spoke, and then the manager and cluster1's agent run from the image with the args,
env and security settings of the Deployments the chart and OCM created (testbed/support/
podman.py), each with a ServiceAccount-token kubeconfig of its Deployment's
ServiceAccount. cluster2 runs no agent; the Placement selects only cluster1. Asserted end to
end on the hub: the containerised manager writes the works, OCM's work agent applies them, the
containerised agent installs KServe (pods faked Ready by kwok), unseals the storage
credentials and reports; the hub's ModelServing shows cluster1 Available, the
StorageConnection Delivered, and the model (KServe's real controller, run outside the
cluster as in the demo) Ready with its URL.
"""

from __future__ import annotations

import base64
import json
import os
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from addon_api import constants as c
from testbed import chart, demo, identities
from testbed.cluster import Cluster
from testbed.fleet import Testbed
from testbed.processes import free_port
from testbed.support import podman as pm
from testbed.support.waiting import eventually

pytestmark = [pytest.mark.image, pytest.mark.timeout(1200)]

NS = demo.NAMESPACE
"""Hub namespace of the intents (the demo's, so that demo.rows() shows them)."""
SELECTED = "model-serving.test/image"
"""ManagedCluster label the Placement selects: set on the image agent's cluster only."""
EXAMPLES = (
    "storageconnection.yaml", "modelserving-kserve.yaml", "servingruntime.yaml",
    "inferenceservice.yaml",
)


@pytest.fixture(scope="module")
def image() -> pm.Image:
    found = pm.local_image()
    assert found.uid != 0, f"{found.ref} runs as root; the chart asks for runAsNonRoot"
    stale = pm.stale_modules(found)
    assert not stale, f"{found.ref} is older than this tree ({stale[:10]}); run `make image`"
    return found


def _json(cluster: Cluster, *args: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(cluster.kubectl(*args, "-o", "json").stdout)
    return out


def _status_by_cluster(hub: Cluster, plural: str, name: str) -> dict[str, dict[str, Any]]:
    obj = _json(hub, "get", plural, name, "-n", NS)
    return {e["cluster"]: e for e in (obj.get("status") or {}).get("clusters") or []}


def _kubeconfig_for(
    cluster: Cluster, namespace: str, account: str, image: pm.Image, path: Path
) -> tuple[Path, list[Path]]:
    """A token kubeconfig of ``namespace/account`` owned by the image's user (mode 0600), and
    the files the container must see: it and the CA file it names."""
    kubeconfig = identities.token_kubeconfig(cluster, namespace, account, path)
    os.chown(kubeconfig, image.uid, image.uid)
    ca = Path(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"][
        "certificate-authority"])
    assert ca.stat().st_mode & 0o004, f"{ca} is not readable by the image's user"
    return kubeconfig, [kubeconfig, ca]


def _run_manager(bed: Testbed, image: pm.Image) -> tuple[pm.Container, int]:
    """The manager from the image, as the chart's Deployment runs it (leader election on)."""
    deployment = _json(
        bed.hub, "get", "deployments", "-n", demo.RELEASE_NAMESPACE,
        "-l", "app.kubernetes.io/component=manager",
    )["items"][0]
    pod = pm.pod_container(deployment, "manager", pm.container_name("manager"))
    assert pod.service_account == chart.MANAGER_SERVICE_ACCOUNT
    kubeconfig, files = _kubeconfig_for(
        bed.hub, demo.RELEASE_NAMESPACE, pod.service_account, image,
        bed.hub.directory / "manager-image.kubeconfig",
    )
    bed.hub.identities["manager"] = kubeconfig
    metrics = free_port()
    args = [
        *pm.replace_flag(pod.args, "--metrics-port", str(metrics)),
        f"--kubeconfig={kubeconfig}",
        "--log-format=text",
    ]
    container = pm.Container(
        "manager", image, args, bed.log_dir, env=pod.env, flags=pod.flags, files=files
    )
    return container, metrics


def _run_agent(bed: Testbed, spoke: Cluster, image: pm.Image) -> tuple[pm.Container, int]:
    """``spoke``'s agent from the image, as the Deployment OCM deployed there runs it.

    Testbed only: KServe's controller runs outside the cluster, so the agent points the
    webhook configurations it installs at that process (as in the demo).
    """
    def with_verify_key() -> Any:
        found = _json(spoke, "get", "deployment", "model-serving-agent", "-n", c.AGENT_NAMESPACE)
        args = found["spec"]["template"]["spec"]["containers"][0].get("args") or []
        assert any(a.startswith("--seal-verify-key=") and len(a) > 20 for a in args), args
        return found

    deployment = eventually(with_verify_key, timeout=180)
    role = f"{spoke.name}-agent"
    pod = pm.pod_container(deployment, "agent", pm.container_name(role))
    assert pod.service_account == chart.AGENT_SERVICE_ACCOUNT
    # OCM filled in the template's variables for this cluster.
    assert f"--cluster-name={spoke.name}" in pod.args, pod.args
    assert f"--namespace={c.AGENT_NAMESPACE}" in pod.args, pod.args
    assert "--bundle-dir=/opt/model-serving/bundles" in pod.args, pod.args
    kubeconfig, files = _kubeconfig_for(
        spoke, c.AGENT_NAMESPACE, pod.service_account, image,
        spoke.directory / "agent-image.kubeconfig",
    )
    spoke.identities["model-serving-agent"] = kubeconfig
    kserve = bed.kserve_controller(spoke)
    metrics = free_port()
    args = [
        *pm.replace_flag(pod.args, "--metrics-port", str(metrics)),
        "--metrics-address=127.0.0.1",
        f"--kubeconfig={kubeconfig}",
    ]
    container = pm.Container(
        role, image, args, bed.log_dir, env={**pod.env, **kserve.agent_env()}, flags=pod.flags,
        files=[*files, kserve.ca_file],
    )
    return container, metrics


def _placement(cluster_label: str) -> dict[str, Any]:
    """Placement ``default`` (the one every example names) of the clusters labelled so."""
    return {
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": {"name": "default", "namespace": NS},
        "spec": {
            "clusterSets": ["default"],
            "predicates": [
                {"requiredClusterSelector": {
                    "labelSelector": {"matchLabels": {cluster_label: "yes"}}}}
            ],
        },
    }


def _hub_state(hub: Cluster) -> dict[str, dict[str, str]]:
    """Per intent, each cluster's phase on the hub (a model: ``Ready`` once ready with a URL)."""
    isvc = {
        cluster: "Ready" if e.get("ready") and str(e.get("url", "")).startswith("http")
        else str(e.get("phase", ""))
        for cluster, e in _status_by_cluster(
            hub, "multiclusterinferenceservices", "sklearn-iris"
        ).items()
    }
    return {
        "ModelServing/kserve": {
            cl: str(e.get("phase", ""))
            for cl, e in _status_by_cluster(hub, "modelservings", "kserve").items()
        },
        "StorageConnection/demo-s3": {
            cl: str(e.get("phase", ""))
            for cl, e in _status_by_cluster(hub, "storageconnections", "demo-s3").items()
        },
        "MultiClusterInferenceService/sklearn-iris": isvc,
    }


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        text: str = response.read().decode()
    return text


def test_manager_and_agent_from_the_image_serve_a_model(
    built_binaries: Callable[[str], Path], image: pm.Image
) -> None:
    phases = demo.Phases()
    bed = Testbed(spokes=2)
    passed = False
    try:
        bed.start()
        phases.done("hub + 2 managed clusters up")
        demo.install_chart(bed, c.AGENT_NAMESPACE)
        # The manager first: it writes the add-on's AddOnDeploymentConfig, without which OCM
        # deploys no agent.
        manager, manager_metrics = _run_manager(bed, image)
        bed.processes.append(manager.start())
        demo.enable_addon(bed, c.AGENT_NAMESPACE)
        phases.done("chart installed, manager started, add-on enabled (OCM deployed the agents)")
        spoke, other = bed.spokes
        # The agent's Deployment carries the manager's seal verify key once the manager has
        # published it in the AddOnDeploymentConfig and OCM has rendered it (_run_agent waits).
        agent, agent_metrics = _run_agent(bed, spoke, image)
        bed.processes.append(agent.start())
        phases.done(f"manager and {spoke.name}'s agent started from {image.ref}")

        hub = bed.hub
        hub.kubectl("label", "managedcluster", spoke.name, f"{SELECTED}=yes", "--overwrite")
        bed.bind_clusterset(NS)
        hub.apply_objects([_placement(SELECTED)])
        for name in EXAMPLES:
            hub.kubectl("apply", "-n", NS, "-f", str(demo.REPO / "examples" / name))
        kserve_step = demo.start_kserve_when_stack_ready(bed)
        expected = {
            "ModelServing/kserve": {spoke.name: "Available"},
            "StorageConnection/demo-s3": {spoke.name: "Delivered"},
            "MultiClusterInferenceService/sklearn-iris": {spoke.name: "Ready"},
        }
        deadline = time.monotonic() + 600
        state: dict[str, dict[str, str]] = {}
        while state != expected:
            bed.check_processes()  # a container that exits fails the test at once
            kserve_step()
            state = _hub_state(hub)
            assert time.monotonic() < deadline, f"hub status after 600 s: {state}"
            time.sleep(0.5)  # poll interval of this wait for the hub status, not a fixed wait
        phases.done(f"hub: KServe Available, credentials Delivered, model Ready on {spoke.name}")

        # The containerised agent installed the stack and unsealed the credentials there ...
        platforms = _json(spoke, "get", "servingplatforms")["items"]
        assert [p["status"]["phase"] for p in platforms] == ["Available"]
        secret = _json(spoke, "get", "secret", "storage-config", "-n", "models")
        entries = [json.loads(base64.b64decode(v)) for v in secret["data"].values()]
        assert any(e.get("secret_access_key") == "demo-secret-key-not-real" for e in entries)
        # ... and nothing reached the cluster outside the Placement.
        assert _json(other, "get", "servingplatforms")["items"] == []

        # Both ran from this image, as its non-root user, under their Deployments' identities.
        for container in (manager, agent):
            info = container.inspect()
            assert info["State"]["Running"], info["State"]
            assert info["Image"] == image.id, (info["Image"], image.id)
            assert info["Config"]["User"] == str(image.uid), info["Config"]["User"]
        expected_users = {
            bed.hub.identities["manager"]: f"system:serviceaccount:{demo.RELEASE_NAMESPACE}:"
            f"{chart.MANAGER_SERVICE_ACCOUNT}",
            spoke.identities["model-serving-agent"]: f"system:serviceaccount:"
            f"{c.AGENT_NAMESPACE}:{chart.AGENT_SERVICE_ACCOUNT}",
        }
        for kubeconfig, username in expected_users.items():
            who = identities.who_am_i(kubeconfig)
            assert who["username"] == username, who
            assert "system:masters" not in who.get("groups", []), who
        # The manager elected itself under its pod name, as in its Deployment.
        lease = _json(hub, "get", "lease", "model-serving-addon-manager",
                      "-n", demo.RELEASE_NAMESPACE)
        assert lease["spec"]["holderIdentity"] == manager.container
        # What the Deployments' liveness probes ask.
        assert _metrics(manager_metrics)
        assert _metrics(agent_metrics)
        print("\n" + demo.render_table(demo.rows(hub)))
        print("phases:\n" + phases.summary())
        passed = True
    finally:
        bed.stop()
        if passed:
            bed.cleanup()
        else:
            print(f"logs kept in {bed.log_dir}")
