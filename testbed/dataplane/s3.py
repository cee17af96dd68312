"""The testbed's S3 server: versitygw's posix backend on loopback, with the models in a bucket.

versitygw (Apache-2.0, built from the Go module proxy like the other binaries,
:mod:`testbed.build`) is a real S3 implementation: requests are signed with AWS Signature V4
and checked against the root credentials it starts with, so a wrong key or secret is refused
by the server itself (``InvalidAccessKeyId``, ``SignatureDoesNotMatch``). Each server gets
credentials of its own, generated at start: they work there and nowhere else.

The bucket is filled through the S3 API (``entrypoints/s3_seed.py``, boto3 of the KServe
environment) with the models the testbed trained (:mod:`testbed.dataplane.envs`).
"""

from __future__ import annotations

import secrets
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from testbed.build import binary
from testbed.dataplane import envs
from testbed.processes import Process, ProcessFailed, free_port, wait_until

BUCKET = "models"
REGION = "us-east-1"
MODEL_PREFIXES = {"sklearn/iris": envs.sklearn_iris_dir, "mlserver/iris": envs.mlserver_iris_dir}
"""Key prefix in the bucket -> the trained model directory uploaded there."""


class S3Server:
    """One versitygw process serving ``root`` (a directory per bucket) on a loopback port."""

    def __init__(self, root: Path, log_dir: Path, name: str = "s3") -> None:
        self.root = root
        self.port = free_port()
        self.access_key = f"TESTBED{secrets.token_hex(6).upper()}"
        self.secret_key = secrets.token_urlsafe(30)
        self.log_dir = log_dir
        self.name = name
        self.process: Process | None = None

    def argv(self) -> list[str]:
        """The server's command line (needs the built binary)."""
        return [
            str(binary("versitygw")),
            "--access", self.access_key,
            "--secret", self.secret_key,
            "--region", REGION,
            "--port", f"127.0.0.1:{self.port}",
            "--health", "/health",
            "posix", str(self.root),
        ]

    @property
    def endpoint(self) -> str:
        """The S3 endpoint URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> S3Server:
        """Start the server and wait for its health endpoint."""
        self.root.mkdir(parents=True, exist_ok=True)
        process = self.process = Process(self.name, self.argv(), self.log_dir).start()

        def healthy() -> bool:
            with urllib.request.urlopen(f"{self.endpoint}/health", timeout=2) as response:
                return int(response.status) == 200

        wait_until("the S3 server's /health", healthy, timeout, watch=[process])
        return self

    def stop(self) -> None:
        """Stop the server."""
        if self.process is not None:
            self.process.stop()

    def seed_models(self) -> list[str]:
        """Create the models bucket and upload the trained models; return the object URIs."""
        pairs = [f"{directory()}={prefix}" for prefix, directory in MODEL_PREFIXES.items()]
        proc = subprocess.run(
            [str(envs.KSERVE_ENV.python), str(envs.ENTRYPOINTS / "s3_seed.py"),
             self.endpoint, BUCKET, *pairs],
            env={"AWS_ACCESS_KEY_ID": self.access_key,
                 "AWS_SECRET_ACCESS_KEY": self.secret_key, "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, timeout=120,
        )
        if proc.returncode != 0:
            raise ProcessFailed(f"seeding the S3 bucket failed:\n{proc.stdout}{proc.stderr}")
        return proc.stdout.split()

    def storage_config(self, secret_key: str | None = None) -> dict[str, Any]:
        """A ``storage-config`` entry for this server, as the agent delivers one.

        The keys KServe's storage code reads (``type``, ``access_key_id``,
        ``secret_access_key``, ``endpoint_url``, ``bucket``, ``region``); ``secret_key``
        replaces the real secret (to see a wrong one refused).
        """
        return {
            "type": "s3",
            "access_key_id": self.access_key,
            "secret_access_key": self.secret_key if secret_key is None else secret_key,
            "endpoint_url": self.endpoint,
            "bucket": BUCKET,
            "region": REGION,
        }
