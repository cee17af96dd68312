"""What the testbed reads from upstream Go modules: pins and CRDs from the module cache."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from testbed import build, documents, upstream, versions

GoModules = Callable[[str, str], Path]


def test_kubernetes_staging_modules_pinned_to_matching_v0_release(go_modules: GoModules) -> None:
    replaces = build._kubernetes_staging_replaces()
    minor = versions.KUBERNETES.split(".")[1]
    assert "k8s.io/api" in replaces and "k8s.io/apiserver" in replaces
    assert len(replaces) > 25
    assert set(replaces.values()) == {f"v0.{minor}.{versions.KUBERNETES.split('.')[2]}"}


def _kinds(paths: list[Path]) -> set[str]:
    docs = (documents.load(p.read_text()) for p in paths)
    return {d["spec"]["names"]["kind"] for d in docs}


def test_upstream_crds_come_from_the_module_cache(go_modules: GoModules) -> None:
    hub = _kinds(upstream.ocm_hub_crds())
    assert {"ManagedCluster", "Placement", "PlacementDecision", "ManifestWork",
            "ManifestWorkReplicaSet", "ClusterManagementAddOn", "ManagedClusterAddOn",
            "AddOnTemplate", "AddOnDeploymentConfig", "ManagedClusterSet",
            "ManagedClusterSetBinding"} <= hub
    assert _kinds(upstream.ocm_spoke_crds()) == {"AppliedManifestWork", "ClusterClaim"}
    assert {"InferenceService", "ServingRuntime"} <= _kinds(upstream.kserve_crds())
    assert {"InferenceService", "ServingRuntime", "Predictor"} <= _kinds(upstream.modelmesh_crds())
    assert _kinds(upstream.prometheus_operator_crds()) == {"ServiceMonitor", "PodMonitor"}
    # Where OCM ships a CRD in two API version folders, the newest folder wins.
    cma = next(p for p in upstream.ocm_hub_crds() if "clustermanagementaddons" in p.name)
    assert cma.parent.name == "v1beta1"


def test_kube_rbac_proxy_pin_is_the_kserve_bundles_sidecar(bundles: Path) -> None:
    """The testbed runs the kube-rbac-proxy release KServe's bundle names, not another."""
    from addon_agent.bundle_render import BUNDLE_FILE, bundle_path
    from addon_agent.stacks import KSERVE

    docs = documents.load_file(bundle_path(bundles, KSERVE) / BUNDLE_FILE)
    images = {c["image"] for d in docs if d and d["kind"] == "Deployment"
              for c in d["spec"]["template"]["spec"]["containers"]
              if c["name"] == "kube-rbac-proxy"}
    assert images and {i.rsplit(":", 1)[1] for i in images} == {versions.KUBE_RBAC_PROXY}
