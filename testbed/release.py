"""A release (``make release``): the image and the chart pinned to its digest, both pushed.

The image goes by podman, the chart as an OCI artifact by helm, both at the chart's version
(issue 32, item 6).

One version names the chart (``version``), the image (``appVersion``) and the Python package
(pyproject.toml): :func:`version` refuses to release when they differ. The image is the one
``make image`` built; it is tagged ``<registry>/model-serving-addon:<version>`` and pushed, and
the digest the registry gives back goes into a copy of the chart's values (``image.digest``,
with ``image.repository`` the pushed repository), so the released chart pulls exactly that
image, on the hub and through the AddOnTemplate on every cluster. The chart is packaged by
helm and pushed to ``oci://<registry>/charts``. What was pushed is written to
``dist/release.json``.

The chart's ``home`` and ``sources`` (where a user finds the project and its code) are the
address the release is published from, given to the release (``SOURCE=``) and written into the
packaged Chart.yaml by :func:`stamped_chart`: the repository's Chart.yaml names no address,
because none is public yet, and a made-up one would send users nowhere.

The pure parts (:func:`version`, :func:`pinned_values`, :func:`stamped_chart`) have unit
tests; the whole runs against a real registry (distribution's, built from the Go module proxy)
in tests/image/test_release.py.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "model-serving-addon"
IMAGE_NAME = "model-serving-addon"
DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")


class ReleaseError(RuntimeError):
    """A release step failed or its inputs disagree; the message says which."""


def version(chart_yaml: str, pyproject: str) -> str:
    """The release's version: the chart's ``version``. Pure.

    It must equal the chart's ``appVersion`` and the Python package's version; raises
    ReleaseError naming the ones that differ.
    """
    chart = yaml.safe_load(chart_yaml)
    found = {"Chart.yaml version": str(chart["version"]),
             "Chart.yaml appVersion": str(chart["appVersion"]),
             "pyproject.toml project.version": str(tomllib.loads(pyproject)["project"]["version"])}
    if len(set(found.values())) != 1:
        raise ReleaseError("one version names the chart, the image and the package, but "
                           + ", ".join(f"{k} is {v}" for k, v in found.items()))
    return found["Chart.yaml version"]


def pinned_values(values_yaml: str, repository: str, tag: str, digest: str) -> str:
    """``values.yaml`` with the image's repository, tag and digest set. Pure.

    Only those three lines of the ``image:`` block change, so every comment (the chart's
    README is made from them) stays. Raises ReleaseError when the digest is not a sha256
    digest or a line is missing.
    """
    if not DIGEST.match(digest):
        raise ReleaseError(f"not an image digest: {digest!r}")
    lines = values_yaml.splitlines(keepends=True)
    try:
        start = lines.index("image:\n")
    except ValueError:
        raise ReleaseError("values.yaml has no top-level image: block") from None
    wanted = {"repository": repository, "tag": tag, "digest": digest}
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line.strip() and not line.startswith(" "):
            break
        key = line.strip().split(":", 1)[0]
        if line.startswith("  ") and not line.startswith("   ") and key in wanted:
            lines[i] = f"  {key}: {json.dumps(wanted.pop(key))}\n"
    if wanted:
        raise ReleaseError(f"values.yaml's image block lacks {', '.join(sorted(wanted))}")
    return "".join(lines)


def stamped_chart(chart_yaml: str, source: str) -> str:
    """Chart.yaml with ``home`` and ``sources`` set to ``source``, the project's address. Pure.

    The address must be an ``https://`` URL with a host (helm shows it on ``helm show chart``
    and Artifact Hub links it); raises ReleaseError otherwise, or when the chart already names
    a ``home`` or ``sources`` (one place decides them: the release). The lines are appended, so
    every comment of the chart stays.
    """
    if not re.fullmatch(r"https://[A-Za-z0-9.-]+(:[0-9]+)?(/[^\s]*)?", source):
        raise ReleaseError(f"the source address must be an https:// URL, not {source!r}")
    chart = yaml.safe_load(chart_yaml)
    named = sorted(k for k in ("home", "sources") if k in chart)
    if named:
        raise ReleaseError(f"Chart.yaml already names {', '.join(named)}: the release sets them")
    text = chart_yaml if chart_yaml.endswith("\n") else chart_yaml + "\n"
    return text + f"home: {json.dumps(source)}\nsources:\n  - {json.dumps(source)}\n"


@dataclass(frozen=True)
class Released:
    """What a release pushed: the image and the chart, each by reference and digest."""

    version: str
    image: str
    image_digest: str
    chart: str
    chart_digest: str


def _run(argv: Sequence[str], what: str) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=1800, check=False)
    if proc.returncode != 0:
        raise ReleaseError(f"{what} failed ({shlex.join(argv)}):\n{proc.stdout}{proc.stderr}")
    return proc.stdout + proc.stderr


def release(registry: str, *, source: str, source_image: str, podman: Sequence[str],
            helm: Path, out: Path, plain_http: bool = False) -> Released:
    """Push ``source_image`` and the chart pinned to it to ``registry`` (``host[:port]/path``).

    ``source`` is the project's address, the packaged chart's ``home`` and ``sources``
    (:func:`stamped_chart`); it is checked before anything is pushed.
    ``podman`` is the podman command (with global flags only: ``tag`` and ``push`` take no
    build or run flags); ``plain_http`` talks HTTP to the registry (a local one). Writes the
    chart package and ``release.json`` into ``out``.
    """
    ver = version((CHART / "Chart.yaml").read_text(), (REPO / "pyproject.toml").read_text())
    chart_yaml = stamped_chart((CHART / "Chart.yaml").read_text(), source)
    repository = f"{registry}/{IMAGE_NAME}"
    image = f"{repository}:{ver}"
    out.mkdir(parents=True, exist_ok=True)
    _run([*podman, "tag", source_image, image], "tagging the image")
    digest_file = out / "image.digest"
    _run([*podman, "push", *(["--tls-verify=false"] if plain_http else []),
          f"--digestfile={digest_file}", image], "pushing the image")
    digest = digest_file.read_text().strip()
    with tempfile.TemporaryDirectory() as tmp:
        chart = Path(tmp) / CHART.name
        shutil.copytree(CHART, chart)
        values = chart / "values.yaml"
        values.write_text(pinned_values(values.read_text(), repository, ver, digest))
        (chart / "Chart.yaml").write_text(chart_yaml)
        _run([str(helm), "package", str(chart), "--destination", str(out)], "helm package")
    package = out / f"{CHART.name}-{ver}.tgz"
    pushed = _run([str(helm), "push", str(package), f"oci://{registry}/charts",
                   *(["--plain-http"] if plain_http else [])], "helm push")
    found = re.search(r"Digest:\s*(sha256:[a-f0-9]{64})", pushed)
    if not found:
        raise ReleaseError(f"helm push printed no digest:\n{pushed}")
    released = Released(ver, image, digest, f"oci://{registry}/charts/{CHART.name}:{ver}",
                        found.group(1))
    (out / "release.json").write_text(json.dumps(asdict(released), indent=2) + "\n")
    return released


def main(argv: Sequence[str]) -> int:
    """``python -m testbed.release --registry HOST/PATH`` (``make release``)."""
    from testbed.build import binary

    parser = argparse.ArgumentParser(prog="python -m testbed.release")
    parser.add_argument("--registry", required=True,
                        help="where to push: host[:port]/path (image and charts below it)")
    parser.add_argument("--source", required=True,
                        help="the project's https:// address: the chart's home and sources")
    parser.add_argument("--image", default="localhost/model-serving-addon:dev",
                        help="the image make image built")
    parser.add_argument("--podman", default="podman", help="podman command and its flags")
    parser.add_argument("--out", type=Path, default=REPO / "dist")
    parser.add_argument("--plain-http", action="store_true",
                        help="the registry speaks HTTP (a local one)")
    args = parser.parse_args(list(argv))
    try:
        released = release(args.registry, source=args.source, source_image=args.image,
                           podman=shlex.split(args.podman), helm=binary("helm"), out=args.out,
                           plain_http=args.plain_http)
    except ReleaseError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(json.dumps(asdict(released), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
