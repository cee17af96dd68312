"""The testbed is real: OCM work, placement and registration on real control planes."""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed import reading
from testbed.cluster import KubectlError
from testbed.fleet import Testbed
from testbed.support.waiting import eventually

WORK_API = ("work.open-cluster-management.io", "v1", "manifestworks")


def _get_json(cluster: Any, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def _manifestwork(name: str, namespace_on_spoke: str) -> dict[str, Any]:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "smoke", "namespace": namespace_on_spoke},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "smoke"}},
            "template": {
                "metadata": {"labels": {"app": "smoke"}},
                "spec": {"containers": [{"name": "c", "image": "example.invalid/smoke:1"}]},
            },
        },
    }
    return {
        "apiVersion": "work.open-cluster-management.io/v1",
        "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": "cluster1"},
        "spec": {
            "workload": {
                "manifests": [
                    {
                        "apiVersion": "v1",
                        "kind": "Namespace",
                        "metadata": {"name": namespace_on_spoke},
                    },
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": "smoke", "namespace": namespace_on_spoke},
                        "data": {"hello": "spoke"},
                    },
                    deployment,
                ]
            },
            "manifestConfigs": [
                {
                    "resourceIdentifier": {
                        "group": "apps",
                        "resource": "deployments",
                        "name": "smoke",
                        "namespace": namespace_on_spoke,
                    },
                    "feedbackRules": [
                        {
                            "type": "JSONPaths",
                            "jsonPaths": [
                                {"name": "readyReplicas", "path": ".status.readyReplicas"}
                            ],
                        }
                    ],
                }
            ],
        },
    }


def test_manifestwork_reaches_spoke_and_feeds_back(testbed: Testbed) -> None:
    hub, spoke1 = testbed.hub, testbed.spokes[0]
    ns = f"smoke-{uuid.uuid4().hex[:6]}"
    work = _manifestwork(f"smoke-{ns}", ns)
    hub.apply_objects([work])

    cm = eventually(lambda: _get_json(spoke1, "configmap", "smoke", "-n", ns), timeout=60)
    assert cm["data"] == {"hello": "spoke"}

    def available() -> bool:
        dep = _get_json(spoke1, "deployment", "smoke", "-n", ns)
        conds = {c["type"]: c["status"] for c in dep.get("status", {}).get("conditions", [])}
        return conds.get("Available") == "True" and dep["status"].get("readyReplicas") == 1

    eventually(available, timeout=90)
    pod = _get_json(spoke1, "pods", "-n", ns, "-l", "app=smoke")["items"][0]
    assert pod["spec"]["nodeName"] == "cluster1-node-0"  # placed by the real scheduler
    assert pod["status"]["phase"] == "Running"  # made Running by kwok

    def fed_back() -> int | None:
        mw = _get_json(hub, "manifestwork", work["metadata"]["name"], "-n", "cluster1")
        for m in mw.get("status", {}).get("resourceStatus", {}).get("manifests", []):
            if m["resourceMeta"]["kind"] == "Deployment":
                for v in m.get("statusFeedback", {}).get("values", []):
                    if v["name"] == "readyReplicas":
                        return int(v["fieldValue"]["integer"])
        return None

    assert eventually(fed_back, timeout=60) == 1

    # Deleting the ManifestWork removes what it applied on the spoke.
    hub.kubectl("delete", "manifestwork", work["metadata"]["name"], "-n", "cluster1")
    eventually(
        lambda: (
            spoke1.kubectl("get", "namespace", ns, check=False).returncode != 0
            or _get_json(spoke1, "namespace", ns)["status"].get("phase") == "Terminating"
        ),
        timeout=60,
    )
    eventually(
        lambda: spoke1.kubectl("get", "configmap", "smoke", "-n", ns, check=False).returncode != 0,
        timeout=60,
    )


def _decided_clusters(hub: Any, namespace: str, placement: str) -> set[str]:
    decisions = _get_json(
        hub,
        "placementdecisions",
        "-n",
        namespace,
        "-l",
        f"cluster.open-cluster-management.io/placement={placement}",
    )["items"]
    return {d["clusterName"] for pd in decisions for d in pd.get("status", {}).get("decisions", [])}


def test_placement_selects_spokes_and_follows_labels(testbed: Testbed, hub_namespace: str) -> None:
    hub = testbed.hub
    label = f"smoke-{uuid.uuid4().hex[:6]}"
    for spoke in testbed.spokes:
        hub.kubectl("label", "managedcluster", spoke.name, f"{label}=yes")
    try:
        hub.apply_objects(
            [
                {
                    "apiVersion": "cluster.open-cluster-management.io/v1beta1",
                    "kind": "Placement",
                    "metadata": {"name": "smoke", "namespace": hub_namespace},
                    "spec": {
                        "clusterSets": ["default"],
                        "predicates": [
                            {
                                "requiredClusterSelector": {
                                    "labelSelector": {"matchLabels": {label: "yes"}}
                                }
                            }
                        ],
                    },
                }
            ]
        )
        names = {s.name for s in testbed.spokes}
        eventually(lambda: _decided_clusters(hub, hub_namespace, "smoke") == names, timeout=60)

        hub.kubectl("label", "managedcluster", "cluster2", f"{label}=no", "--overwrite")
        eventually(
            lambda: _decided_clusters(hub, hub_namespace, "smoke") == {"cluster1"}, timeout=60
        )
    finally:
        for spoke in testbed.spokes:
            hub.kubectl("label", "managedcluster", spoke.name, f"{label}-", check=False)


def test_work_manager_fans_out_a_manifestworkreplicaset(
    testbed: Testbed, hub_namespace: str
) -> None:
    hub = testbed.hub
    proc = testbed.ensure_hub_controller("work-manager")
    assert testbed.ensure_hub_controller("work-manager") is proc  # idempotent
    name = f"mwrs-{uuid.uuid4().hex[:6]}"
    hub.apply_objects(
        [
            {
                "apiVersion": "cluster.open-cluster-management.io/v1beta1",
                "kind": "Placement",
                "metadata": {"name": "all", "namespace": hub_namespace},
                "spec": {"clusterSets": ["default"]},
            },
            {
                "apiVersion": "work.open-cluster-management.io/v1alpha1",
                "kind": "ManifestWorkReplicaSet",
                "metadata": {"name": name, "namespace": hub_namespace},
                "spec": {
                    "placementRefs": [{"name": "all", "rolloutStrategy": {"type": "All"}}],
                    "manifestWorkTemplate": {
                        "workload": {
                            "manifests": [
                                {
                                    "apiVersion": "v1",
                                    "kind": "ConfigMap",
                                    "metadata": {"name": name, "namespace": "default"},
                                    "data": {"k": "v"},
                                }
                            ]
                        }
                    },
                },
            },
        ]
    )
    for spoke in testbed.spokes:
        eventually(
            lambda s=spoke: (
                s.kubectl(  # type: ignore[misc]
                    "get", "configmap", name, "-n", "default", check=False
                ).returncode
                == 0
            ),
            timeout=60,
        )
    hub.kubectl("delete", "manifestworkreplicaset", name, "-n", hub_namespace)
    for spoke in testbed.spokes:
        eventually(
            lambda s=spoke: (
                s.kubectl(  # type: ignore[misc]
                    "get", "configmap", name, "-n", "default", check=False
                ).returncode
                != 0
            ),
            timeout=60,
        )
    proc.check()


def test_fake_nodes_renew_their_leases(testbed: Testbed) -> None:
    # Without renewed Leases the controller-manager marks the node NotReady after its grace
    # period and every pod on it loses Ready.
    for spoke in testbed.spokes:
        node = f"{spoke.name}-node-0"

        def renew_time(s: Any = spoke, n: str = node) -> str:
            return str(_get_json(s, "lease", n, "-n", "kube-node-lease")["spec"]["renewTime"])

        first = eventually(renew_time, timeout=30)
        eventually(lambda f=first, r=renew_time: r() != f, timeout=40)  # type: ignore[misc]
        ready = _get_json(spoke, "node", node)["status"]["conditions"]
        assert {c["type"]: c["status"] for c in ready}["Ready"] == "True"


def test_in_process_get_answers_as_kubectl_does(testbed: Testbed, hub_namespace: str) -> None:
    """``Cluster.kubectl("get", ..., "-o", "json")`` is answered in process
    (testbed.reading); the real kubectl must agree on every form the tests use.

    Each query reads what nothing else changes meanwhile: the two reads follow each other,
    and an earlier test's namespace may still be going away (its Placements with it).
    """
    hub = testbed.hub
    hub.apply_objects([{"apiVersion": "cluster.open-cluster-management.io/v1beta1",
                        "kind": "Placement",
                        "metadata": {"name": "reading", "namespace": hub_namespace},
                        "spec": {"clusterSets": ["default"]}}])
    queries = [
        ("namespace", "kube-system"),
        ("managedclusters",),
        # served in v1beta1 only, not the preferred v1
        ("placements", "-n", hub_namespace),
        ("managedcluster", "cluster1"),
        ("configmaps", "-A", "-l", "no-such-label=x"),
        ("clusterrolebindings,clusterroles", "-l", "kubernetes.io/bootstrapping=rbac-defaults"),
        ("lease", "-n", "kube-system"),
        ("crd/managedclusters.cluster.open-cluster-management.io",),
    ]
    for query in queries:
        mine = hub.kubectl("get", *query, "-o", "json")
        theirs = subprocess.run(
            ["kubectl", f"--kubeconfig={hub.kubeconfig}", "get", *query, "-o", "json"],
            capture_output=True, text=True, check=True,
        )
        ours, real = json.loads(mine.stdout), json.loads(theirs.stdout)
        if real.get("kind") == "List":
            assert [(i["kind"], i["metadata"]["name"]) for i in ours["items"]] == [
                (i["kind"], i["metadata"]["name"]) for i in real["items"]
            ], query
        else:
            assert ours["metadata"]["uid"] == real["metadata"]["uid"], query
    for query in [("managedcluster", "no-such-cluster"), ("no-such-kind",)]:
        mine = hub.kubectl("get", *query, "-o", "json", check=False)
        theirs = subprocess.run(
            ["kubectl", f"--kubeconfig={hub.kubeconfig}", "get", *query, "-o", "json"],
            capture_output=True, text=True,
        )
        assert (mine.returncode != 0) == (theirs.returncode != 0), query
        assert ("NotFound" in mine.stderr) == ("NotFound" in theirs.stderr), query


def test_in_process_apply_is_kubectls_server_side_apply(
        testbed: Testbed, hub_namespace: str, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """``Cluster.apply_objects`` sends kubectl's server-side apply requests itself
    (testbed.reading): the field manager ``testbed`` takes fields another manager set, a
    cluster-scoped object of a named group applies as a namespaced core one does, and a
    refusal is kubectl's error, naming the field."""
    hub = testbed.hub
    config = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "applied", "namespace": hub_namespace}, "data": {"a": "1"}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": f"applied-{hub_namespace}"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}
    try:
        with monkeypatch.context() as no_kubectl:
            no_kubectl.setattr(subprocess, "run", _no_process)
            hub.apply_objects([config, role])
        hub.kubectl("patch", "configmap", "applied", "-n", hub_namespace, "--type=merge",
                    "-p", '{"data":{"a":"2"}}')
        with monkeypatch.context() as no_kubectl:
            no_kubectl.setattr(subprocess, "run", _no_process)
            hub.apply_objects([config])  # forced: the patched field is taken back
        got = _get_json(hub, "configmap", "applied", "-n", hub_namespace)
        assert got["data"] == {"a": "1"}
        assert ("testbed", "Apply") in {
            (m["manager"], m["operation"]) for m in got["metadata"]["managedFields"]}
        assert _get_json(hub, "clusterrole", role["metadata"]["name"])["rules"] == role["rules"]
        # a file of several objects, as the fleets' CRDs are applied
        applied = tmp_path / "applied.yaml"
        applied.write_text(yaml.safe_dump_all([
            {**config, "data": {"a": "3"}},
            {**config, "metadata": {**config["metadata"], "name": "applied-2"}}]))
        with monkeypatch.context() as no_kubectl:
            no_kubectl.setattr(subprocess, "run", _no_process)
            hub.apply_files([applied])
        assert _get_json(hub, "configmap", "applied", "-n", hub_namespace)["data"] == {"a": "3"}
        assert _get_json(hub, "configmap", "applied-2", "-n", hub_namespace)["data"] == {"a": "1"}
        with pytest.raises(KubectlError) as refused:
            hub.apply_objects([{**config, "metadata": {**config["metadata"], "name": "bad"},
                                "spec": {"x": 1}}])
        assert ".spec: field not declared in schema" in refused.value.stderr
        assert hub.kubectl("get", "configmap", "bad", "-n", hub_namespace,
                           check=False).returncode != 0
    finally:
        hub.kubectl("delete", "clusterrole", role["metadata"]["name"], "--ignore-not-found")


def test_a_crd_waited_for_is_served_at_once(
        testbed: Testbed, monkeypatch: pytest.MonkeyPatch) -> None:
    """``wait_crds_established`` reads names and discovery, not the megabytes of every CRD:
    it waits for a CRD created a moment ago, and once it returns the CRD is Established and
    kubectl (its own discovery) lists its objects; a CRD that does not exist is waited for
    until the timeout names it."""
    hub = testbed.hub
    group = "smoke.testbed.local"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"gadgets.{group}"},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    try:
        hub.apply_objects([crd])
        reader = hub.reader()
        asked: list[tuple[str, str]] = []
        request = reader.request

        def recorded(path: str, timeout: float, *args: Any, **kwargs: Any) -> Any:
            asked.append((path, kwargs.get("accept", "application/json")))
            return request(path, timeout, *args, **kwargs)

        with monkeypatch.context() as no_kubectl:
            no_kubectl.setattr(subprocess, "run", _no_process)
            no_kubectl.setattr(reader, "request", recorded)
            hub.wait_crds_established(f"gadgets.{group}")
            with pytest.raises(TimeoutError, match=f"absent.{group}"):
                hub.wait_crds_established(f"absent.{group}", timeout=1)
        crd_lists = {accept for path, accept in asked
                     if path.endswith("/customresourcedefinitions")}
        assert crd_lists == {reading.METADATA_LIST}, asked  # never the whole CRDs
        assert hub._crds_not_established_by_condition((f"gadgets.{group}",)) == []
        assert hub.kubectl("get", f"gadgets.{group}", "-A").returncode == 0
    finally:
        hub.kubectl("delete", "crd", f"gadgets.{group}", "--ignore-not-found", "--wait=false")


def test_in_process_token_and_readiness_are_kubectls(
        testbed: Testbed, hub_namespace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ServiceAccount token (``kubectl create token --duration``) and the API server's
    readiness (``kubectl get --raw=/readyz``) are asked for in process: the token
    authenticates as the account and lives as long as asked."""
    hub = testbed.hub
    hub.apply_objects([{"apiVersion": "v1", "kind": "ServiceAccount",
                        "metadata": {"name": "tokened", "namespace": hub_namespace}}])
    with monkeypatch.context() as no_kubectl:
        no_kubectl.setattr(subprocess, "run", _no_process)
        token = hub.create_token("tokened", hub_namespace, "10m")
        assert hub.ready()
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["exp"] - claims["iat"] == 600, claims
    review = json.loads(subprocess.run(
        ["kubectl", "--kubeconfig=/dev/null", f"--server={hub.server}",
         f"--certificate-authority={testbed.ca.pair.cert}", f"--token={token}",
         "auth", "whoami", "-o", "json"], capture_output=True, text=True, check=True).stdout)
    assert review["status"]["userInfo"]["username"] == (
        f"system:serviceaccount:{hub_namespace}:tokened")


def _no_process(*args: object, **kwargs: object) -> None:
    raise AssertionError(f"a process was started: {args}")
