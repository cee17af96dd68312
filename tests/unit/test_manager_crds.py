"""The hub CRDs the manager applies as it starts to lead (addon_manager.shell.crds)."""

from __future__ import annotations

import yaml

from addon_api import constants as c
from addon_api.crdgen import crd_files
from addon_api.hub import HUB_RESOURCES
from addon_manager.shell import crds


def test_the_manager_applies_exactly_the_hub_crds_of_crds_dir_marked_with_its_version() -> None:
    files = {name.removesuffix(".yaml"): yaml.safe_load(text)
             for name, text in crd_files().items()}
    mine = crds.desired("0.2.0")
    assert len(mine) == len(HUB_RESOURCES) == 4
    for obj in mine:
        name = obj["metadata"]["name"]
        assert obj["metadata"].pop("annotations") == {crds.VERSION_ANNOTATION: "0.2.0"}
        assert obj == files[name], name  # the schema the chart's crds/ installs
        assert obj["metadata"]["labels"][f"{c.GROUP}/served-by"] == "hub"


def test_only_a_newer_managers_crd_is_left_alone() -> None:
    assert crds.newer("0.2.0", "0.1.0") and crds.newer("v1.0.0", "0.9.9")
    assert crds.newer("0.10.0", "0.9.0")  # numbers, not text
    assert not crds.newer("0.1.0", "0.1.0")  # the same version: applied (a fix of the schema)
    assert not crds.newer("0.1.0", "0.2.0")
    assert not crds.newer("", "0.1.0")  # unmarked (Helm's first install): applied
    assert not crds.newer("garbage", "0.1.0")
    assert crds.newer("0.2.0rc1", "0.1.0")
