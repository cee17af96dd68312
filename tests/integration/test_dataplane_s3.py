"""The storage initializer downloads the model from the testbed's S3 server, with credentials.

versitygw (a real S3 server, :mod:`testbed.dataplane.s3`) holds the trained models in the
``models`` bucket; the predictor pod's storage initializer reads its credentials the way
KServe's does: ``STORAGE_CONFIG`` from the ``storage-config`` Secret's entry (what the agent
delivers), through ``kserve-storage``. The right secret serves predictions; a wrong one is
refused by the S3 server and leaves the pod not ready with the initializer's real exit status
and message, its server never started; so does a URI with no model under it.

Needs the versitygw binary (``make binaries``) and the data plane's Python servers; no fleet.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.dataplane import envs, pods, podspec
from testbed.dataplane.podspec import Environments, StaticObjects
from testbed.dataplane.runner import BackOff, PodRunner
from testbed.dataplane.s3 import BUCKET, S3Server
from testbed.processes import free_port
from testbed.support.dataplane import IRIS, IRIS_CLASSES, post_json, sklearn_runtime
from testbed.support.waiting import eventually

NAME = "sklearn-iris"

ENTRY = "demo-s3"
"""The storage-config entry's name (a StorageConnection's name)."""


@pytest.fixture(scope="module")
def s3(built_binaries: Callable[[str], Path], dataplane: Environments,
       tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    built_binaries("versitygw")
    root = tmp_path_factory.mktemp("s3")
    t0 = time.monotonic()
    server = S3Server(root / "data", root / "logs").start()
    print(f"S3 server healthy in {time.monotonic() - t0:.1f}s")
    try:
        yield server
    finally:
        server.stop()


def storage_objects(config: dict[str, Any]) -> StaticObjects:
    """The ``storage-config`` Secret of the ``models`` namespace with one entry."""
    return StaticObjects(secrets={("models", "storage-config"): {
        ENTRY: json.dumps(config).encode()}})


STORAGE_ENV = [{"name": "STORAGE_CONFIG", "valueFrom": {"secretKeyRef": {
    "name": "storage-config", "key": ENTRY}}}]
"""The initializer's environment as KServe writes it for a storage key."""


def run_pod(uri: str, objects: StaticObjects, environments: Environments,
            root: Path) -> PodRunner:
    pod = pods.predictor_pod(sklearn_runtime(), NAME, "models", uri, storage_env=STORAGE_ENV)
    plan = podspec.translate(pod, root / "pod", objects, environments, free_port)
    return PodRunner(plan, root / "logs", backoff=BackOff(initial=30.0)).start()


def init_failure(runner: PodRunner) -> dict[str, Any] | None:
    statuses = runner.status().get("initContainerStatuses") or [{}]
    terminated = (statuses[0].get("lastState") or {}).get("terminated")
    return dict(terminated) if terminated else None


def test_the_bucket_holds_the_trained_models(s3: S3Server) -> None:
    uris = s3.seed_models()
    assert f"s3://{BUCKET}/sklearn/iris/model.joblib" in uris
    assert f"s3://{BUCKET}/mlserver/iris/model-settings.json" in uris
    # Stored by the server itself: its posix backend keeps an object as a file.
    assert (s3.root / BUCKET / "sklearn" / "iris" / "model.joblib").is_file()


def test_the_initializer_downloads_with_the_delivered_credentials_and_the_model_serves(
        s3: S3Server, dataplane: Environments, tmp_path: Path) -> None:
    s3.seed_models()
    runner = run_pod(f"s3://{BUCKET}/sklearn/iris", storage_objects(s3.storage_config()),
                     dataplane, tmp_path)
    try:
        eventually(runner.ready, timeout=120, interval=0.2)
        volume = runner.plan.volumes[0].path
        # Downloaded, not linked: the bytes came over S3.
        assert (volume / "model.joblib").is_file() and not (volume / "model.joblib").is_symlink()
        port = runner.plan.containers[0].ports[8080]
        answer = post_json(f"http://127.0.0.1:{port}/v1/models/{NAME}:predict", {"instances": IRIS})
        assert answer == {"predictions": IRIS_CLASSES}
    finally:
        runner.stop()


def test_a_wrong_secret_is_refused_by_the_server_and_the_pod_stays_not_ready(
        s3: S3Server, dataplane: Environments, tmp_path: Path) -> None:
    s3.seed_models()
    wrong = storage_objects(s3.storage_config(secret_key="not-the-secret"))
    runner = run_pod(f"s3://{BUCKET}/sklearn/iris", wrong, dataplane, tmp_path)
    try:
        terminated = eventually(lambda: init_failure(runner), timeout=120, interval=0.2)
        assert terminated["exitCode"] == 1
        # KServe's initializer asks for the bucket first (HEAD: the server's 403 has no body).
        assert "An error occurred (403) when calling the HeadBucket operation: Forbidden" in (
            terminated["message"]), terminated["message"]
        status = runner.status()
        assert status["phase"] == "Pending"
        conditions = {c["type"]: c["status"] for c in status["conditions"]}
        assert conditions["Initialized"] == "False" and conditions["Ready"] == "False"
        assert status["initContainerStatuses"][0]["state"]["waiting"]["reason"] == (
            "CrashLoopBackOff")
        # The server never started without its model.
        assert runner.container("kserve-container").started_at is None
        assert not (runner.plan.volumes[0].path / "model.joblib").exists()
    finally:
        runner.stop()


LIST = ("import sys, boto3; from botocore.client import Config; "
        "s3 = boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1', "
        "aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3], "
        "config=Config(s3={'addressing_style': 'path'})); "
        "print(s3.list_objects_v2(Bucket='models')['KeyCount'])")


def test_the_server_checks_the_signature_of_every_request(s3: S3Server) -> None:
    s3.seed_models()

    def listing(access: str, secret: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(envs.KSERVE_ENV.python), "-c", LIST, s3.endpoint, access,
                               secret], capture_output=True, text=True, timeout=60)

    assert int(listing(s3.access_key, s3.secret_key).stdout) >= 3
    wrong_secret = listing(s3.access_key, "not-the-secret")
    assert wrong_secret.returncode != 0
    assert "SignatureDoesNotMatch" in wrong_secret.stderr
    unknown_key = listing("AKIANOTTHERE", s3.secret_key)
    assert "No user exists with the provided access key ID" in unknown_key.stderr


def test_a_missing_key_fails_the_download_with_kserves_message(
        s3: S3Server, dataplane: Environments, tmp_path: Path) -> None:
    s3.seed_models()
    runner = run_pod(f"s3://{BUCKET}/no/such/model", storage_objects(s3.storage_config()),
                     dataplane, tmp_path)
    try:
        terminated = eventually(lambda: init_failure(runner), timeout=120, interval=0.2)
        assert terminated["exitCode"] == 1
        assert "Failed to fetch model. No model found in no/such/model." in (
            terminated["message"]), terminated["message"]
        assert not runner.ready()
    finally:
        runner.stop()
