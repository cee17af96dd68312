"""The binary builder's pure parts and upstream CRD selection."""

from __future__ import annotations

from pathlib import Path

import yaml

from testbed import build, upstream, versions


def test_kubernetes_staging_modules_pinned_to_matching_v0_release() -> None:
    replaces = build._kubernetes_staging_replaces()
    minor = versions.KUBERNETES.split(".")[1]
    assert "k8s.io/api" in replaces and "k8s.io/apiserver" in replaces
    assert len(replaces) > 25
    assert set(replaces.values()) == {f"v0.{minor}.{versions.KUBERNETES.split('.')[2]}"}


def test_every_tool_has_a_version_keyed_cache_dir() -> None:
    dirs = {t.bin_dir for t in build.TOOLS}
    assert len(dirs) == len(build.TOOLS)
    for tool in build.TOOLS:
        assert tool.bin_dir.name == f"{tool.name}-{tool.version}"


def _kinds(paths: list[Path]) -> set[str]:
    docs = (yaml.load(p.read_text(), Loader=yaml.CSafeLoader) for p in paths)
    return {d["spec"]["names"]["kind"] for d in docs}


def test_upstream_crds_come_from_the_module_cache() -> None:
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
