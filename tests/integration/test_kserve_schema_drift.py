"""The template fields the hub declares are exactly those of the pinned upstream CRDs.

``addon_api.kserve`` declares, as facts, the fields of KServe's InferenceService spec, its
predictor, and the ServingRuntime spec, so the hub refuses at admission what the spokes'
API servers would refuse. Here those declarations are compared with the CRDs of the pinned
releases, read from the Go module cache (never committed): a KServe upgrade that adds,
drops or retypes a field fails here, naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from addon_agent.stacks import KSERVE, MODELMESH
from addon_api.crdgen import openapi_schema
from addon_api.hub import MultiClusterInferenceService, MultiClusterServingRuntime
from addon_api.kserve import KSERVE_ONLY_PREDICTOR_FIELDS
from testbed import documents

pytestmark = pytest.mark.testbed

Schema = dict[str, Any]
Modules = Callable[[str, str], Path]


def upstream_spec(path: Path, version: str) -> Schema:
    """The ``spec`` schema of one served version of an upstream CRD file."""
    doc = documents.load(path.read_text())
    (found,) = [v for v in doc["spec"]["versions"] if v["name"] == version]
    spec: Schema = found["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


def our_template(cls: type[Any]) -> Schema:
    """The ``spec.template`` schema of one of our hub kinds, as the CRD has it."""
    template: Schema = openapi_schema(cls)["properties"]["spec"]["properties"]["template"]
    return template


def types(node: Schema) -> dict[str, str | None]:
    """Field name -> JSON type of an object schema's properties."""
    return {name: prop.get("type") for name, prop in node["properties"].items()}


def assert_same_fields(ours: Schema, theirs: Schema, where: str) -> None:
    """Same field names and types at this level, and unknown fields refused by ours."""
    mine, upstream = types(ours), types(theirs)
    assert not set(upstream) - set(mine), (
        f"{where}: upstream declares fields the hub does not: {sorted(set(upstream) - set(mine))}"
        " (declare them in addon_api/kserve.py and run `make crds`)"
    )
    assert not set(mine) - set(upstream), (
        f"{where}: the hub declares fields upstream does not: {sorted(set(mine) - set(upstream))}"
    )
    retyped = {n: (mine[n], upstream[n]) for n in mine if mine[n] != upstream[n]}
    assert not retyped, f"{where}: types differ (ours, upstream): {retyped}"
    # Unknown fields are refused at this level (no preserve-unknown-fields).
    assert not ours.get("x-kubernetes-preserve-unknown-fields"), where


@pytest.fixture(scope="module")
def kserve_crds(go_modules: Modules) -> Path:
    """KServe's CRDs as its ``config/crd`` kustomization installs them (``full``)."""
    return go_modules(KSERVE.module, KSERVE.version) / "config" / "crd" / "full"


@pytest.fixture(scope="module")
def modelmesh_crds(go_modules: Modules) -> Path:
    """ModelMesh Serving's CRDs."""
    return go_modules(MODELMESH.module, MODELMESH.version) / "config" / "crd" / "bases"


def test_inference_service_template_matches_kserve(kserve_crds: Path) -> None:
    theirs = upstream_spec(kserve_crds / "serving.kserve.io_inferenceservices.yaml", "v1beta1")
    ours = our_template(MultiClusterInferenceService)
    assert_same_fields(ours, theirs, f"InferenceService spec (KServe {KSERVE.version})")
    assert_same_fields(
        ours["properties"]["predictor"],
        theirs["properties"]["predictor"],
        f"InferenceService spec.predictor (KServe {KSERVE.version})",
    )
    assert ours["required"] == theirs["required"] == ["predictor"]


def test_serving_runtime_template_matches_kserve(kserve_crds: Path) -> None:
    theirs = upstream_spec(kserve_crds / "serving.kserve.io_servingruntimes.yaml", "v1alpha1")
    assert_same_fields(
        our_template(MultiClusterServingRuntime),
        theirs,
        f"ServingRuntime spec (KServe {KSERVE.version})",
    )


def test_modelmesh_declares_a_subset_and_the_rest_is_refused_in_modelmesh_mode(
    modelmesh_crds: Path,
) -> None:
    """ModelMesh's CRDs (same group) declare a subset of KServe's fields. The ServingRuntime
    template accepts the union (KServe's); the InferenceService template refuses exactly the
    KServe-only predictor fields when deploymentMode is ModelMesh."""
    isvc = upstream_spec(modelmesh_crds / "serving.kserve.io_inferenceservices.yaml", "v1beta1")
    ours = our_template(MultiClusterInferenceService)
    assert set(types(isvc)) <= set(types(ours))
    predictor = set(types(isvc["properties"]["predictor"]))
    our_predictor = set(types(ours["properties"]["predictor"]))
    assert predictor <= our_predictor, sorted(predictor - our_predictor)
    assert sorted(our_predictor - predictor) == sorted(KSERVE_ONLY_PREDICTOR_FIELDS)

    runtime = upstream_spec(modelmesh_crds / "serving.kserve.io_servingruntimes.yaml", "v1alpha1")
    extra = set(types(runtime)) - set(types(our_template(MultiClusterServingRuntime)))
    assert not extra, f"ModelMesh {MODELMESH.version} ServingRuntime fields: {sorted(extra)}"
