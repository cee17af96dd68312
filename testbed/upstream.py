"""Upstream CRDs read from the Go module cache (never committed to this repo).

Each function downloads its module at the version pinned in
:mod:`testbed.versions` (a no-op when it is already in the module cache) and
returns the CRD files to apply.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from testbed import versions
from testbed.paths import gomodcache


class ModuleError(RuntimeError):
    """A Go module could not be downloaded."""


def module_dir(module: str, version: str) -> Path:
    """Directory of ``module@version`` in the module cache, downloading it if needed."""
    path = gomodcache() / f"{module}@{version}"
    if not path.exists():
        proc = subprocess.run(
            ["go", "mod", "download", f"{module}@{version}"],
            capture_output=True,
            text=True,
            # Outside any module, in a directory that exists on a fresh machine (the module
            # cache and its parents do not until the first download creates them).
            cwd=tempfile.gettempdir(),
        )
        if proc.returncode != 0 or not path.exists():
            raise ModuleError(
                f"cannot download Go module {module}@{version}: {proc.stderr.strip()}\n"
                "Check the pin in testbed/versions.py and that the Go module proxy is reachable."
            )
    return path


_VERSION_RANK = {"v1": 0, "v1beta2": 1, "v1beta1": 2, "v1alpha1": 3}


def _ocm_crds(names: tuple[str, ...]) -> list[Path]:
    """OCM CRDs by plural name; where two API versions ship one, the newest directory wins."""
    root = module_dir("open-cluster-management.io/api", versions.OCM_API)
    found: dict[str, tuple[int, Path]] = {}
    for path in root.glob("*/*/*.crd.yaml"):
        plural = path.name.removesuffix(".crd.yaml").rsplit("_", 1)[-1]
        rank = _VERSION_RANK.get(path.parent.name, 9)
        if plural in names and (plural not in found or rank < found[plural][0]):
            found[plural] = (rank, path)
    missing = set(names) - set(found)
    if missing:
        raise ModuleError(f"OCM api {versions.OCM_API} has no CRD for {sorted(missing)}")
    return [found[n][1] for n in names]


def ocm_hub_crds() -> list[Path]:
    """CRDs the OCM hub controllers need."""
    return _ocm_crds(
        (
            "managedclusters",
            "managedclustersets",
            "managedclustersetbindings",
            "placements",
            "placementdecisions",
            "addonplacementscores",
            "manifestworks",
            "manifestworkreplicasets",
            "clustermanagementaddons",
            "managedclusteraddons",
            "addondeploymentconfigs",
            "addontemplates",
        )
    )


def ocm_spoke_crds() -> list[Path]:
    """CRDs the OCM agents need on a managed cluster."""
    return _ocm_crds(("appliedmanifestworks", "clusterclaims"))


def kserve_crds() -> list[Path]:
    """KServe's serving CRDs (InferenceService, ServingRuntime, ...)."""
    root = module_dir("github.com/kserve/kserve", versions.KSERVE) / "config" / "crd" / "full"
    return sorted(root.glob("serving.kserve.io_*.yaml"))


def route_crd() -> Path:
    """OpenShift's Route CRD (route.openshift.io/v1), as its API module publishes it."""
    root = module_dir("github.com/openshift/api", versions.OPENSHIFT_API)
    return root / "route" / "v1" / "zz_generated.crd-manifests" / "routes.crd.yaml"


def mcs_crds() -> list[Path]:
    """The Multi-Cluster Services CRDs (multicluster.x-k8s.io ServiceExport, ServiceImport)."""
    root = module_dir("sigs.k8s.io/mcs-api", versions.MCS_API) / "config" / "crd"
    return sorted(root.glob("multicluster.x-k8s.io_*.yaml"))


def inference_pool_import_crd() -> Path:
    """The Gateway API Inference Extension's InferencePoolImport CRD (x-k8s.io, v1alpha1)."""
    root = module_dir("sigs.k8s.io/gateway-api-inference-extension", versions.INFERENCE_EXTENSION)
    bases = root / "config" / "crd" / "bases"
    return bases / "inference.networking.x-k8s.io_inferencepoolimports.yaml"


def modelmesh_crds() -> list[Path]:
    """ModelMesh Serving's CRDs (its own, older copies of the serving.kserve.io kinds)."""
    root = module_dir("github.com/kserve/modelmesh-serving", versions.MODELMESH)
    return sorted((root / "config" / "crd" / "bases").glob("*.yaml"))


def prometheus_operator_crds() -> list[Path]:
    """ServiceMonitor and PodMonitor CRDs."""
    root = module_dir(
        "github.com/prometheus-operator/prometheus-operator", versions.PROMETHEUS_OPERATOR
    )
    base = root / "example" / "prometheus-operator-crd"
    return [base / f"monitoring.coreos.com_{k}.yaml" for k in ("servicemonitors", "podmonitors")]
