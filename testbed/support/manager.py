"""The manager under test.

A manager process on the testbed, hub CRDs and identities, intents, work status as OCM's work
agent writes it, and small hub/spoke helpers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from addon_api import constants as c
from testbed import identities, upstream
from testbed.fleet import Testbed
from testbed.processes import die_with_parent, free_port

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"
HUB_CRDS = [
    p
    for p in sorted(CRDS.glob("*.yaml"))
    if "servingplatforms" not in p.name and "sealedstorage" not in p.name
]
API = "modelserving.opendatahub.io/v1alpha1"


OPEN_TARGETS = "--target-namespaces=*=*"
"""The namespace policy of managers (and agents) in tests that are not about it: any hub
namespace may target any spoke namespace but the always-denied ones, without executors."""
OPEN_STACK_OWNERS = "--stack-owner-namespaces=*"
"""The tests' hub admin lets ModelServings of any namespace own a stack (each test has its
own namespaces); the product's default is the manager's own namespace only."""


class Manager:
    """The manager as a subprocess, its log in a file, its metrics over HTTP.

    Without a ``--target-namespaces`` in ``args`` it runs with :data:`OPEN_TARGETS`, without
    a ``--stack-owner-namespaces`` with :data:`OPEN_STACK_OWNERS`.
    """

    def __init__(self, kubeconfig: Path, log_path: Path, *args: str) -> None:
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        if not any(a.startswith("--target-namespaces") for a in args):
            args = (*args, OPEN_TARGETS)
        if not any(a.startswith("--stack-owner-namespaces") for a in args):
            args = (*args, OPEN_STACK_OWNERS)
        self.args = args
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Manager:
        """Start (or restart) the manager process."""
        self.port = free_port()
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(
            [
                str(ROOT / ".venv/bin/model-serving-addon"),
                "manager",
                f"--kubeconfig={self.kubeconfig}",
                f"--metrics-port={self.port}",
                # where the chart's Role gives it its sealing Secret and ConfigMap
                f"--namespace={identities.MANAGER_NAMESPACE}",
                *self.args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ},
            preexec_fn=die_with_parent,  # no manager outlives a killed test run
        )
        log.close()
        return self

    def kill(self) -> None:
        """SIGKILL the manager (``kill -9``)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> bool:
        """Stop the manager: SIGTERM, then SIGKILL 15 s later.

        True when it had to be killed.
        """
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
                return True
        return False

    def metrics(self) -> dict[str, float]:
        """Every sample of /metrics, keyed by name{labels}."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def total(self, prefix: str) -> float:
        """Sum of the samples whose key starts with ``prefix``."""
        return sum(v for k, v in self.metrics().items() if k.startswith(prefix))

    def writes(self) -> float:
        """API writes the manager made so far."""
        return self.total("model_serving_api_writes_total")

    def reconciles(self) -> float:
        """Intent reconciles the manager finished so far."""
        return self.total("model_serving_reconcile_duration_seconds_count")

    def wait_serving(self, timeout: float = 60.0) -> None:
        """Block until the manager (just started, say) answers on its metrics port.

        Fails when it exited first or does not answer within ``timeout``.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.metrics()
                return
            except OSError as err:  # refused (not listening yet), or a timeout
                if self.proc is None or self.proc.poll() is not None:
                    raise AssertionError(f"the manager is not running:\n{self.tail()}") from err
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"the manager did not serve its metrics within {timeout}s: {err}"
                    ) from err
            time.sleep(0.1)

    def wait_quiet(
        self, window: float = 2.0, timeout: float = 60.0, *, reconciles: bool = True
    ) -> float:
        """Block until the manager has been idle for ``window`` s; return its write count then.

        Idle means no write and, with ``reconciles``, no reconcile. The proof that "nothing
        more will happen" before a test compares write counts: a retry loop or a late status
        write keeps the counters moving and fails this after ``timeout``. ``window`` must be
        longer than the manager's ``--min-interval``.
        """
        def sample() -> tuple[float, float]:
            return self.writes(), self.reconciles() if reconciles else 0.0

        deadline = time.monotonic() + timeout
        self.wait_serving(timeout)
        last, since = sample(), time.monotonic()
        while True:
            time.sleep(0.2)
            now = sample()
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= window:
                return last[0]
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the manager did not settle within {timeout}s (writes, reconciles: {now})"
                )

    def tail(self, lines: int = 80) -> str:
        """The last lines of the manager log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def print_tail(self) -> None:
        """Print the log tail (pytest shows it when the test failed)."""
        print(f"--- manager log tail ({self.log_path}) ---\n{self.tail()}", file=sys.stderr)


WORK = ("work.open-cluster-management.io", "v1", "manifestworks")


def report_work_status(
    api: Any, cluster: str, work: str, meta: dict[str, str], values: dict[str, Any]
) -> None:
    """Write a work's status as OCM's work agent does.

    Applied/Available and feedback values for its first manifest (``meta`` is that manifest's
    resourceMeta).
    """
    from kubernetes import client

    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conds = [
        {"type": t, "status": "True", "reason": f"{t}Complete", "message": "reported",
         "lastTransitionTime": now}
        for t in ("Applied", "Available")
    ]
    feedback = [{"name": k, "fieldValue": _field_value(v)} for k, v in values.items()]
    status = {
        "conditions": conds,
        "resourceStatus": {
            "manifests": [
                {
                    "resourceMeta": {"ordinal": 0, **meta},
                    "statusFeedback": {"values": feedback},
                    "conditions": conds,
                }
            ]
        },
    }
    client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        *WORK[:2], cluster, WORK[2], work, {"status": status}
    )


def _field_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"type": "Boolean", "boolean": value}
    if isinstance(value, int):
        return {"type": "Integer", "integer": value}
    return {"type": "String", "string": str(value)}


def get_json(cluster: Any, *args: str) -> Any:
    """``kubectl get ... -o json`` as a dict."""
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def exists(cluster: Any, *args: str) -> bool:
    """Whether ``kubectl get`` finds the object."""
    return bool(cluster.kubectl("get", *args, "-o", "json", check=False).returncode == 0)


def prepare(testbed: Testbed) -> None:
    """Install the add-on's hub CRDs, and on each spoke what a running manager's work needs.

    On each spoke: what the chart's AddOnTemplate deploys (the add-on's CRDs, the agent's
    identity and the work agent's aggregated role), KServe's CRDs and the ``models`` namespace.
    """
    testbed.hub.apply_files(HUB_CRDS)
    testbed.hub.wait_crds_established()
    for spoke in testbed.spokes:
        if "model-serving-agent" not in spoke.identities:
            spoke.identities["model-serving-agent"] = identities.addon_agent_kubeconfig(
                spoke, c.AGENT_NAMESPACE
            )
        spoke.apply_files(upstream.kserve_crds())
        spoke.apply_objects(
            [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "models"}}]
        )
        spoke.wait_crds_established()


_IDENTITY: dict[str, Path] = {}


def manager_identity(testbed: Testbed) -> Path:
    """A hub kubeconfig for the chart's manager ServiceAccount, with exactly the chart's RBAC.

    Every manager integration test runs the manager under this identity, so they fail when
    the chart's ClusterRole lacks something the manager does.
    """
    hub = testbed.hub
    key = str(hub.kubeconfig)  # one per testbed: several can run in one session
    if key not in _IDENTITY:
        path = identities.manager_kubeconfig(hub)
        # It really is the restricted identity, not an admin one.
        can = subprocess.run(
            ["kubectl", f"--kubeconfig={path}", "auth", "can-i", "delete", "secrets", "-A"],
            capture_output=True,
            text=True,
        )
        assert can.stdout.strip() == "no", can.stdout + can.stderr
        _IDENTITY[key] = path
    return _IDENTITY[key]


def chart_deployment_command(hub: Any, namespace: str, kubeconfig_path: Path
                             ) -> tuple[Path, list[str]]:
    """How the installed chart's manager Deployment in ``namespace`` would run it.

    A kubeconfig with a token of the Deployment's ServiceAccount (written to
    ``kubeconfig_path``) and the container's arguments (``manager`` first), without its
    metrics port: the testbed has no kubelet for the hub's pods, and the caller picks a free
    port on this machine.
    """
    deployment = get_json(hub, "deployment", "model-serving-addon-manager", "-n", namespace)
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"][0] == "manager", container["args"]
    kubeconfig = identities.token_kubeconfig(hub, namespace, pod["serviceAccountName"],
                                             kubeconfig_path)
    return kubeconfig, [a for a in container["args"] if not a.startswith("--metrics-port")]


@contextmanager
def running_manager(testbed: Testbed, log_dir: Path, *args: str) -> Iterator[Manager]:
    """The add-on CRDs installed and one manager (as the chart's ServiceAccount) running."""
    prepare(testbed)
    mgr = Manager(manager_identity(testbed), log_dir / "manager.log", *args).start()
    try:
        yield mgr
    finally:
        mgr.stop()
        mgr.print_tail()


def works(hub: Any, owner_ns: str, owner_name: str, kind: str) -> dict[str, Any]:
    """The manager's works of one intent, by cluster namespace."""
    items = get_json(
        hub,
        "manifestworks",
        "-A",
        "-l",
        f"modelserving.opendatahub.io/intent-kind={kind},"
        f"modelserving.opendatahub.io/intent-namespace={owner_ns},"
        f"modelserving.opendatahub.io/intent-name={owner_name}",
    )["items"]
    return {w["metadata"]["namespace"]: w for w in items}


def placement(name: str, namespace: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Placement over the default cluster set (optionally by cluster labels)."""
    spec: dict[str, Any] = {"clusterSets": ["default"]}
    if labels:
        spec["predicates"] = [
            {"requiredClusterSelector": {"labelSelector": {"matchLabels": labels}}}
        ]
    return {
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def intent(
    kind: str, name: str, namespace: str, placement_name: str, **spec: Any
) -> dict[str, Any]:
    """An intent of ``kind`` on Placement ``placement_name``; ``spec`` holds its other fields."""
    return {
        "apiVersion": API,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"placementRef": {"name": placement_name}, **spec},
    }


def model_serving(name: str, namespace: str, placement_name: str, **spec: Any) -> dict[str, Any]:
    """A ModelServing (KServe by default)."""
    return intent("ModelServing", name, namespace, placement_name, **{"platform": "KServe", **spec})


SKLEARN_MODEL = {
    "modelFormat": {"name": "sklearn"},
    "runtime": "kserve-sklearnserver",
    "storageUri": "s3://models/sklearn/iris",
    "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
}


def inference_service(
    name: str, namespace: str, placement_name: str, replicas: int = 1, **spec: Any
) -> dict[str, Any]:
    """A MultiClusterInferenceService of an sklearn model in ``models``.

    ``replicas`` is what a change changes, ``spec`` adds fields (e.g. ``overrides``).
    """
    return intent(
        "MultiClusterInferenceService", name, namespace, placement_name,
        **{
            "targetNamespace": "models",
            "deploymentMode": "Standard",
            "template": {"predictor": {"minReplicas": replicas, "model": SKLEARN_MODEL}},
            **spec,
        },
    )


def set_platform_phase(spoke: Any, phase: str, *, components: bool = True) -> None:
    """Write the spoke ServingPlatform's status as the agent would.

    ``components`` adds one ready component of one.
    """
    status: dict[str, Any] = {"phase": phase}
    if components:
        status |= {"readyComponents": 1, "totalComponents": 1}
    spoke.kubectl(
        "patch",
        "servingplatform",
        "model-serving",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


def differences(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Where ``actual`` differs from ``expected``.

    Fields the API server defaulted (keys present only in ``actual``) are ignored.
    """
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: list[str] = []
        for key, value in expected.items():
            if key not in actual:
                out.append(f"{path}.{key}: missing")
            else:
                out.extend(differences(value, actual[key], f"{path}.{key}"))
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{path}: {len(actual)} items, expected {len(expected)}"]
        return [
            d
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for d in differences(e, a, f"{path}[{i}]")
        ]
    return [] if expected == actual else [f"{path}: {actual!r} != {expected!r}"]


def verify_key(hub: Any, namespace: str = identities.MANAGER_NAMESPACE) -> str:
    """The manager's seal verify key, read (as the harness, a hub admin) from its keys Secret.

    A manager run without the chart has no AddOnDeploymentConfig to publish it in; the agents
    of such tests get it from here (``--seal-verify-key``).
    """
    import base64

    from addon_manager.shell import sealkeys
    from testbed.support.waiting import eventually

    def read() -> str:
        secret = get_json(hub, "secret", sealkeys.KEYS_SECRET, "-n", namespace)
        data = {k: str(v) for k, v in secret["data"].items()}
        seed = base64.b64decode(data[sealkeys.SIGNING_KEY])
        from addon_api import sealing

        return sealing.verify_key_of(seed)

    return str(eventually(read, timeout=60))


def approve_agent_key(
    hub: Any, cluster: str, key_id: str, namespace: str = identities.MANAGER_NAMESPACE
) -> None:
    """Approve agent key ``key_id`` for ``cluster`` as a hub admin does (docs/user-guide.md)."""
    from addon_manager.shell import sealkeys

    data = {f"{sealkeys.APPROVE_PREFIX}{cluster}": key_id}
    if exists(hub, "configmap", sealkeys.STATE_CONFIGMAP, "-n", namespace):
        hub.kubectl("patch", "configmap", sealkeys.STATE_CONFIGMAP, "-n", namespace,
                    "--type=merge", "-p", json.dumps({"data": data}))
    else:
        hub.apply_objects([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": sealkeys.STATE_CONFIGMAP, "namespace": namespace}, "data": data}])
