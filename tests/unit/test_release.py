"""The release's pure steps (testbed/release.py): one version, and the chart pinned to a digest.

The release itself, against a real registry, is tests/image/test_release.py.
"""

from __future__ import annotations

import re

import pytest
import yaml

from testbed import release

DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_the_repository_releases_one_version_for_chart_image_and_package() -> None:
    chart = (release.CHART / "Chart.yaml").read_text()
    pyproject = (release.REPO / "pyproject.toml").read_text()
    assert release.version(chart, pyproject) == yaml.safe_load(chart)["version"]


def test_versions_that_differ_are_named() -> None:
    chart = "version: 0.2.0\nappVersion: 0.1.0\n"
    pyproject = '[project]\nname = "x"\nversion = "0.1.0"\n'
    named = re.escape("Chart.yaml version is 0.2.0, Chart.yaml appVersion is 0.1.0")
    with pytest.raises(release.ReleaseError, match=named):
        release.version(chart, pyproject)


def test_the_chart_is_pinned_to_the_pushed_image_and_keeps_every_comment() -> None:
    text = (release.CHART / "values.yaml").read_text()
    pinned = release.pinned_values(text, "registry.test/ms/model-serving-addon", "0.1.0", DIGEST)
    image = yaml.safe_load(pinned)["image"]
    assert (image["repository"], image["tag"], image["digest"]) == (
        "registry.test/ms/model-serving-addon", "0.1.0", DIGEST)
    before, after = text.splitlines(), pinned.splitlines()
    assert len(before) == len(after)
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert [b.split(":")[0].strip() for _, b in changed] == ["repository", "tag", "digest"]
    assert yaml.safe_load(pinned)["manager"] == yaml.safe_load(text)["manager"]


@pytest.mark.parametrize(("values", "digest", "message"), [
    ("image:\n  repository: r\n  tag: ''\n  digest: ''\n", "latest", "not an image digest"),
    ("manager: {}\n", DIGEST, "no top-level image: block"),
    ("image:\n  repository: r\n  tag: ''\nother:\n  digest: ''\n", DIGEST, "lacks digest"),
])
def test_pinning_refuses_what_it_cannot_do(values: str, digest: str, message: str) -> None:
    with pytest.raises(release.ReleaseError, match=message):
        release.pinned_values(values, "r", "1", digest)


def test_the_released_chart_names_its_home_and_sources_and_keeps_every_comment() -> None:
    text = (release.CHART / "Chart.yaml").read_text()
    stamped = release.stamped_chart(text, "https://code.example.org/ms")
    meta = yaml.safe_load(stamped)
    assert (meta["home"], meta["sources"]) == ("https://code.example.org/ms",
                                               ["https://code.example.org/ms"])
    assert stamped.startswith(text)
    assert {k: v for k, v in meta.items() if k not in ("home", "sources")} == yaml.safe_load(text)


@pytest.mark.parametrize(("chart", "source", "message"), [
    ("name: c\n", "http://code.example.org/ms", "must be an https:// URL"),
    ("name: c\n", "https://", "must be an https:// URL"),
    ("name: c\n", "https://a b", "must be an https:// URL"),
    ("name: c\nhome: https://x.org\n", "https://code.example.org/ms", "already names home"),
])
def test_a_release_refuses_an_address_it_cannot_stand_behind(
        chart: str, source: str, message: str) -> None:
    with pytest.raises(release.ReleaseError, match=message):
        release.stamped_chart(chart, source)
