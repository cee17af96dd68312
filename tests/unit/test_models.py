"""The pydantic models and the structural schemas generated from them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from addon_api import constants as c
from addon_api.base import parse_quantity
from addon_api.common import LabelSelector, Override, StatusSummary, merge_patch
from addon_api.crdgen import RESOURCES, crd, openapi_schema
from addon_api.hub import (
    ModelServing,
    MultiClusterInferenceService,
    StorageConnection,
    StorageConnectionSpec,
)
from addon_api.platform import PlatformSettings
from addon_api.spoke import ServingPlatform

ROOT = Path(__file__).resolve().parents[2]
CASES: dict[str, Any] = yaml.safe_load(
    (ROOT / "tests" / "data" / "admission_cases.yaml").read_text()
)
BY_KIND = {cls.model_fields["kind"].default: cls for cls in RESOURCES}


def contains(big: Any, small: Any) -> bool:
    """Whether ``small`` is ``big`` with some object keys left out."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(
            k in big and contains(big[k], v) for k, v in small.items()
        )
    if isinstance(small, list):
        return (
            isinstance(big, list)
            and len(big) == len(small)
            and all(contains(b, s) for b, s in zip(big, small, strict=True))
        )
    return bool(big == small)


# The shared admission cases, judged by pydantic --------------------------------------------------


@pytest.mark.parametrize("good_id", sorted(CASES["good"]))
def test_good_case_validates(good_id: str) -> None:
    obj = CASES["good"][good_id]
    model = BY_KIND[obj["kind"]].model_validate(obj)
    # Round trip: what the models write holds everything they read, and reads back the same.
    out = model.to_dict()
    assert contains(out, obj)
    assert type(model).model_validate(out) == model


# Cases marked `pydantic: false` are judged by the API server only (test_admission.py).
PYDANTIC_BAD = [case for case in CASES["bad"] if case.get("pydantic", True)]


@pytest.mark.parametrize("case", PYDANTIC_BAD, ids=[case["id"] for case in PYDANTIC_BAD])
def test_bad_case_is_rejected(case: dict[str, Any]) -> None:
    obj = merge_patch(CASES["good"][case["base"]], case["patch"])
    with pytest.raises(ValidationError) as err:
        BY_KIND[obj["kind"]].model_validate(obj)
    if "rule" in case:
        assert case["rule"] in str(err.value)


def test_cases_cover_every_kind() -> None:
    good_kinds = {obj["kind"] for obj in CASES["good"].values()}
    bad_kinds = {CASES["good"][case["base"]]["kind"] for case in CASES["bad"]}
    assert good_kinds == bad_kinds == set(BY_KIND)
    assert len(CASES["bad"]) >= 30
    ids = [case["id"] for case in CASES["bad"]]
    assert len(ids) == len(set(ids))


def test_every_cel_rule_has_a_bad_case() -> None:
    """Each CEL message is exercised by at least one bad case."""
    messages = {msg for cls in RESOURCES for _, msg in _rules(openapi_schema(cls))}
    covered = {m for m in messages for case in CASES["bad"] if case.get("rule", "\0") in m}
    assert messages - covered == set()


# Examples ---------------------------------------------------------------------------------------


def _example_docs() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield path.name, doc


def test_examples_validate() -> None:
    kinds = set()
    for name, doc in _example_docs():
        assert "namespace" not in doc["metadata"], f"{name}: examples are applied with -n"
        if doc["apiVersion"] != c.API_VERSION:
            assert doc["kind"] in {"Secret", "Placement", "ManagedClusterSetBinding"}, name
            continue
        BY_KIND[doc["kind"]].model_validate(doc)
        assert doc["spec"]["placementRef"]["name"] == "default", name
        kinds.add(doc["kind"])
    assert kinds == set(c.HUB_KINDS)


def test_example_placement_binds_default_clusterset() -> None:
    docs = {doc["kind"]: doc for name, doc in _example_docs() if name == "placement.yaml"}
    assert docs["ManagedClusterSetBinding"]["spec"]["clusterSet"] == "default"
    assert docs["ManagedClusterSetBinding"]["metadata"]["name"] == "default"
    assert docs["Placement"]["metadata"]["name"] == "default"
    assert docs["Placement"]["spec"]["clusterSets"] == ["default"]


def test_example_placements_tolerate_ocms_availability_taints() -> None:
    # A partition must not take a cluster out of the examples' Placements (docs/reliability.md).
    placements = [doc for _, doc in _example_docs() if doc["kind"] == "Placement"]
    assert placements
    for doc in placements:
        tolerated = {(t["key"], t["operator"], t.get("tolerationSeconds"))
                     for t in doc["spec"]["tolerations"]}
        assert tolerated == {
            ("cluster.open-cluster-management.io/unreachable", "Exists", None),
            ("cluster.open-cluster-management.io/unavailable", "Exists", None),
        }


# Model behaviour --------------------------------------------------------------------------------


def test_defaults_and_aliases() -> None:
    msv = ModelServing.model_validate(CASES["good"]["msv-minimal"])
    assert msv.spec.platform == "KServe"
    assert msv.spec.management_state == "Managed"
    assert msv.api_version == c.API_VERSION
    out = ModelServing.model_validate(
        merge_patch(CASES["good"]["msv-minimal"], {"spec": {"kserve": {}}})
    ).to_dict()
    assert out["spec"]["kserve"] == {
        "deploymentMode": "Standard",
        "serviceClusterIPNone": True,
        "builtInRuntimes": True,
    }
    assert out["spec"]["placementRef"] == {"name": "default"}


def test_strict_types_like_the_api_server() -> None:
    bad = merge_patch(CASES["good"]["msv-kserve"], {"spec": {"monitoring": {"enabled": "yes"}}})
    with pytest.raises(ValidationError):
        ModelServing.model_validate(bad)
    bad = merge_patch(
        CASES["good"]["msv-kserve"],
        {"spec": {"components": {"kserve-controller-manager": {"replicas": "2"}}}},
    )
    with pytest.raises(ValidationError):
        ModelServing.model_validate(bad)


def test_platform_settings_render_into_serving_platform() -> None:
    """A ModelServing spec minus intent fields is a valid ServingPlatform spec."""
    msv = ModelServing.model_validate(CASES["good"]["msv-kserve"])
    settings = msv.spec.model_dump(
        by_alias=True, exclude_none=True, include=set(PlatformSettings.model_fields)
    )
    splat = ServingPlatform.model_validate(
        {"metadata": {"name": "kserve"}, "spec": {**settings, "force": False}}
    )
    assert splat.spec.components == msv.spec.components


def test_override_patch_cannot_change_placement() -> None:
    with pytest.raises(ValidationError, match="cannot change placementRef"):
        Override.model_validate({"clusterNames": ["c1"], "patch": {"placementRef": {"name": "x"}}})


def test_override_selects() -> None:
    by_name = Override.model_validate({"clusterNames": ["c1"], "patch": {}})
    assert by_name.selects("c1", {})
    assert not by_name.selects("c2", {})
    by_labels = Override.model_validate(
        {
            "clusterSelector": {
                "matchLabels": {"env": "prod"},
                "matchExpressions": [
                    {"key": "region", "operator": "In", "values": ["eu", "us"]},
                    {"key": "legacy", "operator": "DoesNotExist"},
                ],
            },
            "patch": {},
        }
    )
    assert by_labels.selects("c9", {"env": "prod", "region": "eu"})
    assert not by_labels.selects("c9", {"env": "prod", "region": "ap"})
    assert not by_labels.selects("c9", {"env": "prod", "region": "eu", "legacy": "1"})
    assert LabelSelector().matches({"anything": "x"})
    not_in = LabelSelector.model_validate(
        {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["edge"]}]}
    )
    assert not_in.matches({}) and not not_in.matches({"tier": "edge"})


def test_merge_patch() -> None:
    target = {"a": 1, "b": {"c": 2, "d": [1, 2]}, "e": 3}
    patch = {"a": None, "b": {"c": 4, "d": [3]}, "f": {"g": None, "h": 5}}
    assert merge_patch(target, patch) == {"b": {"c": 4, "d": [3]}, "e": 3, "f": {"h": 5}}
    assert target == {"a": 1, "b": {"c": 2, "d": [1, 2]}, "e": 3}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Decimal(1)),
        ("500m", Decimal("0.5")),
        ("2Gi", Decimal(2 * 1024**3)),
        ("1.5k", Decimal(1500)),
        ("1e3", Decimal(1000)),
        ("3E", Decimal(3 * 10**18)),
    ],
)
def test_parse_quantity(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


def test_status_summary_ready_text() -> None:
    assert StatusSummary.of(desired=3, ready=2, progressing=1, failed=0).ready_text == "2/3"


def test_storage_entry_key() -> None:
    spec = StorageConnection.model_validate(CASES["good"]["sconn-pvc"]).spec
    assert isinstance(spec, StorageConnectionSpec)
    assert spec.entry_key("pvc") == "pvc"
    assert StorageConnection.model_validate(CASES["good"]["sconn-s3"]).spec.entry_key("s3") == (
        "my-s3"
    )


def test_from_object_accepts_any_mapping() -> None:
    class View(Mapping[str, Any]):
        """A read-only view like kopf's Body."""

        def __init__(self, data: dict[str, Any]) -> None:
            self._data = data

        def __getitem__(self, key: str) -> Any:
            value = self._data[key]
            return View(value) if isinstance(value, dict) else value

        def __iter__(self) -> Iterator[str]:
            return iter(self._data)

        def __len__(self) -> int:
            return len(self._data)

    msv = ModelServing.from_object(View(CASES["good"]["msv-kserve"]))
    assert msv.spec.serving_namespaces == ["models", "team-a"]


def test_isvc_name_rule_accepts_generate_name() -> None:
    obj = merge_patch(CASES["good"]["mcisvc"], {"metadata": {"name": None, "generateName": "x-"}})
    MultiClusterInferenceService.model_validate(obj)


# Structural schemas -----------------------------------------------------------------------------


def _nodes(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every schema node with its path (properties, items, additionalProperties)."""
    yield path, node
    for name, prop in node.get("properties", {}).items():
        yield from _nodes(prop, f"{path}.{name}")
    if "items" in node:
        yield from _nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}.*")


def _rules(node: Any) -> Iterator[tuple[str, str]]:
    for path, sub in _nodes(node):
        for rule in sub.get("x-kubernetes-validations", []):
            yield path, rule["message"]


def _all_keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, sub in value.items():
            yield key
            # Names under properties are field names, not keywords.
            yield from _all_keys(sub) if key != "properties" else _prop_keys(sub)
    elif isinstance(value, list):
        for item in value:
            yield from _all_keys(item)


def _prop_keys(props: dict[str, Any]) -> Iterator[str]:
    for sub in props.values():
        yield from _all_keys(sub)


@pytest.fixture(params=RESOURCES, ids=lambda cls: cls.__name__)
def schema(request: pytest.FixtureRequest) -> dict[str, Any]:
    return openapi_schema(request.param)


def test_schema_has_no_ref_anyof_or_title(schema: dict[str, Any]) -> None:
    keys = set(_all_keys(schema))
    assert not keys & {"$ref", "$defs", "anyOf", "oneOf", "allOf", "title", "const"}
    assert not keys & {"uniqueItems", "propertyNames", "patternProperties", "exclusiveMinimum"}


def test_schema_has_no_null_defaults(schema: dict[str, Any]) -> None:
    for path, node in _nodes(schema):
        assert node.get("default", ...) is not None, path


def test_every_property_is_documented(schema: dict[str, Any]) -> None:
    assert schema["description"]
    for path, node in _nodes(schema):
        for name, prop in node.get("properties", {}).items():
            if f"{path}.{name}" in {".metadata", ".metadata.name", ".metadata.generateName"}:
                continue
            assert prop.get("description"), f"{path}.{name} has no description"


def test_every_node_is_typed(schema: dict[str, Any]) -> None:
    for path, node in _nodes(schema):
        assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields") or node.get(
            "x-kubernetes-int-or-string"), path


def test_collections_and_strings_are_bounded(schema: dict[str, Any]) -> None:
    """Bounds keep the CEL cost estimate (and objects) small."""
    for path, node in _nodes(schema):
        if path in {".apiVersion", ".kind"}:
            continue
        if node.get("type") == "array":
            assert "maxItems" in node, path
        if isinstance(node.get("additionalProperties"), dict):
            assert "maxProperties" in node, path
        if node.get("type") == "string" and "enum" not in node and "format" not in node:
            assert "maxLength" in node, path


def test_cel_rules_are_well_formed(schema: dict[str, Any]) -> None:
    for path, node in _nodes(schema):
        for rule in node.get("x-kubernetes-validations", []):
            assert set(rule) <= {"rule", "message", "fieldPath", "reason"}, path
            assert rule["message"] and rule["rule"], path
            assert rule["rule"].count("(") == rule["rule"].count(")"), rule["rule"]
            assert rule["rule"].count("'") % 2 == 0, rule["rule"]
            if "fieldPath" in rule:
                # fieldPath must name a field of the schema the rule is on.
                target = node
                for part in rule["fieldPath"].lstrip(".").split("."):
                    target = target["properties"][part]


def test_list_map_keys_are_required(schema: dict[str, Any]) -> None:
    for path, node in _nodes(schema):
        if node.get("x-kubernetes-list-type") == "map":
            for key in node["x-kubernetes-list-map-keys"]:
                assert key in node["items"]["required"], path


# CRDs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", RESOURCES, ids=lambda cls: cls.__name__)
def test_crd_shape(cls: Any) -> None:
    doc = crd(cls)
    spec = doc["spec"]
    assert doc["metadata"]["name"] == f"{spec['names']['plural']}.{c.GROUP}"
    assert spec["group"] == c.GROUP
    (version,) = spec["versions"]
    assert version["name"] == c.VERSION and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}
    columns = [col["name"] for col in version["additionalPrinterColumns"]]
    assert "Phase" in columns and columns[-1] == "Age"
    assert spec["names"]["shortNames"]
    if cls.crd.hub:
        assert spec["scope"] == "Namespaced"
        assert spec["names"]["categories"] == [c.CATEGORY]
        ready = next(col for col in version["additionalPrinterColumns"] if col["name"] == "Ready")
        assert ready["jsonPath"] == ".status.summary.readyText"
    else:
        assert "categories" not in spec["names"]


def test_the_category_shadows_no_kinds_name() -> None:
    """kubectl expands a category before it resolves a resource name: a category equal to a
    singular, plural or short name makes ``kubectl get/delete NAME`` reach every kind."""
    names: set[str] = set()
    for cls in RESOURCES:
        kind = str(cls.model_fields["kind"].default).lower()
        names |= {cls.crd.plural, kind, *cls.crd.short_names}
    assert "modelserving" in names
    assert c.CATEGORY not in names, sorted(names)


def test_short_names() -> None:
    names = {cls.model_fields["kind"].default: cls.crd.short_names for cls in RESOURCES}
    assert names == {
        "ModelServing": ("msv",),
        "StorageConnection": ("sconn",),
        "MultiClusterServingRuntime": ("mcsr",),
        "MultiClusterInferenceService": ("mcisvc",),
        "ServingPlatform": ("splat",),
        "SealedStorageConnection": ("sealedsc",),
    }
    assert ServingPlatform.crd.scope == "Cluster"
    columns = [col.name for col in ModelServing.crd.columns]
    assert columns[:1] == ["Platform"]


def test_override_patch_may_null_but_not_set_routing_fields() -> None:
    # Found by tests/reliability/test_bad_input.py: the API server admitted a patch setting
    # placementRef that the model rejected (the intent went Invalid after a successful apply).
    # Now a CEL rule rejects it at admission; a null is pruned by the API server and ignored here.
    Override.model_validate({"clusterNames": ["c1"], "patch": {"placementRef": None}})
    with pytest.raises(ValidationError, match="cannot change overrides"):
        Override.model_validate({"clusterNames": ["c1"], "patch": {"overrides": []}})
