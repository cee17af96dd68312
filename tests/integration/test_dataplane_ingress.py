"""The spoke ingress: Caddy routing by Host to loopback upstreams, reconfigured while it runs.

Two small HTTP servers stand in for two replicas of a model (each answers its own port). The
ingress is the real Caddy built from the Go module proxy (``python -m testbed build caddy``).
"""

from __future__ import annotations

import http.server
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testbed.dataplane.ingress import UPSTREAM_HEADER, Ingress

HOST = "sklearn-iris-models.example.com"


class Replica(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.dumps({"port": self.server.server_address[1],
                           "host": self.headers["Host"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def replicas() -> Iterator[list[str]]:
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), Replica) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield [f"127.0.0.1:{s.server_address[1]}" for s in servers]
    for server in servers:
        server.shutdown()


@pytest.fixture(scope="module")
def ingress(built_binaries: Callable[[str], Path],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ingress]:
    built_binaries("caddy")
    root = tmp_path_factory.mktemp("ingress")
    ing = Ingress("cluster1", root / "ingress", root / "logs").start()
    yield ing
    ing.stop()


def send(ingress: Ingress, host: str) -> tuple[int, str, str]:
    request = urllib.request.Request(f"{ingress.url}/v1/models/m:predict", b"{}",
                                     {"Host": host, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return (int(response.status), response.read().decode(),
                    str(response.headers.get(UPSTREAM_HEADER)))
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), ""


def test_an_unknown_host_is_not_found(ingress: Ingress) -> None:
    assert send(ingress, "nobody.example.com")[:2] == (404, "no route for this host\n")


def test_a_host_is_balanced_round_robin_over_its_upstreams(
        ingress: Ingress, replicas: list[str]) -> None:
    assert ingress.set_routes({HOST: replicas})
    # The same routes again change nothing (no reload).
    loads = ingress.loads
    assert not ingress.set_routes({HOST: replicas}) and ingress.loads == loads
    answers = [send(ingress, HOST) for _ in range(4)]
    assert all(code == 200 for code, _, _ in answers), answers
    upstreams = [upstream for _, _, upstream in answers]
    assert sorted(set(upstreams)) == sorted(replicas)
    assert upstreams[0::2] == [upstreams[0]] * 2 and upstreams[1::2] == [upstreams[1]] * 2
    for _, body, upstream in answers:
        answer = json.loads(body)
        # The upstream header names the replica that answered; the Host reaches it unchanged.
        assert upstream == f"127.0.0.1:{answer['port']}" and answer["host"] == HOST


def test_routes_change_while_it_runs(ingress: Ingress, replicas: list[str]) -> None:
    ingress.set_routes({HOST: replicas[1:]})
    assert {send(ingress, HOST)[2] for _ in range(3)} == {replicas[1]}
    # No ready pod: the host is known, and answers 503.
    ingress.set_routes({HOST: []})
    assert send(ingress, HOST)[:2] == (503, f"no ready endpoints for {HOST}\n")
    ingress.set_routes({})
    assert send(ingress, HOST)[0] == 404
    assert ingress.process.alive()
