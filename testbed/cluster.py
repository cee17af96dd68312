"""One control plane of the testbed (hub or spoke) and how to talk to it."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from testbed.pki import KeyPair
from testbed.processes import Process


def write_kubeconfig(path: Path, name: str, server: str, ca: Path, client: KeyPair) -> Path:
    """Write a kubeconfig that reaches ``server`` with a client certificate."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": name, "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [
            {
                "name": name,
                "user": {
                    "client-certificate": str(client.cert),
                    "client-key": str(client.key),
                },
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


class KubectlError(subprocess.CalledProcessError):
    """A failed kubectl call; its text includes what kubectl printed on stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}\n{(self.stderr or '').strip()[-4000:]}"


@dataclass
class Cluster:
    """A kube-apiserver with its controllers, reachable through ``kubeconfig``."""

    name: str
    directory: Path
    port: int
    kubeconfig: Path
    processes: dict[str, Process] = field(default_factory=dict)
    identities: dict[str, Path] = field(default_factory=dict)
    """Long-running component -> the kubeconfig of its own (non-admin) identity."""

    @property
    def server(self) -> str:
        """URL of the API server."""
        return f"https://127.0.0.1:{self.port}"

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster; raise with its stderr when ``check`` fails."""
        proc = subprocess.run(
            ["kubectl", f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise KubectlError(proc.returncode, proc.args, output=proc.stdout, stderr=proc.stderr)
        return proc

    def apply_files(self, paths: list[Path]) -> None:
        """Server-side apply the given YAML files."""
        args = ["apply", "--server-side", "--force-conflicts", "--field-manager=testbed"]
        for p in paths:
            args += ["-f", str(p)]
        self.kubectl(*args, timeout=300)

    def apply_objects(self, objects: list[dict[str, Any]]) -> None:
        """Server-side apply objects given as dicts."""
        self.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=testbed",
            "-f",
            "-",
            input=yaml.safe_dump_all(objects),
        )

    def wait_crds_established(self, timeout: int = 120) -> None:
        """Block until every CRD on the cluster is Established."""
        self.kubectl(
            "wait", "--for=condition=Established", "crd", "--all", f"--timeout={timeout}s",
            timeout=timeout + 10,
        )

    def api_client(self) -> Any:
        """A kubernetes.client.ApiClient for this cluster."""
        from kubernetes import config

        return config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig)
        )
