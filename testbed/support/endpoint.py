"""The fleet endpoint on a testbed.

``endpoint serve`` as a fleet viewer, a fixed-rate load through it, and what a failover cost
(for tests/integration/test_dataplane_fleet.py and ``python -m bench.endpoint``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from addon_cli.endpoint import CLUSTER_HEADER
from testbed import identities
from testbed.processes import free_port
from testbed.support.dataplane import IRIS, IRIS_CLASSES, v2_iris

ROUTER_NAMESPACE = "fleet-router"
"""Prefix of the hub namespace of a router's ServiceAccount (bound cluster-wide to the viewer
role); each router has its own, as the last one's may still be going."""


@dataclass
class Router:
    """A running ``endpoint serve``."""

    process: subprocess.Popen[bytes]
    listen: str
    log_path: Path
    log: TextIO

    def alive(self) -> bool:
        """Whether it still runs."""
        return self.process.poll() is None

    def log_text(self) -> str:
        """What it logged so far."""
        self.log.flush()
        return self.log_path.read_text()


@contextmanager
def router(hub: Any, haproxy: Path, via: Mapping[str, str], directory: Path
           ) -> Iterator[Router]:
    """``endpoint serve`` as a ServiceAccount with only the chart's viewer role."""
    namespace = f"{ROUTER_NAMESPACE}-{uuid.uuid4().hex[:6]}"
    hub.kubectl("create", "namespace", namespace)
    hub.kubectl("create", "serviceaccount", "router", "-n", namespace)
    hub.kubectl("create", "clusterrolebinding", namespace,
                "--clusterrole=model-serving-addon-viewer",
                f"--serviceaccount={namespace}:router")
    kubeconfig = identities.token_kubeconfig(hub, namespace, "router",
                                             directory / "router.kubeconfig")
    listen = f"127.0.0.1:{free_port()}"
    log_path = directory / "endpoint.log"
    log = log_path.open("w")
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("model-serving-addon")), "endpoint", "serve",
         f"--kubeconfig={kubeconfig}", f"--listen={listen}",
         *(f"--via={cl}={base}" for cl, base in via.items()),
         f"--haproxy={haproxy}", f"--run-dir={directory / 'run'}", "--check-interval=500ms"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        yield Router(process, listen, log_path, log)
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
        hub.kubectl("delete", "clusterrolebinding", namespace, check=False)
        hub.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def listening_pids(listen: str) -> set[int]:
    """The processes that hold a listening TCP socket on ``listen`` (``host:port``; Linux).

    HAProxy's reload hands the listening socket to the new worker and then tells the old one
    to let go of it; until the old one has, both accept connections (the old one with the
    previous routes). One pid here means the reload is over: HAProxy's master holds none.
    """
    port = int(listen.rsplit(":", 1)[1])
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    holders = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                holders.add(int(proc.name))
    return holders


def predict(listen: str, name: str, namespace: str, domain: str = "fleet.local"
            ) -> tuple[int, str]:
    """A V1 prediction through the endpoint: (status, the cluster that answered).

    A wrong answer counts as status 599; no answer at all as 0.
    """
    request = urllib.request.Request(
        f"http://{listen}/v1/models/{name}:predict", json.dumps({"instances": IRIS}).encode(),
        {"Host": f"{name}.{namespace}.{domain}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            ok = json.loads(answer.read()) == {"predictions": IRIS_CLASSES}
            return (answer.status if ok else 599), str(answer.headers[CLUSTER_HEADER])
    except urllib.error.HTTPError as err:
        return err.code, str(err.headers.get(CLUSTER_HEADER) or "")
    except OSError:
        return 0, ""


def predict_v2(listen: str, name: str, namespace: str, domain: str = "fleet.local"
               ) -> tuple[int, str]:
    """A V2 (Open Inference Protocol) inference through the endpoint.

    (status, the cluster that answered, also for an error the cluster gave); no answer at
    all is status 0.
    """
    request = urllib.request.Request(
        f"http://{listen}/v2/models/{name}/infer", json.dumps(v2_iris()).encode(),
        {"Host": f"{name}.{namespace}.{domain}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            ok = bool(json.loads(answer.read()).get("outputs"))
            return (answer.status if ok else 599), str(answer.headers[CLUSTER_HEADER])
    except urllib.error.HTTPError as err:
        return err.code, str(err.headers.get(CLUSTER_HEADER) or "")
    except OSError:
        return 0, ""


@dataclass
class Load:
    """Predictions at a fixed rate through the endpoint, each recorded when it ends."""

    listen: str
    name: str
    namespace: str
    rate: float = 20.0
    records: list[tuple[float, int, str, float]] = field(default_factory=list)
    """(monotonic end time, status, cluster, monotonic send time) per request."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        with ThreadPoolExecutor(8) as pool:
            start, i = time.monotonic(), 0
            while not self._stop.is_set():
                # Sent on schedule, whatever the answers take.
                self._stop.wait(max(0.0, start + i / self.rate - time.monotonic()))
                pool.submit(self._send)
                i += 1

    def _send(self) -> None:
        sent = time.monotonic()
        status, cluster = predict(self.listen, self.name, self.namespace)
        self.records.append((time.monotonic(), status, cluster, sent))

    def start(self) -> Load:
        """Start sending."""
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[tuple[float, int, str, float]]:
        """Stop sending; every record, in end-time order."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        return sorted(self.records)

    def answered_by(self, cluster: str, after: float) -> int:
        """Good answers from ``cluster`` that ended after ``after``."""
        return sum(1 for t, code, who, _ in list(self.records)
                   if t > after and code == 200 and who == cluster)


@dataclass(frozen=True)
class Failover:
    """What one failover cost the callers."""

    requests: int
    failed: int
    window: float
    """Seconds from the first to the last failed request (0 when none failed)."""
    seconds: float
    """Last good answer from the failed cluster to the first from the other one."""

    def text(self) -> str:
        """One line for a log or a table."""
        return (f"{self.failed} of {self.requests} requests failed (within "
                f"{self.window:.2f}s), failover {self.seconds:.2f}s")


def failover(records: list[tuple[float, int, str, float]], killed: float, source: str,
             target: str) -> Failover:
    """The cost of moving from ``source`` (killed at ``killed``) to ``target``."""
    failed = [t for t, code, _, _ in records if code != 200]
    before = [t for t, code, who, _ in records if t < killed and who == source and code == 200]
    after = [t for t, code, who, _ in records if t >= killed and who == target and code == 200]
    if not before or not after:
        raise AssertionError(f"no answer from {source} before the kill or from {target} "
                             f"after it: {records[:3]} ... {records[-3:]}")
    return Failover(len(records), len(failed),
                    (failed[-1] - failed[0]) if failed else 0.0, after[0] - before[-1])
