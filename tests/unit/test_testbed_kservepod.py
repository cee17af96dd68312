"""The release the testbed runs for a KServe controller Deployment (testbed.kservepod)."""

from __future__ import annotations

from typing import Any

import pytest

from testbed import versions
from testbed.kservepod import release_of


def _deployment(*containers: tuple[str, str]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"containers": [
        {"name": name, "image": image} for name, image in containers]}}}}


@pytest.mark.parametrize("release", versions.KSERVE_ALL)
def test_the_manager_containers_tag_is_the_release(release: str) -> None:
    dep = _deployment(("kube-rbac-proxy", "quay.io/brancz/kube-rbac-proxy:v0.18.0"),
                      ("manager", f"kserve/kserve-controller:{release}"))
    assert release_of(dep) == release


@pytest.mark.parametrize("image", [
    "kserve/kserve-controller",  # no tag
    "kserve/kserve-controller:v0.1.0",  # a release the testbed does not build
    "registry.local:5000/kserve/kserve-controller",  # the port is not a tag
    "kserve/kserve-controller@sha256:" + "0" * 64,
])
def test_an_image_the_testbed_cannot_run_has_no_release(image: str) -> None:
    assert release_of(_deployment(("manager", image))) == ""


def test_only_the_manager_container_counts() -> None:
    release = versions.KSERVE_ALL[0]
    assert release_of(_deployment(("sidecar", f"kserve/kserve-controller:{release}"))) == ""
    assert release_of({}) == ""
