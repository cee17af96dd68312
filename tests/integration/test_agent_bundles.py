"""devFlags.manifests (directory, kustomization, tarball, https), monitoring, platform switch."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import http.server
import shutil
import ssl
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from addon_agent.bundle_render import BUNDLE_FILE, bundle_path
from addon_agent.io import bundle_source
from addon_agent.pure import certs
from addon_agent.stacks import KSERVE
from testbed import documents, upstream
from testbed.support.agent import (
    AgentProcess,
    agent_log,
    get,
    leftovers,
    platform,
    running_agent,
    wait_phase,
)
from testbed.support.waiting import eventually

NAME = "custom"
MARKER = "custom-bundle-marker"


def marker(value: str) -> str:
    return (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {MARKER}\n  namespace: kserve\n"
        f"data:\n  source: {value}\n"
    )


def make_bundle(root: Path, source: str, bundles: Path) -> Path:
    """root/config/overlays/custom: a kustomization over the KServe bundle plus a marker."""
    overlay = root / "config" / "overlays" / "custom"
    overlay.mkdir(parents=True)
    shutil.copy(bundle_path(bundles, KSERVE) / BUNDLE_FILE, overlay / "stack.yaml")
    (overlay / "marker.yaml").write_text(marker(source))
    (overlay / "kustomization.yaml").write_text("resources:\n- stack.yaml\n- marker.yaml\n")
    return root


def tarball(root: Path, out: Path) -> Path:
    with tarfile.open(out, "w:gz") as tar:
        tar.add(root, arcname="bundle-1.0")
    return out


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory, bundles: Path) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("manifests")
    plain = base / "plain"
    plain.mkdir()
    text = (bundle_path(bundles, KSERVE) / BUNDLE_FILE).read_text()
    (plain / "a-stack.yaml").write_text(text)
    (plain / "b-marker.yaml").write_text(marker("directory"))
    kustomized = make_bundle(base / "kustomized", "kustomization", bundles)
    packed = tarball(make_bundle(base / "packed", "tarball", bundles), base / "bundle.tar.gz")
    served = base / "www"
    served.mkdir()
    tarball(make_bundle(base / "remote", "https", bundles), served / "bundle.tgz")
    foreign = base / "foreign"
    foreign.mkdir()
    (foreign / "a-stack.yaml").write_text(text)
    (foreign / "b-extra.yaml").write_text(FOREIGN_OBJECT)
    return {"plain": plain, "kustomized": kustomized, "tarball": packed, "www": served,
            "foreign": foreign}


FOREIGN_OBJECT = (
    "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\n"
    "metadata: {name: bundle-smuggled}\nvalue: 1000\n"
)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def https_server(
    tmp_path_factory: pytest.TempPathFactory, sources: dict[str, Path]
) -> Iterator[Any]:
    """An HTTPS server on 127.0.0.1 (name localhost) serving the remote tarball."""
    base = tmp_path_factory.mktemp("tls")
    now = dt.datetime.now(dt.UTC)
    ca = certs.new_ca(now, "test CA")
    leaf = certs.new_leaf(ca, ["localhost"], now)
    (base / "ca.pem").write_text(ca.cert_pem)
    (base / "cert.pem").write_text(leaf.cert_pem + leaf.key_pem)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(sources["www"]))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(base / "cert.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.ca_file = base / "ca.pem"  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def agent(
    spoke: Any, bundles: Path, https_server: Any, request: pytest.FixtureRequest
) -> Iterator[AgentProcess]:
    spoke.apply_files(upstream.prometheus_operator_crds())
    spoke.wait_crds_established()
    with running_agent(
        spoke,
        bundles,
        agent_log("test_agent_bundles"),
        env={"SSL_CERT_FILE": str(https_server.ca_file)},
        failed=lambda: bool(request.session.testsfailed),
    ) as proc:
        yield proc


def with_manifests(uri: str, **extra: Any) -> dict[str, Any]:
    return platform(
        NAME,
        {
            "platform": "KServe",
            "monitoring": {"enabled": True},
            "devFlags": {"manifests": {"uri": uri, **extra}},
        },
    )


def marker_source(spoke: Any) -> str | None:
    cm = get(spoke, "configmap", "-n", "kserve", MARKER)
    return None if cm is None else str(cm["data"]["source"])


def test_plain_directory(spoke: Any, agent: AgentProcess, sources: dict[str, Path]) -> None:
    spoke.apply_objects([with_manifests(f"file://{sources['plain']}")])
    status = wait_phase(spoke, NAME, "Available", timeout=180)
    assert status["stackVersion"] == "custom"
    assert marker_source(spoke) == "directory"


def test_monitoring_service_monitors(spoke: Any, agent: AgentProcess) -> None:
    def check() -> bool:
        stack = get(spoke, "servicemonitor", "-n", "kserve", "kserve-controller-manager-metrics")
        own = get(
            spoke,
            "servicemonitor",
            "-n",
            "open-cluster-management-agent-addon",
            "model-serving-agent",
        )
        assert stack is not None and own is not None
        return True

    eventually(check, timeout=30)


def test_kustomization_with_context_dir(
    spoke: Any, agent: AgentProcess, sources: dict[str, Path]
) -> None:
    spoke.apply_objects(
        [
            with_manifests(
                f"file://{sources['kustomized']}", contextDir="config", sourcePath="overlays/custom"
            )
        ]
    )
    eventually(lambda: marker_source(spoke) == "kustomization", timeout=60)
    wait_phase(spoke, NAME, "Available", timeout=60)


def test_local_tarball(spoke: Any, agent: AgentProcess, sources: dict[str, Path]) -> None:
    spoke.apply_objects(
        [
            with_manifests(
                f"file://{sources['tarball']}", contextDir="config", sourcePath="overlays/custom"
            )
        ]
    )
    eventually(lambda: marker_source(spoke) == "tarball", timeout=60)
    wait_phase(spoke, NAME, "Available", timeout=60)


def test_https_tarball(
    spoke: Any, agent: AgentProcess, https_server: Any, sources: dict[str, Path]
) -> None:
    port = https_server.server_address[1]
    spoke.apply_objects(
        [
            with_manifests(
                f"https://localhost:{port}/bundle.tgz",
                sha256=sha256_of(sources["www"] / "bundle.tgz"),
                contextDir="config",
                sourcePath="overlays/custom",
            )
        ]
    )
    eventually(lambda: marker_source(spoke) == "https", timeout=60)
    wait_phase(spoke, NAME, "Available", timeout=60)


def test_https_digest_mismatch_is_refused(
    spoke: Any, agent: AgentProcess, https_server: Any
) -> None:
    port = https_server.server_address[1]
    spoke.apply_objects(
        [with_manifests(f"https://localhost:{port}/bundle.tgz", sha256="0" * 64,
                        contextDir="config", sourcePath="overlays/custom")]
    )
    status = wait_phase(spoke, NAME, "Degraded", timeout=60)
    assert "sha256 digest mismatch" in status["message"]
    # the stack installed before stays as it was
    assert marker_source(spoke) == "https"


def test_kind_off_the_allowlist_refuses_the_bundle(
    spoke: Any, agent: AgentProcess, sources: dict[str, Path]
) -> None:
    spoke.apply_objects([with_manifests(f"file://{sources['foreign']}")])
    status = wait_phase(spoke, NAME, "Degraded", timeout=60)
    assert "PriorityClass bundle-smuggled" in status["message"]
    assert get(spoke, "priorityclass", "bundle-smuggled") is None


def test_pinned_bundles_hold_only_allowed_kinds(bundles: Path) -> None:
    from addon_agent.bundle_render import RUNTIMES_FILE
    from addon_agent.pure import planning
    from addon_agent.stacks import CARRIED

    seen = set()
    assert {(s.platform, s.version) for s in CARRIED} == {
        ("KServe", "v0.17.0"), ("KServe", "v0.20.0"), ("ModelMesh", "v0.12.0")}
    for stack in CARRIED:  # every version the agent carries
        for name in (BUNDLE_FILE, RUNTIMES_FILE):
            path = bundle_path(bundles, stack) / name
            if path.is_file():
                objects = planning.bundle_objects(documents.load_file(path))
                bundle_source.check_kinds(objects)  # raises naming what is not allowed
                seen |= {(o["apiVersion"].rpartition("/")[0], o["kind"]) for o in objects}
    # the list is no wider than the bundles need (ServingRuntime: the namespaced twin)
    assert bundle_source.ALLOWED_KINDS - seen == {("serving.kserve.io", "ServingRuntime")}


def test_every_pod_of_every_carried_stack_passes_pod_security_restricted(bundles: Path) -> None:
    """What OpenShift's restricted-v2 and Pod Security ``restricted`` admit: every pod template
    the agent installs, of every stack and version it carries, with the default settings."""
    from addon_agent.bundle_render import RUNTIMES_FILE
    from addon_agent.pure import planning, pod_security
    from addon_agent.stacks import CARRIED
    from addon_api.spoke import ServingPlatformSpec

    for stack in CARRIED:
        directory = bundle_path(bundles, stack)
        text = (directory / BUNDLE_FILE).read_text()
        objects = planning.bundle_objects(documents.load_all(text))
        if (directory / RUNTIMES_FILE).is_file():
            objects += planning.bundle_objects(documents.load_file(directory / RUNTIMES_FILE))
        spec = ServingPlatformSpec.model_validate({"platform": stack.platform,
                                                   "version": stack.version})
        plan = planning.plan(objects, spec, stack, planning.ClusterFacts())
        pods = {o["metadata"]["name"]: o["spec"]["template"]["spec"] for o in plan.objects
                if o["kind"] in planning.POD_OWNERS}
        assert pods, stack
        assert {n: pod_security.violations(p) for n, p in pods.items()} == {
            n: [] for n in pods}, (stack.platform, stack.version)
        namespaces = [o for o in plan.objects if o["kind"] == "Namespace"]
        assert namespaces and all(o["metadata"]["labels"].get(
            "pod-security.kubernetes.io/enforce") == "restricted" for o in namespaces), stack
        # The serving runtimes it ships, container by container and worker by worker (KServe
        # and ModelMesh add the pod's own settings and containers): restricted; on OpenShift
        # (the cluster assigns users) too, naming no user.
        openshift = planning.plan(objects, spec, stack, planning.ClusterFacts(
            service_ca=True, assigns_users=True))
        for facts, runtimes in (("default", plan.objects), ("openshift", openshift.objects)):
            for runtime in [o for o in runtimes if planning.is_runtime(o)]:
                where = (stack.platform, stack.version, facts, runtime["metadata"]["name"])
                containers = pod_security.runtime_containers(runtime)
                assert containers and pod_security.violations(
                    {"containers": containers}) == [], where
                users = [(c.get("securityContext") or {}).get("runAsUser") for c in containers]
                assert facts == "default" or users == [None] * len(users), where


def test_every_carried_stack_fits_one_node_under_the_single_node_profile(bundles: Path) -> None:
    """SingleNode on the real bundles: every Deployment and StatefulSet one replica, no pod
    anti-affinity, no container requesting more than the profile's cap."""
    from addon_agent.bundle_render import RUNTIMES_FILE
    from addon_agent.pure import planning, profiles
    from addon_agent.stacks import CARRIED
    from addon_api.spoke import ServingPlatformSpec

    caps = {k: profiles.quantity(v) for k, v in profiles.SINGLE_NODE_REQUESTS.items()}
    for stack in CARRIED:
        directory = bundle_path(bundles, stack)
        objects = planning.bundle_objects(documents.load_file(directory / BUNDLE_FILE))
        if (directory / RUNTIMES_FILE).is_file():
            objects += planning.bundle_objects(documents.load_file(directory / RUNTIMES_FILE))
        spec = ServingPlatformSpec.model_validate(
            {"platform": stack.platform, "version": stack.version, "profile": "SingleNode"})
        plan = planning.plan(objects, spec, stack, planning.ClusterFacts())
        workloads = [o for o in plan.objects if o["kind"] in planning.POD_OWNERS]
        assert workloads, stack
        models = {k: profiles.quantity(v) for k, v in profiles.SINGLE_NODE_MODEL_REQUESTS.items()}
        for runtime in [o for o in plan.objects if planning.is_runtime(o)]:
            for container in runtime["spec"].get("containers") or []:
                requests = (container.get("resources") or {}).get("requests") or {}
                assert all(profiles.quantity(v) <= models[k] for k, v in requests.items()
                           if k in models), (runtime["metadata"]["name"], requests)
        for obj in workloads:
            where = (stack.platform, stack.version, obj["metadata"]["name"])
            pod = obj["spec"]["template"]["spec"]
            assert obj["kind"] == "DaemonSet" or obj["spec"]["replicas"] == 1, where
            assert "podAntiAffinity" not in (pod.get("affinity") or {}), where
            for container in [*(pod.get("initContainers") or []), *pod["containers"]]:
                requests = (container.get("resources") or {}).get("requests") or {}
                assert all(profiles.quantity(v) <= caps[k]
                           for k, v in requests.items() if k in caps), (where, requests)


def test_bad_uri_is_reported(spoke: Any, agent: AgentProcess) -> None:
    spoke.apply_objects([with_manifests("file:///does/not/exist")])
    status = wait_phase(spoke, NAME, "Degraded", timeout=60)
    assert "does/not/exist" in status["message"]
    reasons = {c["type"]: c["reason"] for c in status["conditions"]}
    assert reasons["Available"] == "BundleError"
    # nothing was uninstalled because of a bad bundle
    assert get(spoke, "deployment", "-n", "kserve", "kserve-controller-manager") is not None


def test_switch_to_modelmesh(spoke: Any, agent: AgentProcess) -> None:
    spoke.apply_objects(
        [platform(NAME, {"platform": "ModelMesh", "modelmesh": {"podsPerRuntime": 1}})]
    )
    status = wait_phase(spoke, NAME, "Available", timeout=180)
    assert status["stackVersion"] == "v0.12.0"
    # KServe-only objects went; the CRDs both stacks ship now hold ModelMesh's copy
    eventually(lambda: get(spoke, "namespace", "kserve") is None, timeout=120)
    assert get(spoke, "crd", "inferencegraphs.serving.kserve.io") is None
    assert get(spoke, "crd", "predictors.serving.kserve.io") is not None
    isvc_crd = get(spoke, "crd", "inferenceservices.serving.kserve.io")
    assert isvc_crd["metadata"]["labels"]["modelserving.opendatahub.io/platform"] == "ModelMesh"


def test_removed(spoke: Any, agent: AgentProcess) -> None:
    spoke.apply_objects([platform(NAME, {"platform": "ModelMesh", "managementState": "Removed"})])
    wait_phase(spoke, NAME, "Removed", timeout=180)
    eventually(lambda: leftovers(spoke) == [], timeout=120)
    spoke.kubectl("delete", "servingplatform", NAME, "--timeout=60s")
