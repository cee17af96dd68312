"""``make release`` against a real OCI registry: the image and the chart pinned to its digest.

Not part of ``make test`` (marker ``image``): it needs podman and the image ``make image``
builds; ``make image-test`` runs it. The registry is distribution's (``registry``, built from
the Go module proxy for this test only), on a loopback port, over plain HTTP. The release pushes
the image with podman and the chart with helm (testbed/release.py); the test then reads both
back from the registry as a user would: the image's manifest by the digest the chart names, and
the chart pulled with helm, whose manager and agents run that digest.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from testbed import build, release
from testbed.processes import Process, free_port
from testbed.support import podman as pm

pytestmark = [pytest.mark.image, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``127.0.0.1:<port>``: distribution's registry, storing under a temporary directory."""
    build.build_all(["registry"])
    root = tmp_path_factory.mktemp("registry")
    port = free_port()
    config = root / "config.yml"
    config.write_text(yaml.safe_dump({
        "version": 0.1, "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(root / "data")}},
        "http": {"addr": f"127.0.0.1:{port}"},
    }))
    proc = Process("registry", [str(build.binary("registry")), "serve", str(config)],
                   root).start()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2)
                break
            except OSError:
                proc.check()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        proc.stop()


def test_a_release_pushes_the_image_and_a_chart_that_pins_its_digest(
        registry: str, tmp_path: Path) -> None:
    out = tmp_path / "dist"
    source = "https://code.example.org/model-serving-addon"
    pushed = release.release(f"{registry}/ms", source=source, source_image=pm.IMAGE,
                             podman=[pm.PODMAN], helm=build.binary("helm"), out=out,
                             plain_http=True)
    assert json.loads((out / "release.json").read_text())["image_digest"] == pushed.image_digest
    assert pushed.image == f"{registry}/ms/model-serving-addon:{pushed.version}"
    # The image is in the registry under the digest the chart names.
    request = urllib.request.Request(
        f"http://{registry}/v2/ms/model-serving-addon/manifests/{pushed.image_digest}",
        method="HEAD", headers={"Accept": ", ".join((
            "application/vnd.oci.image.manifest.v1+json",
            "application/vnd.docker.distribution.manifest.v2+json"))})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.headers["Docker-Content-Digest"] == pushed.image_digest
    # The chart, pulled back as a user would, runs that image by digest, on the hub and on
    # every cluster (the AddOnTemplate's IMAGE variable).
    helm = str(build.binary("helm"))
    pulled = tmp_path / "pulled"
    subprocess.run([helm, "pull", f"oci://{registry}/ms/charts/model-serving-addon",
                    "--version", pushed.version, "--plain-http", "--untar", "-d", str(pulled)],
                   check=True, capture_output=True, text=True, timeout=120)
    chart = pulled / "model-serving-addon"
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    assert (meta["version"], meta["home"], meta["sources"]) == (pushed.version, source, [source])
    rendered = subprocess.run(
        [helm, "template", "msa", str(chart), "--kube-version", "v1.34.0"],
        check=True, capture_output=True, text=True, timeout=120).stdout
    pinned = f"{registry}/ms/model-serving-addon@{pushed.image_digest}"
    objs = [o for o in yaml.safe_load_all(rendered) if o]
    manager = next(o for o in objs if o["kind"] == "Deployment")
    assert manager["spec"]["template"]["spec"]["containers"][0]["image"] == pinned
    agent_config = next(o for o in objs if o["kind"] == "ConfigMap"
                        and o["metadata"]["name"].endswith("-agent-config"))
    variables = yaml.safe_load(agent_config["data"]["spec.yaml"])["customizedVariables"]
    assert {"name": "IMAGE", "value": pinned} in variables
