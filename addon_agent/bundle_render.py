"""Render the upstream stack bundles from the Go module cache.

``python -m addon_agent.bundle_render --out DIR`` writes
``DIR/<platform>/<version>/bundle.yaml`` and ``DIR/<platform>/<version>/manifest.json``
for every stack in :mod:`addon_agent.stacks` at every version the agent carries, and
``runtimes.yaml`` (the built-in serving runtimes) for a stack that ships them; ``--cache
DIR`` renders into ``DIR/<render key>`` once (what the tests and the demo use). Bundles are
build/test artefacts and are never committed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from addon_agent.pure import planning
from addon_agent.stacks import CARRIED, KSERVE, MODELMESH, Stack

BUNDLE_FILE = "bundle.yaml"
MANIFEST_FILE = "manifest.json"
RUNTIMES_FILE = "runtimes.yaml"
OBJECTS_FILE = "objects.json"
"""The objects of a rendered bundle as the agent installs them (:func:`installed_text`),
stored as JSON with that text's sha256 (:func:`objects_record`): the agent reads them
instead of parsing the YAML, which took it 0.6 CPU-seconds for KServe's bundle at each
start (libyaml), where the JSON takes a few hundredths."""


def installed_text(bundle: str, runtimes: str | None) -> str:
    """The text the agent installs from a rendered bundle: the stack, then its runtimes."""
    return bundle if runtimes is None else f"{bundle}\n---\n{runtimes}"


def objects_record(text: str) -> str | None:
    """:data:`OBJECTS_FILE`'s content for an installed text: its sha256 and its objects.

    None when JSON cannot hold the objects as YAML gave them (a timestamp YAML read as a
    date, say): the agent then parses the text, as it does for any bundle without a record.
    """
    objects = planning.parse_bundle(text)
    try:
        encoded = json.dumps(objects)
    except (TypeError, ValueError):
        return None
    if json.loads(encoded) != objects:
        return None
    return json.dumps({"sha256": hashlib.sha256(text.encode()).hexdigest(), "objects": objects})


class RenderError(RuntimeError):
    """A bundle could not be rendered."""


def module_dir(module: str, version: str) -> Path:
    """Directory of ``module@version`` in the Go module cache (downloaded if needed)."""
    proc = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    )
    try:
        info = json.loads(proc.stdout)
    except ValueError as err:
        raise RenderError(f"go mod download {module}@{version}: {proc.stderr.strip()}") from err
    if proc.returncode != 0 or not info.get("Dir"):
        raise RenderError(f"go mod download {module}@{version}: {info.get('Error', proc.stderr)}")
    return Path(info["Dir"])


def kustomize_command() -> list[str]:
    """``kubectl kustomize`` where kubectl exists, else the standalone ``kustomize build``."""
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    raise RenderError("neither kubectl nor kustomize is on PATH: one is needed to render bundles")


def kustomize(directory: Path, *flags: str) -> str:
    """The rendered kustomization in ``directory``."""
    proc = subprocess.run(
        [*kustomize_command(), *flags, str(directory)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RenderError(f"kustomize {directory}: {proc.stderr.strip()}")
    return proc.stdout


def pin_latest_images(text: str, org: str, version: str) -> str:
    """Replace ``<org>/<image>:latest`` by ``<org>/<image>:<version>`` (release pinning)."""
    return re.sub(rf"\b({re.escape(org)}/[a-z0-9._-]+):latest\b", rf"\1:{version}", text)


MLSERVER_IMAGE = "seldonio/mlserver"
"""The image of MLServer, the server of KServe's ``kserve-mlserver`` runtime."""
MLSERVER_METRICS_PORT = "8082"
"""The port MLServer serves its Prometheus metrics on unless ``MLSERVER_METRICS_PORT`` says
another: a server of its own, beside the HTTP (8080) and gRPC ports."""
PROMETHEUS_PORT = "prometheus.kserve.io/port"


def mlserver_metrics_port(text: str) -> str:
    """The runtimes with MLServer's real metrics port in their ``prometheus.kserve.io/port``.

    KServe's ``kserve-mlserver`` runtime annotates its HTTP port (8080), where MLServer serves
    no ``/metrics``: a PodMonitor following the annotation would scrape nothing. A runtime
    whose container runs MLServer and whose annotation names that container's HTTP port gets
    ``MLSERVER_METRICS_PORT`` from its env, else MLServer's default; any other runtime, one
    with no such annotation (not scraped) and a port someone chose on purpose are left as
    they are. Text without such a runtime is returned
    unchanged.
    """
    docs = list(yaml.safe_load_all(text))
    changed = False
    for doc in docs:
        spec = doc.get("spec") if isinstance(doc, dict) else None
        if not isinstance(spec, dict):
            continue
        containers = spec.get("containers") or []
        if not containers or MLSERVER_IMAGE not in str(containers[0].get("image", "")):
            continue
        env = {e.get("name"): str(e.get("value", "")) for e in containers[0].get("env") or []}
        annotations = spec.get("annotations")
        if not isinstance(annotations, dict) or annotations.get(PROMETHEUS_PORT) != env.get(
                "MLSERVER_HTTP_PORT", "8080"):
            continue
        annotations[PROMETHEUS_PORT] = env.get("MLSERVER_METRICS_PORT") or MLSERVER_METRICS_PORT
        changed = True
    if not changed:
        return text
    return yaml.safe_dump_all([d for d in docs if d is not None], sort_keys=False)


def _copy_config(source: Path, into: Path) -> Path:
    target = into / "config"
    shutil.copytree(source / "config", target)
    for path in target.rglob("*"):  # the module cache is read-only; the copy must not be
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def render_kserve(source: Path, stack: Stack = KSERVE) -> str:
    """KServe without Knative/Istio: the ``overlays/standalone/kserve`` overlay."""
    with tempfile.TemporaryDirectory() as tmp:
        config = _copy_config(source, Path(tmp))
        text = kustomize(config / "overlays" / "standalone" / "kserve")
    return pin_latest_images(text, "kserve", stack.version)


def _set_namespace(kustomization: Path, namespace: str) -> None:
    text = kustomization.read_text()
    text = re.sub(r"(?m)^namespace:.*\n", "", text)
    kustomization.write_text(f"namespace: {namespace}\n{text}")


def render_modelmesh(source: Path, stack: Stack = MODELMESH) -> str:
    """ModelMesh Serving: ``config/default`` plus cluster-scope RBAC, in one namespace.

    Upstream's install script edits the namespace of both kustomizations before
    building (the webhook's service namespace is substituted inside ``default``),
    so the render does the same on a copy.
    """
    with tempfile.TemporaryDirectory() as tmp:
        config = _copy_config(source, Path(tmp))
        _set_namespace(config / "default" / "kustomization.yaml", stack.namespace)
        _set_namespace(config / "rbac" / "cluster-scope" / "kustomization.yaml", stack.namespace)
        parts = [
            f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {stack.namespace}\n",
            kustomize(config / "default"),
            kustomize(config / "rbac" / "cluster-scope"),
        ]
    return "---\n".join(parts)


def render_runtimes(source: Path, stack: Stack) -> str:
    """The stack's built-in runtimes: upstream's ``config/<stack.runtimes>`` kustomization.

    Both stacks' (``config/runtimes``) are ClusterServingRuntimes. ModelMesh's are what
    upstream's installer applies in its default cluster-scope mode; the kustomization pulls a
    label transformer from ``config/default``, so it is built without kustomize's load
    restrictions, as upstream's installer does. KServe's are the runtimes of its release's
    cluster resources; their ``kserve/<server>:latest`` images are pinned to the release, as
    upstream's release manifests are, and MLServer's runtime names the port MLServer really
    serves its metrics on (:func:`mlserver_metrics_port`).
    """
    with tempfile.TemporaryDirectory() as tmp:
        config = _copy_config(source, Path(tmp))
        text = kustomize(config / stack.runtimes, "--load-restrictor=LoadRestrictionsNone")
    text = pin_latest_images(text, "kserve", stack.version)
    return mlserver_metrics_port(text) if stack.platform == KSERVE.platform else text


RENDERERS: dict[str, Callable[[Path, Stack], str]] = {
    KSERVE.platform: render_kserve,
    MODELMESH.platform: render_modelmesh,
}


def bundle_path(root: Path, stack: Stack) -> Path:
    """Directory of one stack's rendered bundle under ``root``."""
    return root / stack.platform / stack.version


def render(out: Path, stacks: Sequence[Stack] = CARRIED) -> list[Path]:
    """Render every stack at every carried version into ``out``; return the directories."""
    written = []
    for stack in stacks:
        source = module_dir(stack.module, stack.version)
        text = RENDERERS[stack.platform](source, stack)
        target = bundle_path(out, stack)
        target.mkdir(parents=True, exist_ok=True)
        manifest = {
            "platform": stack.platform,
            "version": stack.version,
            "module": stack.module,
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
        }
        runtimes = render_runtimes(source, stack) if stack.runtimes else None
        if runtimes is not None:
            (target / RUNTIMES_FILE).write_text(runtimes)
            manifest["runtimesSha256"] = hashlib.sha256(runtimes.encode()).hexdigest()
        else:  # an earlier render into the same directory must not leave runtimes behind
            (target / RUNTIMES_FILE).unlink(missing_ok=True)
        manifest["render"] = render_key()
        (target / BUNDLE_FILE).write_text(text)
        record = objects_record(installed_text(text, runtimes))
        if record is not None:
            (target / OBJECTS_FILE).write_text(record)
        else:  # nor an earlier render's objects
            (target / OBJECTS_FILE).unlink(missing_ok=True)
        (target / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
        written.append(target)
    return written


def render_key() -> str:
    """Fingerprint of how bundles are rendered: this module's code and the stack pins.

    Any change to either gives a new key, so a cache of rendered bundles keyed by it
    (:func:`render_cached`) never serves a bundle rendered the old way.
    """
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for stack in sorted(CARRIED, key=lambda s: (s.platform, s.version)):
        digest.update(repr(stack).encode())
    return digest.hexdigest()[:16]


def render_cached(cache: Path) -> Path:
    """Root of the bundles of every stack rendered the current way, under ``cache``.

    The bundles live in ``cache/<render_key()>``, rendered once; a render is written to a
    temporary directory first and then renamed, so a half-written bundle is never used and
    checkouts rendering differently never share (or overwrite) each other's bundles.
    """
    root = cache / render_key()
    if all((bundle_path(root, s) / MANIFEST_FILE).is_file() for s in CARRIED):
        return root
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".render-", dir=cache))
    try:
        render(tmp)
        try:
            tmp.rename(root)
        except OSError:  # rendered meanwhile by someone else: theirs is the same
            if not root.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: render the bundles into ``--out``, or into the cache ``--cache``."""
    parser = argparse.ArgumentParser(prog="python -m addon_agent.bundle_render")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", type=Path, help="root of the rendered bundles")
    where.add_argument(
        "--cache", type=Path, help="cache to render into once per render key (prints the root)"
    )
    args = parser.parse_args(argv)
    if args.cache is not None:
        print(render_cached(args.cache))
        return 0
    for path in render(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
