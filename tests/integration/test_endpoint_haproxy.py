"""The fleet endpoint's router is the real HAProxy (Debian's package) run as
``endpoint serve`` runs it (:class:`addon_cli.endpoint_serve.Proxy`), in front of two small
HTTP servers that stand in for two clusters' ingresses: routing by host, weights, Failover
to the backup, its own health checks taking a dead cluster out with no failed request, and a
reload under load that drops nothing. The same on the real fleet with model servers:
``tests/integration/test_dataplane_fleet.py`` (step 9)."""

from __future__ import annotations

import http.client
import http.server
import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from addon_cli import endpoint
from addon_cli.endpoint_serve import Proxy, command
from testbed.processes import free_port
from testbed.support.waiting import eventually

MODEL_HOST = "iris-models.example.com"
FLEET_HOST = "iris.team-a.fleet.local"


class Ingress(http.server.BaseHTTPRequestHandler):
    """A cluster's ingress with the model behind it: answers only the model's host."""

    protocol_version = "HTTP/1.1"

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _dead(self) -> bool:
        """A stopped cluster answers nothing on the connections it had (they close)."""
        if getattr(self.server, "dead", False):
            self.close_connection = True
            return True
        return False

    def do_GET(self) -> None:
        if self._dead():
            return
        ok = self.headers["Host"] == MODEL_HOST and self.path == "/v1/models/iris"
        self._answer(200 if ok else 404, {"name": "iris", "ready": ok})

    def do_POST(self) -> None:
        if self._dead():
            return
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers["Host"] != MODEL_HOST:
            self._answer(404, {"error": f"no route for {self.headers['Host']}"})
            return
        self._answer(200, {"predictions": [1], "cluster": self.server.cluster})  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: object) -> None:
        pass


class Quiet(http.server.ThreadingHTTPServer):
    """Says nothing of a connection HAProxy closed (a health check, a reload)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class Cluster:
    def __init__(self, name: str) -> None:
        self.name, self.port = name, free_port()
        self.server: Quiet | None = None

    def start(self) -> None:
        self.server = Quiet(("127.0.0.1", self.port), Ingress)
        self.server.cluster = self.name  # type: ignore[attr-defined]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.dead = True  # type: ignore[attr-defined]
            self.server.shutdown()
            self.server.server_close()
            self.server = None


@pytest.fixture
def clusters() -> Iterator[dict[str, Cluster]]:
    found = {n: Cluster(n) for n in ("c1", "c2")}
    for cl in found.values():
        cl.start()
    yield found
    for cl in found.values():
        cl.stop()


@pytest.fixture
def proxy(haproxy: Path, tmp_path: Path) -> Iterator[tuple[Proxy, str]]:
    found = Proxy(str(haproxy), tmp_path / "run")
    yield found, f"127.0.0.1:{free_port()}"
    found.stop()


def intent(policy: str, weights: dict[str, int]) -> dict[str, Any]:
    return {"metadata": {"name": "iris", "namespace": "team-a"}, "status": {"endpoint": {
        "policy": policy, "members": [
            {"cluster": cl, "weight": w, "url": f"http://{MODEL_HOST}"}
            for cl, w in weights.items()]}}}


def load(p: Proxy, listen: str, clusters: dict[str, Cluster], policy: str,
         weights: dict[str, int]) -> None:
    via = {cl.name: f"127.0.0.1:{cl.port}" for cl in clusters.values()}
    found = endpoint.routes([intent(policy, weights)], via, "fleet.local")
    p.load(endpoint.haproxy_config(found, listen, p.run_dir, 200), endpoint.hosts_map(found),
           {r.backend for r in found})


def predict(listen: str, host: str = FLEET_HOST) -> tuple[int, str]:
    request = urllib.request.Request(f"http://{listen}/v1/models/iris:predict",
                                     b'{"instances": [[1, 2, 3, 4]]}',
                                     {"Host": host, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, str(answer.headers.get(endpoint.CLUSTER_HEADER))
    except urllib.error.HTTPError as err:
        return err.code, ""
    except (OSError, http.client.HTTPException) as err:  # no answer at all
        return 0, type(err).__name__


def down(p: Proxy) -> set[str]:
    """Servers HAProxy's own checks found down (operational state 0)."""
    rows = command(p.admin, "show servers state").splitlines()[2:]
    return {r.split()[3] for r in rows if r.strip() and r.split()[5] == "0"}


def test_spread_by_weight_and_an_unknown_host_refused(
        proxy: tuple[Proxy, str], clusters: dict[str, Cluster]) -> None:
    p, listen = proxy
    load(p, listen, clusters, "Spread", {"c1": 100, "c2": 100})
    answered = Counter(predict(listen) for _ in range(20))
    assert answered == {(200, "c1"): 10, (200, "c2"): 10}
    assert predict(listen, "other.team-a.fleet.local") == (404, "")
    load(p, listen, clusters, "Spread", {"c1": 3, "c2": 1})
    answered = Counter(predict(listen)[1] for _ in range(40))
    assert answered == {"c1": 30, "c2": 10}


def test_a_dead_cluster_is_checked_out_and_no_request_fails(
        proxy: tuple[Proxy, str], clusters: dict[str, Cluster]) -> None:
    """HAProxy's checks are the second signal: before the hub notices, the dead cluster is
    down; meanwhile a request sent there is retried on the other one."""
    p, listen = proxy
    load(p, listen, clusters, "Spread", {"c1": 100, "c2": 100})
    clusters["c1"].stop()
    answers = [predict(listen) for _ in range(20)]
    assert answers == [(200, "c2")] * 20
    eventually(lambda: down(p) == {"c1"}, timeout=10, interval=0.1)
    clusters["c1"].start()
    eventually(lambda: not down(p), timeout=10, interval=0.1)
    assert {predict(listen)[1] for _ in range(4)} == {"c1", "c2"}


def test_failover_sends_everything_to_the_first_then_to_the_backup(
        proxy: tuple[Proxy, str], clusters: dict[str, Cluster]) -> None:
    p, listen = proxy
    load(p, listen, clusters, "Failover", {"c1": 100, "c2": 0})
    assert {predict(listen) for _ in range(10)} == {(200, "c1")}
    # c1 dies: until HAProxy's checks find it down (2 x 200 ms), its requests fail (the
    # backup takes traffic only once no active server is up); then c2 answers them all.
    clusters["c1"].stop()
    eventually(lambda: down(p) == {"c1"}, timeout=10, interval=0.1)
    assert {predict(listen) for _ in range(10)} == {(200, "c2")}
    # The hub's word (c2 active now) moves it for good, whatever the checks say later.
    load(p, listen, clusters, "Failover", {"c2": 100, "c1": 0})
    clusters["c1"].start()
    eventually(lambda: not down(p), timeout=10, interval=0.1)  # c1 checked up again
    assert {predict(listen) for _ in range(10)} == {(200, "c2")}


def test_a_reload_under_load_drops_nothing(
        proxy: tuple[Proxy, str], clusters: dict[str, Cluster]) -> None:
    p, listen = proxy
    load(p, listen, clusters, "Spread", {"c1": 100, "c2": 100})
    stop, results = threading.Event(), Counter[int]()

    def send() -> None:
        while not stop.is_set():
            results[predict(listen)[0]] += 1

    senders = [threading.Thread(target=send) for _ in range(4)]
    for s in senders:
        s.start()
    for weights in ({"c1": 100}, {"c1": 100, "c2": 50}, {"c2": 100}, {"c1": 10, "c2": 10}):
        load(p, listen, clusters, "Spread", weights)
        time.sleep(0.3)
    stop.set()
    for s in senders:
        s.join()
    assert set(results) == {200} and results[200] > 40, results
