"""The ingress of a spoke: Caddy on 127.0.0.1, routing by ``Host`` to the model's pod processes.

Requests reach a model as KServe's docs test one (``curl -H "Host: <the InferenceService's URL
host>" http://<ingress>/v1/models/<name>:predict``): one Caddy server per spoke (Apache-2.0,
built from the Go module proxy with the other binaries, :mod:`testbed.build`) listens on a
loopback port; each route matches the hosts of one InferenceService's URLs and proxies to the
loopback ports its ready predictor pods serve on, round-robin across replicas, as a Service in
front of those pods would. A host whose pods are not ready answers 503, an unknown one 404.

Routes change through Caddy's admin API (``POST /load`` of the whole configuration, which Caddy
applies before it answers, so a route exists once :meth:`Ingress.set_routes` returns). Every
proxied answer carries :data:`UPSTREAM_HEADER`, the ``host:port`` that served it.

On Linux each configuration Caddy loads listens on a socket of its own (``SO_REUSEPORT``); the
previous one's is closed by a shutdown that ``/load`` starts but does not wait for. Until then
the kernel hands new connections to either socket, and those queued on the closing one are
reset (a client reads "Remote end closed connection without response"; seen with four test
workers saturating two cores). :meth:`Ingress.set_routes` therefore also waits until one socket
listens on the port again.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from testbed.build import binary
from testbed.processes import Process, free_port, wait_until

UPSTREAM_HEADER = "X-Testbed-Upstream"
"""Response header naming the upstream (``127.0.0.1:PORT``) that answered."""

Routes = Mapping[str, Sequence[str]]
"""Host -> the ``host:port`` upstreams of its ready pods (empty: none ready)."""


def caddy_config(admin: str, listen: str, routes: Routes, storage: Path) -> dict[str, Any]:
    """Caddy's JSON configuration for ``routes`` (hosts in sorted order, then a 404)."""
    handlers: list[dict[str, Any]] = []
    for host in sorted(routes):
        upstreams = list(routes[host])
        if upstreams:
            handle: dict[str, Any] = {
                "handler": "reverse_proxy",
                "upstreams": [{"dial": u} for u in upstreams],
                "load_balancing": {"selection_policy": {"policy": "round_robin"}},
                "headers": {"response": {"set": {
                    UPSTREAM_HEADER: ["{http.reverse_proxy.upstream.hostport}"]}}},
            }
        else:
            handle = {"handler": "static_response", "status_code": 503,
                      "body": f"no ready endpoints for {host}\n"}
        handlers.append({"match": [{"host": [host]}], "handle": [handle], "terminal": True})
    handlers.append({"handle": [{"handler": "static_response", "status_code": 404,
                                 "body": "no route for this host\n"}]})
    return {
        "admin": {"listen": admin, "config": {"persist": False}},
        "storage": {"module": "file_system", "root": str(storage)},
        "apps": {"http": {"servers": {"ingress": {
            "listen": [listen],
            "automatic_https": {"disable": True},
            "routes": handlers,
        }}}},
    }


def listening_sockets(port: int, table: str) -> int:
    """How many sockets of ``table`` (the text of ``/proc/net/tcp``) listen on 127.0.0.1:port."""
    local = f"0100007F:{port:04X}"
    count = 0
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 3 and fields[1] == local and fields[3] == "0A":  # 0A: TCP_LISTEN
            count += 1
    return count


class Ingress:
    """One Caddy process for one spoke, and the routes it serves."""

    def __init__(self, name: str, directory: Path, log_dir: Path) -> None:
        self.name = name
        self.directory = directory
        self.port = free_port()
        self.admin_port = free_port()
        self._routes: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()
        self.loads = 0
        """How many configurations Caddy accepted (the first one included)."""
        self.process = Process(
            f"{name}-ingress",
            [str(binary("caddy")), "run", "--config", str(directory / "caddy.json")],
            log_dir,
            # Caddy keeps its data and configuration under the user's directories otherwise.
            env={"HOME": str(directory), "XDG_DATA_HOME": str(directory / "data"),
                 "XDG_CONFIG_HOME": str(directory / "config")},
        )

    @property
    def url(self) -> str:
        """Base URL of the ingress (send the model's host in the ``Host`` header)."""
        return f"http://127.0.0.1:{self.port}"

    def config(self, routes: Routes) -> dict[str, Any]:
        """The Caddy configuration of this ingress for ``routes``."""
        return caddy_config(f"127.0.0.1:{self.admin_port}", f"127.0.0.1:{self.port}", routes,
                            self.directory / "data")

    def start(self, timeout: float = 30) -> Ingress:
        """Start Caddy with no routes and wait until its admin API answers."""
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "caddy.json").write_text(json.dumps(self.config({}), indent=2))
        self.process.start()
        wait_until(f"{self.name}'s ingress admin API", self._answers, timeout,
                   watch=[self.process], interval=0.1)
        self.loads = 1
        return self

    def _answers(self) -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}/config/",
                                    timeout=2) as response:
            return int(response.status) == 200

    def stop(self) -> None:
        """Stop Caddy."""
        self.process.stop()

    def routes(self) -> dict[str, tuple[str, ...]]:
        """The routes Caddy serves now."""
        with self._lock:
            return dict(self._routes)

    def set_routes(self, routes: Routes) -> bool:
        """Serve ``routes`` from now on; True when that changed Caddy's configuration.

        Returns once Caddy has applied it and the previous configuration's socket is closed
        (no connection made after this can be reset by that socket's close). Callers may be
        several threads: the loads are serialised, and each is the whole configuration.
        """
        wanted = {host: tuple(upstreams) for host, upstreams in routes.items()}
        with self._lock:
            if wanted == self._routes:
                return False
            body = json.dumps(self.config(wanted)).encode()
            request = urllib.request.Request(
                f"http://127.0.0.1:{self.admin_port}/load", body,
                {"Content-Type": "application/json"}, method="POST")
            with urllib.request.urlopen(request, timeout=30) as response:
                if int(response.status) != 200:
                    raise RuntimeError(f"{self.name}'s ingress refused its routes: "
                                       f"{response.status} {response.read()!r}")
            wait_until(f"{self.name}'s ingress to close the previous configuration's socket",
                       self._one_socket, 30, watch=[self.process], interval=0.02)
            self._routes = wanted
            self.loads += 1
            return True

    def _one_socket(self) -> bool:
        return listening_sockets(self.port, Path("/proc/net/tcp").read_text()) == 1
