"""Every built-in runtime of the carried KServe release, through the pod runner's translation.

The rendered bundle's ClusterServingRuntimes (``runtimes.yaml``): a predictor pod of
``kserve-sklearnserver`` and ``kserve-mlserver`` translates into real servers; every other
runtime (GPU-sized or with no CPU build here) is refused, naming its image, so its pods stay on
kwok's simulated readiness and are never claimed served. The images the testbed stands in for
are the bundle's own, and the servers it installs are the releases those images hold.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from testbed import versions
from testbed.dataplane import envs, pods, podspec
from testbed.dataplane.podspec import Refused, StaticObjects
from testbed.support.dataplane import (
    MLSERVER_RUNTIME,
    bundle_runtimes,
    sklearn_runtime,
    storage_initializer_image,
)

SERVED = {"kserve-sklearnserver", "kserve-mlserver"}


def translate(runtime: dict[str, object]) -> podspec.PodPlan:
    pod = pods.predictor_pod(runtime, "m", "models", "s3://models/m")
    ports = itertools.count(30000)
    return podspec.translate(pod, Path("/pods/m"), StaticObjects(), envs.environments(),
                             lambda: next(ports))


def test_only_the_runtimes_with_a_local_server_are_served(bundles: Path) -> None:
    runtimes = bundle_runtimes(bundles, versions.KSERVE)
    assert set(runtimes) >= SERVED
    served, refused = set(), {}
    for name, runtime in runtimes.items():
        try:
            translate(runtime["spec"])
            served.add(name)
        except Refused as err:
            refused[name] = err
    assert served == SERVED
    for name, err in refused.items():
        image = runtimes[name]["spec"]["containers"][0]["image"]
        assert err.image == image, name
        assert image in str(err) and "simulated" in str(err), name
    # The heavy ones the issue names are among them.
    assert {"kserve-tritonserver", "kserve-vllmserver", "kserve-torchserve",
            "kserve-huggingfaceserver"} <= set(refused)


def test_the_testbeds_runtimes_are_the_bundles(bundles: Path) -> None:
    runtimes = bundle_runtimes(bundles, versions.KSERVE)
    mlserver = runtimes["kserve-mlserver"]["spec"]["containers"]
    # The testbed's copy (for the tests that need no Go module cache) is the bundle's.
    assert len(mlserver) == 1
    assert {k: v for k, v in mlserver[0].items() if k != "securityContext"} == (
        MLSERVER_RUNTIME["containers"][0])
    # MLServer's image is the release the testbed installs.
    assert mlserver[0]["image"].rsplit(":", 1)[1] == versions.MLSERVER
    # The example runtime the demo sends is the bundle's sklearn server, image and args.
    bundled = runtimes["kserve-sklearnserver"]["spec"]["containers"][0]
    example = sklearn_runtime()["containers"][0]
    assert podspec.image_repository(example["image"]) == podspec.image_repository(
        bundled["image"])
    assert example["image"].rsplit(":", 1)[1] == bundled["image"].rsplit(":", 1)[1]
    assert example["args"] == bundled["args"]
    # And it says where the server's metrics are as the bundle's does (the agent's PodMonitor
    # scrapes the port and path these annotations name on the predictor pods).
    assert sklearn_runtime()["annotations"] == runtimes["kserve-sklearnserver"]["spec"][
        "annotations"] == {"prometheus.kserve.io/port": "8080",
                           "prometheus.kserve.io/path": "/metrics"}
    assert translate(runtimes["kserve-sklearnserver"]["spec"]).containers[0].argv == (
        translate(sklearn_runtime()).containers[0].argv)


def test_the_storage_initializer_is_the_bundles(bundles: Path) -> None:
    image = storage_initializer_image(bundles, versions.KSERVE)
    assert image == pods.STORAGE_INITIALIZER_IMAGE
    runner = podspec.runner_for(image)
    assert runner is not None and runner.name == "storage-initializer"


@pytest.mark.parametrize("name", sorted(SERVED))
def test_the_served_runtimes_readiness_is_the_servers_own(bundles: Path, name: str) -> None:
    plan = translate(bundle_runtimes(bundles, versions.KSERVE)[name]["spec"])
    readiness = plan.containers[0].readiness
    assert readiness is not None and readiness.path.startswith("/v2/")
    assert readiness.port == plan.containers[0].ports[8080]
