"""Admission of the generated CRDs by a real kube-apiserver.

The CRDs in crds/ go to the hub (all of them) and to the first spoke (the spoke kinds);
then every case of tests/data/admission_cases.yaml is submitted: bad objects must be
rejected with a message naming the field, good ones accepted. Printer columns, the
status subresource and the examples are checked too.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Protocol

import pytest
import yaml
from kubernetes import client

from addon_api import constants as c
from addon_api.crdgen import RESOURCES
from testbed.support.waiting import eventually

pytestmark = pytest.mark.testbed

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"
EXAMPLES = ROOT / "examples"
CASES: dict[str, Any] = yaml.safe_load(
    (ROOT / "tests" / "data" / "admission_cases.yaml").read_text()
)

SCOPE = {cls.model_fields["kind"].default: cls.crd.scope for cls in RESOURCES}
PLURAL = {cls.model_fields["kind"].default: cls.crd.plural for cls in RESOURCES}
SPOKE_KINDS = set(c.SPOKE_KINDS)


class Cluster(Protocol):
    name: str

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]: ...

    def api_client(self) -> client.ApiClient: ...


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def bad_object(case: dict[str, Any]) -> dict[str, Any]:
    obj: dict[str, Any] = merge_patch(CASES["good"][case["base"]], case["patch"])
    return obj


def crd_name(kind: str) -> str:
    return f"{PLURAL[kind]}.{c.GROUP}"


@pytest.fixture(scope="module")
def clusters(testbed: Any) -> dict[str, Cluster]:
    """Hub and first spoke with the CRDs installed and Established."""
    hub, spoke = testbed.hub, testbed.spokes[0]
    hub.kubectl("apply", "--server-side", "--force-conflicts", "-f", f"{CRDS}/")
    for kind in sorted(SPOKE_KINDS):
        crd_file = CRDS / f"{crd_name(kind)}.yaml"
        spoke.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd_file))
    hub.wait_crds_established(*(crd_name(kind) for kind in PLURAL), timeout=60)
    spoke.wait_crds_established(*(crd_name(kind) for kind in sorted(SPOKE_KINDS)), timeout=60)
    return {"hub": hub, "spoke": spoke}


def target(clusters: dict[str, Cluster], kind: str, hub_ns: str) -> tuple[Cluster, list[str]]:
    """Where objects of ``kind`` go: the cluster, and the -n argument if namespaced."""
    if kind in SPOKE_KINDS:
        cluster = clusters["spoke"]
        return cluster, (["-n", "default"] if SCOPE[kind] == "Namespaced" else [])
    return clusters["hub"], ["-n", hub_ns]


def submit(
    cluster: Cluster, obj: dict[str, Any], ns_args: list[str], *, dry_run: bool
) -> subprocess.CompletedProcess[str]:
    args = ["create", *ns_args, "-f", "-", "-o", "json"]
    if dry_run:
        args.append("--dry-run=server")
    return cluster.kubectl(*args, input=yaml.safe_dump(obj), check=False)


# Bad and good objects ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES["bad"], ids=[case["id"] for case in CASES["bad"]])
def test_bad_object_is_rejected(clusters: dict[str, Cluster], case: dict[str, Any]) -> None:
    obj = bad_object(case)
    # Server-side dry run: validated exactly like a real create, nothing is stored.
    cluster, ns_args = target(clusters, obj["kind"], "default")
    result = submit(cluster, obj, ns_args, dry_run=True)
    assert result.returncode != 0, f"{case['id']} was accepted:\n{result.stdout}"
    assert case["error"] in result.stderr, (
        f"expected {case['error']!r} in the API server's message:\n{result.stderr}"
    )
    if "rule" in case:
        assert case["rule"] in result.stderr


@pytest.mark.parametrize("good_id", sorted(CASES["good"]))
def test_good_object_is_accepted(
    clusters: dict[str, Cluster], hub_namespace: str, good_id: str
) -> None:
    obj = CASES["good"][good_id]
    cluster, ns_args = target(clusters, obj["kind"], hub_namespace)
    result = submit(cluster, obj, ns_args, dry_run=False)
    try:
        assert result.returncode == 0, result.stderr
        stored = json.loads(result.stdout)
        # Nothing the test sent was pruned (every field is in the schema).
        assert merge_patch(stored["spec"], obj["spec"]) == stored["spec"]
    finally:
        if obj["kind"] in SPOKE_KINDS:
            cluster.kubectl(
                "delete",
                *ns_args,
                crd_name(obj["kind"]),
                obj["metadata"]["name"],
                "--ignore-not-found",
                "--wait=false",
                check=False,
            )


def test_defaults_are_applied(clusters: dict[str, Cluster], hub_namespace: str) -> None:
    obj = CASES["good"]["msv-minimal"]
    result = submit(clusters["hub"], obj, ["-n", hub_namespace], dry_run=False)
    assert result.returncode == 0, result.stderr
    spec = json.loads(result.stdout)["spec"]
    assert spec["platform"] == "KServe"
    assert spec["managementState"] == "Managed"

    obj = merge_patch(obj, {"metadata": {"name": "with-kserve"}, "spec": {"kserve": {}}})
    result = submit(clusters["hub"], obj, ["-n", hub_namespace], dry_run=False)
    assert result.returncode == 0, result.stderr
    kserve = json.loads(result.stdout)["spec"]["kserve"]
    assert kserve == {
        "deploymentMode": "Standard",
        "serviceClusterIPNone": True,
        "builtInRuntimes": True,
    }


# kubectl get -------------------------------------------------------------------------------------


def header(cluster: Cluster, *args: str) -> list[str]:
    out = cluster.kubectl("get", *args).stdout
    return out.splitlines()[0].split()


def test_printer_columns(clusters: dict[str, Cluster], hub_namespace: str) -> None:
    hub = clusters["hub"]
    for good_id in ("msv-kserve", "sconn-pvc", "mcsr", "mcisvc"):
        obj = CASES["good"][good_id]
        assert submit(hub, obj, ["-n", hub_namespace], dry_run=False).returncode == 0

    assert header(hub, "msv", "-n", hub_namespace) == ["NAME", "PLATFORM", "READY", "PHASE", "AGE"]
    assert header(hub, "msv", "-n", hub_namespace, "-o", "wide") == [
        "NAME",
        "PLATFORM",
        "STATE",
        "READY",
        "PHASE",
        "REVISION",
        "ROLLOUT",
        "AGE",
    ]
    assert header(hub, "sconn", "-n", hub_namespace) == ["NAME", "TYPE", "READY", "PHASE", "AGE"]
    assert header(hub, "mcsr", "-n", hub_namespace) == ["NAME", "TARGET", "READY", "PHASE", "AGE"]
    assert header(hub, "mcisvc", "-n", hub_namespace) == [
        "NAME",
        "TARGET",
        "MODE",
        "READY",
        "PHASE",
        "AGE",
    ]
    # The category lists every hub intent.
    names = hub.kubectl("get", c.CATEGORY, "-n", hub_namespace, "-o", "name").stdout.split()
    assert len(names) == 4, names
    # ... and shadows no kind: `kubectl get modelserving` means ModelServings only, also by
    # the name of another kind's object (a category named after the kind listed all four and
    # made `kubectl delete modelserving NAME` reach any intent called NAME).
    names = hub.kubectl("get", "modelserving", "-n", hub_namespace, "-o", "name").stdout.split()
    assert names == ["modelserving.modelserving.opendatahub.io/kserve"], names
    other = hub.kubectl("get", "modelserving", "sklearn-iris", "-n", hub_namespace, "-o", "name",
                        check=False)
    assert other.returncode != 0 and "NotFound" in other.stderr, other

    spoke = clusters["spoke"]
    obj = merge_patch(CASES["good"]["splat"], {"metadata": {"name": f"columns-{hub_namespace}"}})
    assert submit(spoke, obj, [], dry_run=False).returncode == 0
    try:
        assert header(spoke, "splat", obj["metadata"]["name"]) == [
            "NAME",
            "PLATFORM",
            "PHASE",
            "READY",
            "TOTAL",
            "VERSION",
            "AGE",
        ]
    finally:
        spoke.kubectl("delete", "splat", obj["metadata"]["name"], "--wait=false", check=False)
    obj = CASES["good"]["sealedsc"]
    result = submit(spoke, obj, ["-n", "default"], dry_run=False)
    assert result.returncode == 0, result.stderr
    try:
        assert header(spoke, "sealedsc", "-n", "default", obj["metadata"]["name"]) == [
            "NAME",
            "TYPE",
            "ENTRY",
            "PHASE",
            "AGE",
        ]
    finally:
        spoke.kubectl(
            "delete",
            "sealedsc",
            "-n",
            "default",
            obj["metadata"]["name"],
            "--wait=false",
            check=False,
        )


# Status subresource ------------------------------------------------------------------------------


def test_status_subresource(clusters: dict[str, Cluster], hub_namespace: str) -> None:
    hub = clusters["hub"]
    obj = CASES["good"]["msv-kserve"]
    name = obj["metadata"]["name"]
    assert submit(hub, obj, ["-n", hub_namespace], dry_run=False).returncode == 0

    status = {
        "status": {
            "observedGeneration": 1,
            "phase": "Progressing",
            "summary": {
                "desired": 2,
                "ready": 1,
                "progressing": 1,
                "failed": 0,
                "readyText": "1/2",
            },
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "Progressing",
                    "message": "1 of 2 clusters ready",
                    "lastTransitionTime": "2025-01-01T00:00:00Z",
                },
            ],
            "clusters": [
                {
                    "cluster": "cluster2",
                    "phase": "Installing",
                    "ready": False,
                    "waitingFor": ["ServingPlatform Available"],
                },
                {"cluster": "cluster1", "phase": "Available", "ready": True},
            ],
            "clustersOmitted": 0,
        },
        # Ignored by the status subresource.
        "spec": {"platform": "ModelMesh"},
    }
    hub.kubectl(
        "patch",
        "msv",
        name,
        "-n",
        hub_namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )
    got = json.loads(hub.kubectl("get", "msv", name, "-n", hub_namespace, "-o", "json").stdout)
    assert got["status"]["summary"]["readyText"] == "1/2"
    assert got["status"]["clusters"][0]["cluster"] == "cluster2"
    assert got["spec"]["platform"] == "KServe"
    row = hub.kubectl("get", "msv", name, "-n", hub_namespace, "--no-headers").stdout.split()
    assert row[:4] == [name, "KServe", "1/2", "Progressing"]

    # The main resource ignores status.
    hub.kubectl(
        "patch",
        "msv",
        name,
        "-n",
        hub_namespace,
        "--type=merge",
        "-p",
        json.dumps({"status": {"phase": "Ready"}}),
    )
    got = json.loads(hub.kubectl("get", "msv", name, "-n", hub_namespace, "-o", "json").stdout)
    assert got["status"]["phase"] == "Progressing"

    # Status is validated too.
    bad = hub.kubectl(
        "patch",
        "msv",
        name,
        "-n",
        hub_namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"phase": "Exploded"}}),
        check=False,
    )
    assert bad.returncode != 0
    assert 'status.phase: Unsupported value: "Exploded"' in bad.stderr


def test_spoke_status_via_python_client(clusters: dict[str, Cluster]) -> None:
    spoke = clusters["spoke"]
    obj = merge_patch(CASES["good"]["splat"], {"metadata": {"name": "status-client"}})
    api = client.CustomObjectsApi(spoke.api_client())
    api.create_cluster_custom_object(c.GROUP, c.VERSION, "servingplatforms", obj)
    try:
        api.patch_cluster_custom_object_status(
            c.GROUP,
            c.VERSION,
            "servingplatforms",
            "status-client",
            {
                "status": {
                    "phase": "Available",
                    "message": "all components Available",
                    "observedGeneration": 1,
                    "readyComponents": 2,
                    "totalComponents": 2,
                    "stackVersion": "v0.17.0",
                }
            },
        )
        got: Any = api.get_cluster_custom_object(
            c.GROUP, c.VERSION, "servingplatforms", "status-client"
        )
        assert got["status"]["phase"] == "Available"
        assert got["status"]["readyComponents"] == 2
        row = spoke.kubectl("get", "splat", "status-client", "--no-headers").stdout.split()
        assert row[:6] == ["status-client", "KServe", "Available", "2", "2", "v0.17.0"]
    finally:
        api.delete_cluster_custom_object(c.GROUP, c.VERSION, "servingplatforms", "status-client")


# Examples ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_example_is_accepted(clusters: dict[str, Cluster], hub_namespace: str, path: Path) -> None:
    docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert docs, f"{path.name} is empty"
    result = clusters["hub"].kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "-n",
        hub_namespace,
        "-f",
        "-",
        input=yaml.safe_dump_all(docs),
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_example_placement_selects_the_default_cluster_set(
    testbed: Any, clusters: dict[str, Cluster], hub_namespace: str
) -> None:
    """The example Placement selects every cluster of the default ClusterSet (the testbed's)."""
    hub = clusters["hub"]
    hub.kubectl("apply", "-n", hub_namespace, "-f", str(EXAMPLES / "placement.yaml"))

    def decided() -> set[str]:
        out = hub.kubectl(
            "get",
            "placementdecisions",
            "-n",
            hub_namespace,
            "-l",
            "cluster.open-cluster-management.io/placement=default",
            "-o",
            "json",
        ).stdout
        return {
            d["clusterName"]
            for pd in json.loads(out)["items"]
            for d in pd.get("status", {}).get("decisions", [])
        }

    assert eventually(lambda: decided() == {s.name for s in testbed.spokes}, timeout=60)
