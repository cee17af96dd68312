"""The agent under test: rendered bundles, an agent process per spoke, ServingPlatform helpers.

The pytest fixtures on top of these (``bundles``, ``spoke``, ``agent``) are in
``tests/conftest.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from addon_agent import bundle_render
from addon_api import constants as c
from addon_api import sealing
from testbed import build, identities
from testbed.paths import cache_dir
from testbed.processes import die_with_parent, free_port
from testbed.support.waiting import eventually

MANAGED = f"{c.LABEL_MANAGED_BY}={c.FIELD_MANAGER}"
SP_API = f"{c.GROUP}/{c.VERSION}"
# Kinds scanned for leftovers after an uninstall.
SCANNED_KINDS = (
    "customresourcedefinitions",
    "namespaces",
    "clusterroles",
    "clusterrolebindings",
    "validatingwebhookconfigurations",
    "mutatingwebhookconfigurations",
    "deployments,services,configmaps,secrets,serviceaccounts,roles,rolebindings,"
    "networkpolicies,horizontalpodautoscalers",
)


def bundle_cache() -> Path:
    """Where rendered bundles are cached, shared across runs and checkouts."""
    return cache_dir() / "bundles"


def rendered_bundles() -> Path:
    """Root of the rendered bundles of every stack, rendered once per way of rendering.

    Keyed by :func:`addon_agent.bundle_render.render_key`: a change to the renderer or the
    stack pins renders afresh instead of reusing bundles rendered the old way.
    """
    return bundle_render.render_cached(bundle_cache())


TEST_SIGNING_KEY = sealing.generate_signing_key()
"""The manager signing key of tests that seal payloads themselves (agents without a manager
get its verify key, as a real agent gets the manager's through the add-on's configuration)."""


def seal_for(
    spoke: Any, public_key: str, namespace: str, name: str, spec: dict[str, Any],
    payload: dict[str, Any], *, sequence: int | None = None,
    signing_key: bytes = TEST_SIGNING_KEY,
) -> str:
    """A payload sealed for SealedStorageConnection ``namespace/name`` with ``spec`` on ``spoke``.

    Signed with :data:`TEST_SIGNING_KEY` (the key agents of :func:`running_agent` verify with);
    the sequence defaults to the clock, so a later seal of the same object is newer.
    """
    binding = sealing.Binding(
        spoke.name, namespace, name, tuple(spec["targetNamespaces"]), spec["entryName"],
        spec["type"],
    )
    seq = time.time_ns() // 1000 if sequence is None else sequence
    return sealing.seal(public_key, binding, seq, payload, signing_key)


class AgentProcess:
    """``model-serving-addon agent`` against one spoke, logging to a file."""

    def __init__(
        self,
        kubeconfig: Path,
        bundles: Path,
        log_path: Path,
        resync: float = 4.0,
        env: dict[str, str] | None = None,
        cluster_name: str = "cluster1",
        verify_keys: tuple[str, ...] = (sealing.verify_key_of(TEST_SIGNING_KEY),),
    ) -> None:
        self.cluster_name = cluster_name
        self.verify_keys = verify_keys
        self.env = {**os.environ, **build.agent_runtime_env(), **(env or {})}
        self.kubeconfig = kubeconfig
        self.bundles = bundles
        self.log_path = log_path
        self.resync = resync
        self.metrics_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the agent."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "model-serving-addon"),
                "agent",
                f"--kubeconfig={self.kubeconfig}",
                f"--bundle-dir={self.bundles}",
                f"--cache-dir={self.log_path.parent / 'agent-cache'}",
                f"--metrics-port={self.metrics_port}",
                "--metrics-address=127.0.0.1",
                f"--resync-seconds={self.resync}",
                "--lease-seconds=2",
                f"--cluster-name={self.cluster_name}",
                f"--seal-verify-key={','.join(self.verify_keys)}",
                "--target-namespaces=*=*",  # tests here are not about the namespace policy
                "--allow-dev-flags",  # nor about devFlags (their own bundles are devFlags)
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            preexec_fn=die_with_parent,  # no agent outlives a killed test run
        )
        log.close()

    def stop(self) -> None:
        """Stop the agent (SIGTERM, then SIGKILL)."""
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL the agent at once (fault injection); ``start`` runs it again."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self.proc = None

    def restart(self) -> None:
        """Stop and start again."""
        self.stop()
        self.start()

    def tail(self, lines: int = 80) -> str:
        """Last lines of the agent log."""
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def metrics(self) -> str:
        """Text of /metrics."""
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as r:
            text: str = r.read().decode()
            return text


AGENT_IDENTITY = "model-serving-agent"
"""Key of the agent's kubeconfig in ``Cluster.identities``."""


def agent_spoke(testbed: Any) -> Any:
    """The first spoke, ready for an agent under its production identity.

    What the chart's AddOnTemplate deploys there (CRDs, the agent's ServiceAccount and RBAC)
    is applied, and a kubeconfig of that identity is kept as ``identities[AGENT_IDENTITY]``.
    """
    cluster = testbed.spokes[0]
    cluster.identities[AGENT_IDENTITY] = identities.addon_agent_kubeconfig(
        cluster, c.AGENT_NAMESPACE
    )
    return cluster


def agent_log(name: str) -> Path:
    """Log file of the agent process ``name`` (under ``$TESTBED_RUN_DIR``, else /tmp)."""
    return Path(os.environ.get("TESTBED_RUN_DIR", "/tmp")) / "agent-logs" / f"{name}.log"


@contextmanager
def running_agent(
    spoke: Any,
    bundles: Path,
    log_path: Path,
    *,
    env: dict[str, str] | None = None,
    failed: Callable[[], bool] = lambda: False,
    verify_keys: tuple[str, ...] = (sealing.verify_key_of(TEST_SIGNING_KEY),),
) -> Iterator[AgentProcess]:
    """An agent process on ``spoke`` (see :func:`agent_spoke`), stopped afterwards.

    It runs as the AddOnTemplate's identity, with the spoke's name as its cluster name and
    ``verify_keys`` as the manager's verify keys (default: those of :data:`TEST_SIGNING_KEY`);
    its log tail is printed when ``failed()`` says so.
    """
    proc = AgentProcess(spoke.identities[AGENT_IDENTITY], bundles, log_path, env=env,
                        cluster_name=spoke.name, verify_keys=verify_keys)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        if failed():
            print(f"--- agent log tail ({proc.log_path}) ---\n{proc.tail()}")


def get(cluster: Any, *args: str) -> Any:
    """``kubectl get ... -o json`` parsed (None when not found)."""
    proc = cluster.kubectl("get", *args, "-o", "json", check=False)
    if proc.returncode != 0:
        if "NotFound" in proc.stderr or "not found" in proc.stderr:
            return None
        raise AssertionError(proc.stderr)
    return json.loads(proc.stdout)


def platform(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A ServingPlatform object."""
    return {
        "apiVersion": SP_API,
        "kind": "ServingPlatform",
        "metadata": {"name": name},
        "spec": spec,
    }


def platform_status(cluster: Any, name: str) -> dict[str, Any]:
    """The status of a ServingPlatform ({} when none yet)."""
    obj = get(cluster, "servingplatform", name)
    return dict((obj or {}).get("status") or {})


def wait_phase(cluster: Any, name: str, phase: str, timeout: float = 120) -> dict[str, Any]:
    """Wait until the ServingPlatform reports ``phase`` for its current generation."""

    def check() -> dict[str, Any]:
        obj = get(cluster, "servingplatform", name)
        status = (obj or {}).get("status") or {}
        assert status.get("phase") == phase, status
        assert status.get("observedGeneration") == obj["metadata"]["generation"], status
        return dict(status)

    try:
        return eventually(check, timeout=timeout)
    except AssertionError as err:
        raise AssertionError(f"{err}\n{diagnose(cluster)}") from err


def diagnose(cluster: Any) -> str:
    """Deployments, ReplicaSets and Pods of the stack namespaces (for failure messages)."""
    out = []
    for ns in ("kserve", "modelmesh-serving"):
        proc = cluster.kubectl("get", "deploy,rs,pods", "-n", ns, "-o", "wide", check=False)
        out.append(f"$ kubectl get deploy,rs,pods -n {ns}\n{proc.stdout}{proc.stderr}")
        proc = cluster.kubectl("get", "deploy", "-n", ns, "-o", "yaml", check=False)
        out.append(proc.stdout[-3000:])
    return "\n".join(out)


def leftovers(cluster: Any, extra_selector: str = "") -> list[str]:
    """Objects still labelled as created by the agent (agent's own state excluded)."""
    selector = MANAGED + (f",{extra_selector}" if extra_selector else "")
    found = []
    for kinds in SCANNED_KINDS:
        out = get(cluster, kinds, "-A", "-l", selector)
        for item in (out or {}).get("items", []):
            meta = item["metadata"]
            if meta.get("namespace") in (c.AGENT_NAMESPACE, c.AGENT_STATE_NAMESPACE):
                continue
            found.append(f"{item['kind']} {meta.get('namespace', '')}/{meta['name']}")
    return found


def wait_runtimes_reported(cluster: Any, name: str, timeout: float = 120) -> dict[str, Any]:
    """Wait until the ServingPlatform is Available with its runtimes reported not applied.

    That is Degraded with reason ``RuntimesNotApplied``; returns the status.
    """

    def reported() -> dict[str, Any]:
        status = wait_phase(cluster, name, "Available", timeout=60)
        degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
        assert degraded["reason"] == "RuntimesNotApplied", status
        return status

    return eventually(reported, timeout=timeout)


def timed(fn: Any) -> tuple[Any, float]:
    """Run ``fn`` and return (result, seconds)."""
    start = time.monotonic()
    out = fn()
    return out, time.monotonic() - start
