"""Where a stack's manifests come from: the rendered bundle, or ``devFlags.manifests``.

``devFlags.manifests.uri`` forms: ``file:///dir``, ``file:///bundle.tar.gz`` and
``https://host/bundle.tar.gz``. Inside the bundle, ``contextDir`` then ``sourcePath``
select the directory; a directory holding a rendered ``bundle.yaml`` is used as it is (with
its ``runtimes.yaml`` if present), a directory with a ``kustomization.yaml`` is rendered with
the pinned standalone ``kustomize build`` (:mod:`addon_agent.kustomize`, shipped in the image),
any other directory contributes its ``*.yaml``/``*.yml`` files.

The built-in serving runtimes of a rendered bundle (``runtimes.yaml``) are appended to its
objects; planning keeps or drops every serving runtime of the bundle as the spec says.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import tarfile
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

from addon_agent import kustomize
from addon_agent.bundle_render import BUNDLE_FILE, MANIFEST_FILE, RUNTIMES_FILE, bundle_path
from addon_agent.stacks import Stack
from addon_api.hashing import short_hash
from addon_api.platform import ManifestsSource

DOWNLOAD_TIMEOUT = 60
CUSTOM_VERSION = "custom"


class BundleError(RuntimeError):
    """A bundle could not be found, fetched or rendered; the message says which and why."""


def _inside(root: Path, relative: str | None) -> Path:
    if not relative:
        return root
    target = (root / relative).resolve()
    if root.resolve() not in (target, *target.parents):
        raise BundleError(f"{relative!r} leaves the bundle")
    return target


def _extract(tarball: Path, into: Path) -> Path:
    try:
        with tarfile.open(tarball) as tar:
            tar.extractall(into, filter="data")
    except (tarfile.TarError, OSError) as err:
        raise BundleError(f"cannot extract {tarball.name}: {err}") from err
    entries = list(into.iterdir())
    # A tarball with one top-level directory (the usual GitHub archive) is entered.
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else into


def _download(url: str, to: Path) -> None:
    try:
        with (
            urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT) as response,
            to.open("wb") as out,
        ):
            shutil.copyfileobj(response, out)
    except OSError as err:
        raise BundleError(f"cannot download {url}: {err}") from err


def fetch(uri: str, cache: Path) -> Path:
    """Local directory holding the bundle at ``uri`` (tarballs extracted into ``cache``)."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme == "file":
        path = Path(urllib.parse.unquote(parsed.path))
        if path.is_dir():
            return path
        if not path.is_file():
            raise BundleError(f"{uri}: no such file or directory")
        tarball = path
    elif parsed.scheme in ("https", "http"):
        tarball = cache / (short_hash(uri, length=16) + ".tar.gz")
        if not tarball.exists():
            cache.mkdir(parents=True, exist_ok=True)
            _download(uri, tarball)
    else:
        raise BundleError(f"{uri}: unsupported scheme {parsed.scheme!r}")
    digest = short_hash(f"{tarball}:{tarball.stat().st_mtime_ns}", length=16)
    target = cache / f"x-{digest}"
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=cache))
        _extract(tarball, tmp)
        tmp.rename(target)
    entries = list(target.iterdir())
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else target


def render_dir(directory: Path) -> str:
    """The YAML of a bundle directory (kustomized when it is a kustomization)."""
    if not directory.is_dir():
        raise BundleError(f"{directory} is not a directory")
    if any(
        (directory / n).exists()
        for n in ("kustomization.yaml", "kustomization.yml", "Kustomization")
    ):
        try:
            return kustomize.build(directory)
        except kustomize.KustomizeError as err:
            raise BundleError(str(err)) from err
    files = sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    if not files:
        raise BundleError(f"{directory} holds no YAML files")
    return "\n---\n".join(p.read_text() for p in files)


def _rendered(directory: Path, runtimes_required: bool) -> str:
    text = (directory / BUNDLE_FILE).read_text()
    runtimes = directory / RUNTIMES_FILE
    if runtimes.is_file():
        return f"{text}\n---\n{runtimes.read_text()}"
    if runtimes_required:
        raise BundleError(
            f"no rendered runtimes at {runtimes}; run python -m addon_agent.bundle_render"
        )
    return text


def load(
    stack: Stack, bundle_root: Path, manifests: ManifestsSource | None, cache: Path
) -> tuple[str, Stack]:
    """The YAML to install for ``stack`` and the stack (version) it describes."""
    if manifests is None:
        directory = bundle_path(bundle_root, stack)
        if not (directory / BUNDLE_FILE).is_file():
            raise BundleError(
                f"no rendered bundle at {directory}; run python -m addon_agent.bundle_render"
            )
        return _rendered(directory, bool(stack.runtimes)), stack
    root = fetch(manifests.uri, cache)
    directory = _inside(_inside(root, manifests.context_dir), manifests.source_path)
    version = CUSTOM_VERSION
    manifest = directory / MANIFEST_FILE
    if manifest.is_file():
        with contextlib.suppress(ValueError):
            version = str(json.loads(manifest.read_text()).get("version", version))[:63]
    if (directory / BUNDLE_FILE).is_file():
        return _rendered(directory, False), dataclasses.replace(stack, version=version)
    return render_dir(directory), dataclasses.replace(stack, version=version)
