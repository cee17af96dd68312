"""Where a stack's manifests come from: the rendered bundle, or ``devFlags.manifests``.

``devFlags.manifests.uri`` forms: ``file:///dir``, ``file:///bundle.tar.gz`` and
``https://host/bundle.tar.gz``. An https tarball needs ``sha256``: it is downloaded into a
temporary file (at most :data:`MAX_BUNDLE_BYTES`), its digest is checked before anything reads
it, and only then is it renamed into the cache (named by its digest); a ``file:///`` tarball
with ``sha256`` is checked the same way. Inside the bundle, ``contextDir`` then ``sourcePath``
select the directory; a directory holding a rendered ``bundle.yaml`` is used as it is (with
its ``runtimes.yaml`` if present), a directory with a ``kustomization.yaml`` is rendered with
the pinned standalone ``kustomize build`` (:mod:`addon_agent.kustomize`, shipped in the image),
any other directory contributes its ``*.yaml``/``*.yml`` files.

Every object of a bundle must be of a kind on :data:`ALLOWED_KINDS` (the kinds the pinned
KServe and ModelMesh bundles hold): :func:`check_kinds` refuses the whole bundle otherwise.

The built-in serving runtimes of a rendered bundle (``runtimes.yaml``) are appended to its
objects; planning keeps or drops every serving runtime of the bundle as the spec says.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import tarfile
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, BinaryIO

from addon_agent import kustomize
from addon_agent.bundle_render import (
    BUNDLE_FILE,
    MANIFEST_FILE,
    OBJECTS_FILE,
    RUNTIMES_FILE,
    bundle_path,
    installed_text,
)
from addon_agent.stacks import Stack
from addon_api.hashing import short_hash
from addon_api.platform import ManifestsSource

DOWNLOAD_TIMEOUT = 60
CUSTOM_VERSION = "custom"
MAX_BUNDLE_BYTES = 64 * 1024 * 1024
"""Largest devFlags.manifests tarball the agent downloads or reads (64 MiB)."""
CHUNK = 1024 * 1024

ALLOWED_KINDS: frozenset[tuple[str, str]] = frozenset({
    ("", "ConfigMap"),
    ("", "Namespace"),
    ("", "Secret"),
    ("", "Service"),
    ("", "ServiceAccount"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apps", "Deployment"),
    ("cert-manager.io", "Certificate"),
    ("cert-manager.io", "Issuer"),
    ("networking.k8s.io", "NetworkPolicy"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("serving.kserve.io", "ClusterServingRuntime"),
    ("serving.kserve.io", "ClusterStorageContainer"),
    ("serving.kserve.io", "ServingRuntime"),
})
"""(API group, kind) a bundle may hold: those of the pinned KServe and ModelMesh bundles
(tests/integration/test_agent_bundles.py checks every object of them), plus the namespaced
ServingRuntime. Anything else (a DaemonSet, a Pod, an APIService, ...) refuses the bundle."""


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
            if hasattr(tarfile, "data_filter"):
                tar.extractall(into, filter="data")
            else:  # Python before 3.11.4: no extraction filters; refuse what "data" would
                for member in tar.getmembers():
                    if not (member.isfile() or member.isdir()):
                        raise BundleError(f"{member.name!r}: only files and directories")
                    _inside(into, member.name)
                tar.extractall(into)  # every member checked above
    except (tarfile.TarError, OSError) as err:
        raise BundleError(f"cannot extract {tarball.name}: {err}") from err
    entries = list(into.iterdir())
    # A tarball with one top-level directory (the usual GitHub archive) is entered.
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else into


def _copy_checked(source: BinaryIO, to: Path, sha256: str | None, what: str) -> None:
    """Copy at most MAX_BUNDLE_BYTES to ``to``, then check the digest (``to`` removed if bad)."""
    digest = hashlib.sha256()
    size = 0
    try:
        with to.open("wb") as out:
            while chunk := source.read(CHUNK):
                size += len(chunk)
                if size > MAX_BUNDLE_BYTES:
                    raise BundleError(
                        f"{what} is too large: more than {MAX_BUNDLE_BYTES} bytes"
                    )
                digest.update(chunk)
                out.write(chunk)
        if sha256 is not None and digest.hexdigest() != sha256:
            raise BundleError(
                f"{what}: sha256 digest mismatch: got {digest.hexdigest()}, want {sha256}"
                " (devFlags.manifests.sha256); nothing of it is used"
            )
    except BaseException:
        to.unlink(missing_ok=True)
        raise


def _download(url: str, to: Path, sha256: str) -> None:
    """Download ``url`` into a temporary file next to ``to``, verify it, rename it to ``to``."""
    to.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=to.parent, suffix=".part")
    os.close(fd)
    tmp = Path(name)
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT) as response:
            length = response.headers.get("Content-Length")
            if length is not None and length.isdigit() and int(length) > MAX_BUNDLE_BYTES:
                raise BundleError(
                    f"{url} is too large: {length} bytes, more than {MAX_BUNDLE_BYTES}"
                )
            _copy_checked(response, tmp, sha256, url)
        os.replace(tmp, to)
    except OSError as err:
        raise BundleError(f"cannot download {url}: {err}") from err
    finally:
        tmp.unlink(missing_ok=True)


def _verified_copy(path: Path, cache: Path, sha256: str) -> Path:
    """A verified copy of a local tarball in ``cache`` (named by its digest)."""
    target = cache / f"{sha256}.tar.gz"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=cache, suffix=".part")
    os.close(fd)
    tmp = Path(name)
    try:
        with path.open("rb") as source:
            _copy_checked(source, tmp, sha256, str(path))
        os.replace(tmp, target)
    except OSError as err:
        raise BundleError(f"cannot read {path}: {err}") from err
    finally:
        tmp.unlink(missing_ok=True)
    return target


def fetch(uri: str, cache: Path, sha256: str | None = None) -> Path:
    """Local directory holding the bundle at ``uri`` (tarballs extracted into ``cache``).

    An https tarball needs ``sha256``; a tarball is used only once its digest matched.
    """
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme == "file":
        path = Path(urllib.parse.unquote(parsed.path))
        if path.is_dir():
            return path
        if not path.is_file():
            raise BundleError(f"{uri}: no such file or directory")
        if path.stat().st_size > MAX_BUNDLE_BYTES:
            raise BundleError(f"{uri} is too large: more than {MAX_BUNDLE_BYTES} bytes")
        tarball = _verified_copy(path, cache, sha256) if sha256 else path
    elif parsed.scheme == "https":
        if not sha256:
            raise BundleError(
                f"{uri}: an https bundle needs devFlags.manifests.sha256 (its digest)"
            )
        # Content-addressed: a file of this name was renamed here only after it matched.
        tarball = cache / f"{sha256}.tar.gz"
        if not tarball.exists():
            _download(uri, tarball, sha256)
    else:
        raise BundleError(f"{uri}: unsupported scheme {parsed.scheme!r} (file:// or https://)")
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
        return installed_text(text, runtimes.read_text())
    if runtimes_required:
        raise BundleError(
            f"no rendered runtimes at {runtimes}; run python -m addon_agent.bundle_render"
        )
    return text


def rendered_objects(directory: Path, digest: str) -> list[dict[str, Any]] | None:
    """The stored objects of the rendered bundle in ``directory``, if of the text ``digest``.

    :func:`~addon_agent.bundle_render.render` stores them
    (:data:`~addon_agent.bundle_render.OBJECTS_FILE`) with the sha256 of the text the agent
    installs; None when there is no record, it is of another text or cannot be read: the
    caller parses the text then.
    """
    try:
        record = json.loads((directory / OBJECTS_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("sha256") != digest:
        return None
    objects = record.get("objects")
    if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
        return None
    return objects


def check_kinds(objects: list[dict[str, Any]]) -> None:
    """Refuse a bundle holding an object whose (group, kind) is not on ALLOWED_KINDS."""
    refused = []
    for obj in objects:
        api_version = str(obj.get("apiVersion") or "")
        group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
        if (group, str(obj.get("kind"))) not in ALLOWED_KINDS:
            name = (obj.get("metadata") or {}).get("name", "")
            refused.append(f"{obj.get('kind')} {name} ({api_version})")
    if refused:
        more = f" and {len(refused) - 5} more" if len(refused) > 5 else ""
        shown = ", ".join(refused[:5]) + more
        raise BundleError(
            f"the bundle holds kinds the agent does not apply: {shown}; nothing was applied"
        )


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
    root = fetch(manifests.uri, cache, manifests.sha256)
    directory = _inside(_inside(root, manifests.context_dir), manifests.source_path)
    version = CUSTOM_VERSION
    manifest = directory / MANIFEST_FILE
    if manifest.is_file():
        with contextlib.suppress(ValueError):
            version = str(json.loads(manifest.read_text()).get("version", version))[:63]
    if (directory / BUNDLE_FILE).is_file():
        return _rendered(directory, False), dataclasses.replace(stack, version=version)
    return render_dir(directory), dataclasses.replace(stack, version=version)
