from __future__ import annotations

import hashlib
import json
import tarfile
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from addon_agent import bundle_render as rendered
from addon_agent.bundle_render import BUNDLE_FILE, MANIFEST_FILE, RUNTIMES_FILE, bundle_path
from addon_agent.io import bundle_source
from addon_agent.io.planner import Planner
from addon_agent.pure import planning
from addon_agent.pure.planning import ClusterFacts
from addon_agent.stacks import KSERVE, MODELMESH
from addon_api.platform import ManifestsSource
from addon_api.spoke import ServingPlatformSpec

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: x}\n"


def test_rendered_bundle(tmp_path: Path) -> None:
    target = bundle_path(tmp_path, KSERVE)
    target.mkdir(parents=True)
    (target / BUNDLE_FILE).write_text(CM % "a")
    (target / RUNTIMES_FILE).write_text(CM % "runtime")
    text, stack = bundle_source.load(KSERVE, tmp_path, None, tmp_path / "cache")
    assert "name: a" in text and "name: runtime" in text and stack == KSERVE


def test_stacks_with_builtin_runtimes_need_them_rendered() -> None:
    # KServe's ClusterServingRuntimes (upstream's config/runtimes) as ModelMesh's
    assert (KSERVE.runtimes, MODELMESH.runtimes) == ("runtimes", "runtimes")


def test_rendered_bundle_with_runtimes(tmp_path: Path) -> None:
    target = bundle_path(tmp_path, MODELMESH)
    target.mkdir(parents=True)
    (target / BUNDLE_FILE).write_text(CM % "a")
    with pytest.raises(bundle_source.BundleError, match="no rendered runtimes"):
        bundle_source.load(MODELMESH, tmp_path, None, tmp_path / "cache")
    (target / RUNTIMES_FILE).write_text(CM % "runtime")
    text, stack = bundle_source.load(MODELMESH, tmp_path, None, tmp_path / "cache")
    assert "name: a" in text and "name: runtime" in text and stack == MODELMESH
    # a devFlags.manifests directory in the rendered layout brings its runtimes along
    source = ManifestsSource(uri=f"file://{target}")
    text, stack = bundle_source.load(MODELMESH, tmp_path, source, tmp_path / "cache")
    assert "name: runtime" in text and stack.version == "custom"


def test_missing_rendered_bundle_says_how_to_render(tmp_path: Path) -> None:
    with pytest.raises(bundle_source.BundleError, match="bundle_render"):
        bundle_source.load(KSERVE, tmp_path, None, tmp_path / "cache")


def test_plain_directory_with_context_dir_and_source_path(tmp_path: Path) -> None:
    overlay = tmp_path / "repo" / "config" / "overlay"
    overlay.mkdir(parents=True)
    (overlay / "b.yaml").write_text(CM % "b")
    (overlay / "a.yml").write_text(CM % "a")
    (overlay / "notes.txt").write_text("ignored")
    source = ManifestsSource(
        uri=f"file://{tmp_path / 'repo'}", contextDir="config", sourcePath="overlay"
    )
    text, stack = bundle_source.load(KSERVE, tmp_path, source, tmp_path / "cache")
    assert text.index("name: a") < text.index("name: b") and "ignored" not in text
    assert stack.version == "custom" and stack.platform == "KServe"


def test_tarball_with_manifest_version(tmp_path: Path) -> None:
    root = tmp_path / "src" / "bundle"
    root.mkdir(parents=True)
    (root / BUNDLE_FILE).write_text(CM % "t")
    (root / MANIFEST_FILE).write_text('{"version": "v9.9.9"}')
    archive = tmp_path / "b.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(root, arcname="top")
    source = ManifestsSource(uri=f"file://{archive}")
    text, stack = bundle_source.load(KSERVE, tmp_path, source, tmp_path / "cache")
    assert "name: t" in text and stack.version == "v9.9.9"


def test_paths_may_not_leave_the_bundle(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    with pytest.raises(bundle_source.BundleError, match="leaves"):
        bundle_source._inside(tmp_path / "repo", "../etc")


def test_unsupported_scheme_and_missing_path(tmp_path: Path) -> None:
    with pytest.raises(bundle_source.BundleError, match="unsupported"):
        bundle_source.fetch("ftp://x/y.tgz", tmp_path)
    with pytest.raises(bundle_source.BundleError, match="no such"):
        bundle_source.fetch("file:///does/not/exist", tmp_path)


def test_bundle_render_falls_back_to_standalone_kustomize(monkeypatch: Any) -> None:
    from addon_agent import bundle_render

    found = {"kubectl": None, "kustomize": "/usr/local/bin/kustomize"}
    monkeypatch.setattr(bundle_render.shutil, "which", lambda name: found[name])
    assert bundle_render.kustomize_command() == ["kustomize", "build"]
    found["kustomize"] = None
    with pytest.raises(bundle_render.RenderError, match="neither kubectl nor kustomize"):
        bundle_render.kustomize_command()
    found["kubectl"] = "/usr/bin/kubectl"
    assert bundle_render.kustomize_command() == ["kubectl", "kustomize"]


def test_render_cache_is_keyed_by_how_bundles_are_rendered(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A changed renderer or stack pin renders afresh into its own directory; an unchanged
    one reuses its bundles; the bundles rendered the old way stay for whoever uses them."""
    import dataclasses

    from addon_agent import bundle_render

    renders: list[Path] = []

    def fake_render(out: Path) -> list[Path]:
        renders.append(out)
        for stack in bundle_render.CARRIED:
            target = bundle_path(out, stack)
            target.mkdir(parents=True)
            (target / MANIFEST_FILE).write_text("{}")
        return []

    monkeypatch.setattr(bundle_render, "render", fake_render)
    first = bundle_render.render_cached(tmp_path)
    assert first == tmp_path / bundle_render.render_key()
    assert (bundle_path(first, KSERVE) / MANIFEST_FILE).is_file()
    assert bundle_render.render_cached(tmp_path) == first and len(renders) == 1
    changed = tuple(dataclasses.replace(s, runtimes="") if s.platform == "KServe" else s
                    for s in bundle_render.CARRIED)
    monkeypatch.setattr(bundle_render, "CARRIED", changed)
    second = bundle_render.render_cached(tmp_path)
    assert second != first and len(renders) == 2
    assert (bundle_path(first, KSERVE) / MANIFEST_FILE).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, second.name])


def test_bundle_render_command_renders_into_the_cache(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    from addon_agent import bundle_render

    monkeypatch.setattr(bundle_render, "render_cached", lambda cache: cache / "key")
    assert bundle_render.main(["--cache", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "key")
    with pytest.raises(SystemExit):
        bundle_render.main(["--cache", str(tmp_path), "--out", str(tmp_path)])


def _tarball(tmp_path: Path, body: str = CM % "t") -> tuple[Path, str]:
    import hashlib

    root = tmp_path / "src" / "bundle"
    root.mkdir(parents=True, exist_ok=True)
    (root / "objects.yaml").write_text(body)
    archive = tmp_path / "b.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(root, arcname="top")
    return archive, hashlib.sha256(archive.read_bytes()).hexdigest()


class _Response:
    """What urllib.request.urlopen returns, from bytes."""

    def __init__(self, data: bytes, length: str | None = None) -> None:
        import io

        self._data = io.BytesIO(data)
        self.headers = {"Content-Length": length} if length is not None else {}

    def read(self, n: int = -1) -> bytes:
        return self._data.read(n)

    def __enter__(self) -> _Response:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _serve(monkeypatch: Any, data: bytes, length: str | None = None) -> list[str]:
    calls: list[str] = []

    def urlopen(url: str, timeout: float) -> _Response:
        calls.append(url)
        return _Response(data, length)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    return calls


URL = "https://bundles.example.com/b.tgz"


def test_https_tarball_is_verified_then_cached_by_digest(tmp_path: Path, monkeypatch: Any) -> None:
    archive, digest = _tarball(tmp_path)
    calls = _serve(monkeypatch, archive.read_bytes())
    cache = tmp_path / "cache"
    source = ManifestsSource(uri=URL, sha256=digest)
    text, _ = bundle_source.load(KSERVE, tmp_path, source, cache)
    assert "name: t" in text and (cache / f"{digest}.tar.gz").is_file()
    bundle_source.load(KSERVE, tmp_path, source, cache)
    assert calls == [URL]  # the verified tarball is reused
    assert not list(cache.glob("*.part"))


def test_https_digest_mismatch_uses_nothing_and_leaves_nothing(
    tmp_path: Path, monkeypatch: Any
) -> None:
    archive, _ = _tarball(tmp_path)
    _serve(monkeypatch, archive.read_bytes())
    cache = tmp_path / "cache"
    with pytest.raises(bundle_source.BundleError, match="sha256 digest mismatch"):
        bundle_source.fetch(URL, cache, "f" * 64)
    assert sorted(p.name for p in cache.iterdir()) == []


def test_https_without_digest_is_refused(tmp_path: Path, monkeypatch: Any) -> None:
    calls = _serve(monkeypatch, b"")
    with pytest.raises(bundle_source.BundleError, match=r"needs devFlags.manifests.sha256"):
        bundle_source.fetch(URL, tmp_path)
    assert calls == []


def test_plain_http_is_refused(tmp_path: Path) -> None:
    with pytest.raises(bundle_source.BundleError, match="unsupported scheme 'http'"):
        bundle_source.fetch("http://example.com/b.tgz", tmp_path, "0" * 64)


@pytest.mark.parametrize("announce", [True, False])
def test_too_large_download_is_refused(
    tmp_path: Path, monkeypatch: Any, announce: bool
) -> None:
    monkeypatch.setattr(bundle_source, "MAX_BUNDLE_BYTES", 1000)
    monkeypatch.setattr(bundle_source, "CHUNK", 100)
    data = b"x" * 1001
    _serve(monkeypatch, data, str(len(data)) if announce else None)
    cache = tmp_path / "cache"
    with pytest.raises(bundle_source.BundleError, match="too large"):
        bundle_source.fetch(URL, cache, "0" * 64)
    assert list(cache.iterdir()) == []


def test_local_tarball_with_digest_is_verified(tmp_path: Path) -> None:
    archive, digest = _tarball(tmp_path)
    ok = ManifestsSource(uri=f"file://{archive}", sha256=digest)
    text, _ = bundle_source.load(KSERVE, tmp_path, ok, tmp_path / "cache")
    assert "name: t" in text
    bad = ManifestsSource(uri=f"file://{archive}", sha256="0" * 64)
    with pytest.raises(bundle_source.BundleError, match="digest mismatch"):
        bundle_source.load(KSERVE, tmp_path, bad, tmp_path / "cache2")


def test_kinds_off_the_allowlist_refuse_the_bundle() -> None:
    ok = [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "c"}},
          {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m"}}]
    bundle_source.check_kinds(ok)
    bad = [*ok, {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "miner"}},
           {"apiVersion": "example.com/v1", "kind": "ConfigMap", "metadata": {"name": "x"}}]
    with pytest.raises(bundle_source.BundleError) as err:
        bundle_source.check_kinds(bad)
    assert "DaemonSet miner" in str(err.value) and "ConfigMap x (example.com/v1)" in str(err.value)
    assert "nothing was applied" in str(err.value)


def _rendered_with_record(root: Path, objects_text: str) -> str:
    """A rendered KServe bundle under ``root`` (stack and runtimes) whose objects record holds
    the objects of ``objects_text`` under the sha256 of the text the agent installs; that
    text."""
    target = bundle_path(root, KSERVE)
    target.mkdir(parents=True)
    (target / BUNDLE_FILE).write_text(CM % "a")
    (target / RUNTIMES_FILE).write_text(CM % "runtime")
    text = rendered.installed_text(CM % "a", CM % "runtime")
    record = json.loads(rendered.objects_record(objects_text) or "{}")
    record["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    (target / rendered.OBJECTS_FILE).write_text(json.dumps(record))
    return text


def test_rendered_objects_are_those_of_the_text_they_were_stored_for(tmp_path: Path) -> None:
    text = _rendered_with_record(tmp_path, rendered.installed_text(CM % "a", CM % "runtime"))
    loaded, _ = bundle_source.load(KSERVE, tmp_path, None, tmp_path / "cache")
    assert loaded == text
    directory = bundle_path(tmp_path, KSERVE)
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert bundle_source.rendered_objects(directory, digest) == planning.parse_bundle(text)
    assert bundle_source.rendered_objects(directory, "0" * 64) is None  # another text
    (directory / rendered.OBJECTS_FILE).write_text("{not json")
    assert bundle_source.rendered_objects(directory, digest) is None
    (directory / rendered.OBJECTS_FILE).write_text(json.dumps({"sha256": digest, "objects": ["x"]}))
    assert bundle_source.rendered_objects(directory, digest) is None
    (directory / rendered.OBJECTS_FILE).unlink()
    assert bundle_source.rendered_objects(directory, digest) is None


def test_no_record_where_json_would_change_the_objects() -> None:
    assert rendered.objects_record(CM % "a") is not None
    # YAML reads an unquoted date as a date, which JSON has no type for
    assert rendered.objects_record(CM % "a" + "data: {since: 2026-12-06}\n") is None


class _Facts:
    def facts(self) -> ClusterFacts:
        return ClusterFacts()


def _planner(root: Path) -> Planner:
    return Planner(None, _Facts(), root, root / "cache", "agent-ns", 8080)  # type: ignore[arg-type]


def _config_maps(plan: planning.Plan) -> set[str]:
    return {o["metadata"]["name"] for o in plan.objects if o["kind"] == "ConfigMap"}


def test_the_planner_takes_a_rendered_bundles_objects_from_its_record(tmp_path: Path) -> None:
    # A record whose objects differ from the text shows which one the plan came from.
    _rendered_with_record(tmp_path, CM % "from-the-record")
    spec = ServingPlatformSpec.model_validate({"platform": "KServe", "version": KSERVE.version})
    assert "from-the-record" in _config_maps(_planner(tmp_path).build_plan(spec))
    # A record of another text is not used: the text is parsed.
    (bundle_path(tmp_path, KSERVE) / BUNDLE_FILE).write_text(CM % "b")
    assert {"b", "runtime"} <= _config_maps(_planner(tmp_path).build_plan(spec))


def test_a_devflags_bundle_is_parsed_even_beside_a_matching_record(tmp_path: Path) -> None:
    _rendered_with_record(tmp_path / "own", CM % "from-the-record")
    user = bundle_path(tmp_path / "own", KSERVE)  # the same files, named by devFlags
    spec = ServingPlatformSpec.model_validate({
        "platform": "KServe", "version": KSERVE.version,
        "devFlags": {"manifests": {"uri": f"file://{user}"}}})
    names = _config_maps(_planner(tmp_path / "own").build_plan(spec))
    assert "from-the-record" not in names and "a" in names
