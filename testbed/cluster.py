"""One control plane of the testbed (hub or spoke) and how to talk to it."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from testbed import documents
from testbed.pki import KeyPair
from testbed.processes import Process
from testbed.reading import Answer, NotHandled, Reader
from testbed.writing import VERBS, Writer


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
    _reader: Reader | None = field(default=None, init=False, repr=False, compare=False)
    _writer: Writer | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def server(self) -> str:
        """URL of the API server."""
        return f"https://127.0.0.1:{self.port}"

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster; raise with its stderr when ``check`` fails.

        ``get ... -o json`` is answered in process with the same API requests
        (:mod:`testbed.reading`): tests poll thousands of times per run, and a kubectl
        process per poll was a sixth of the suite's CPU time. So are the commonest writes
        (``delete``, ``create -f -``, ``patch``, ``label``: :mod:`testbed.writing`).
        """
        if args and args[0] in VERBS:
            try:
                answer = self.writer().run(args, input, timeout)
            except NotHandled:
                pass
            else:
                return self._answered(args, answer, check)
        if args and args[0] == "get" and input is None:
            try:
                answer = self.reader().get(args[1:], timeout)
            except NotHandled:
                pass
            else:
                return self._answered(args, answer, check)
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

    def _answered(self, args: tuple[str, ...], answer: Answer, check: bool
                  ) -> subprocess.CompletedProcess[str]:
        """An in-process answer as kubectl's completed process (raising as it would)."""
        proc = subprocess.CompletedProcess(
            ["kubectl", f"--kubeconfig={self.kubeconfig}", *args],
            answer.returncode, answer.stdout, answer.stderr,
        )
        if check and proc.returncode != 0:
            raise KubectlError(proc.returncode, proc.args, output=proc.stdout, stderr=proc.stderr)
        return proc

    def apply_files(self, paths: list[Path]) -> None:
        """Server-side apply the objects of the given YAML files, in order.

        As :meth:`apply_objects` does: in process, by kubectl when that leaves them to it.
        """
        objects = [doc for p in paths for doc in documents.load_file(p) if doc]
        if all(isinstance(o, dict) and not str(o.get("kind", "")).endswith("List")
               for o in objects):
            try:
                self.reader().apply(objects, "testbed", timeout=300)
                return
            except NotHandled:
                pass
        args = ["apply", "--server-side", "--force-conflicts", "--field-manager=testbed"]
        for p in paths:
            args += ["-f", str(p)]
        self.kubectl(*args, timeout=300)

    def apply_objects(self, objects: list[dict[str, Any]]) -> None:
        """Server-side apply objects given as dicts, taking every field they set (``testbed``).

        In process (:meth:`Reader.apply`), or by kubectl when that leaves it to kubectl, so a
        refusal raises :class:`KubectlError` with kubectl's message.
        """
        try:
            self.reader().apply(objects, "testbed", timeout=120)
            return
        except NotHandled:
            pass
        self.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=testbed",
            "-f",
            "-",
            input=yaml.safe_dump_all(objects),
        )

    def create_token(self, account: str, namespace: str, duration: str) -> str:
        """A token of ServiceAccount ``namespace/account`` valid for ``duration`` (``30m``).

        Requested in process, as ``kubectl create token --duration`` does; kubectl says why
        when the API server refuses.
        """
        unit = {"s": 1, "m": 60, "h": 3600}
        seconds = int(duration[:-1]) * unit[duration[-1]]
        try:
            return self.reader().token(namespace, account, seconds, timeout=60)
        except NotHandled:
            return self.kubectl(
                "create", "token", account, "-n", namespace, f"--duration={duration}"
            ).stdout.strip()

    def ready(self, timeout: float = 10) -> bool:
        """Whether the API server is ready (its ``/readyz``), asked in process."""
        return self.reader().ready(timeout)

    def wait_crds_established(self, *names: str, timeout: int = 120) -> None:
        """Block until the named CRDs (default: every CRD on the cluster) are Established.

        And served: listed in the API server's discovery, where clients (kubectl, the
        agents) find them. Polls rather than using ``kubectl wait``: that command fails
        outright on a CRD created a moment ago, whose ``status.conditions`` is still null.
        """
        deadline = time.monotonic() + timeout
        while True:
            pending = self._crds_not_established(names)
            if not pending:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRDs not Established after {timeout}s: {sorted(pending)}")
            time.sleep(0.5)

    def _crds_not_established(self, names: tuple[str, ...]) -> list[str]:
        """The CRDs (of ``names``, or all) not served yet: missing, or not in discovery.

        From the CRDs' names and the aggregated discovery (:meth:`Reader.crds`), which lists a
        CRD once it is Established; else from the whole CRD list and their conditions.
        """
        try:
            listed, served = self.reader().crds(timeout=30)
        except NotHandled:
            return self._crds_not_established_by_condition(names)
        missing = [name for name in names if name not in listed]
        return missing + [name for name in listed
                          if (not names or name in names) and name not in served]

    def _crds_not_established_by_condition(self, names: tuple[str, ...]) -> list[str]:
        listing = json.loads(self.kubectl("get", "crd", "-o", "json").stdout)
        crds = {crd["metadata"]["name"]: crd for crd in listing.get("items", [])}
        missing = [name for name in names if name not in crds]
        return missing + [
            name
            for name, crd in crds.items()
            if (not names or name in names)
            and not any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in (crd.get("status") or {}).get("conditions") or []
            )
        ]

    def reader(self) -> Reader:
        """The in-process answerer of ``kubectl get -o json`` for this cluster (admin)."""
        if self._reader is None:
            self._reader = Reader(self.api_client())
        return self._reader

    def writer(self) -> Writer:
        """The in-process doer of kubectl's commonest writes for this cluster (admin)."""
        if self._writer is None:
            self._writer = Writer(self.reader())
        return self._writer

    def api_client(self) -> Any:
        """A kubernetes.client.ApiClient for this cluster."""
        from kubernetes import config

        return config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig)
        )
