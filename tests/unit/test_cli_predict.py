"""``predict``: where each cluster's request goes, and how answers are shown (pure parts)."""

from __future__ import annotations

import pytest

from addon_cli import predict
from addon_cli.hub import CliError

INTENT = {"status": {"clusters": [
    {"cluster": "c1", "url": "http://iris.models.example.com"},
    {"cluster": "c2", "url": "http://iris.models.example.com",
     "externalUrl": "https://iris-models.apps.c2.example.com"},
    {"cluster": "c3", "phase": "Waiting"},
]}}


def test_the_protocol_follows_the_input_unless_asked() -> None:
    assert predict.protocol_of({"instances": []}, None) == "v1"
    assert predict.protocol_of({"inputs": []}, None) == "v2"
    assert predict.protocol_of({"inputs": []}, "v1") == "v1"
    with pytest.raises(CliError, match="--protocol"):
        predict.protocol_of({"data": []}, None)
    assert predict.path_of("v1", "iris") == "/v1/models/iris:predict"
    assert predict.path_of("v2", "iris") == "/v2/models/iris/infer"


def test_each_cluster_goes_to_its_url_or_through_its_ingress_with_the_models_host() -> None:
    path = "/v1/models/iris:predict"
    got = predict.targets(INTENT, path, [], predict.parse_via(["c1=http://127.0.0.1:8081/"]))
    assert got == [
        predict.Target("c1", "http://127.0.0.1:8081/v1/models/iris:predict",
                       "iris.models.example.com"),
        # exposed: the external URL, reached directly
        predict.Target("c2", "https://iris-models.apps.c2.example.com/v1/models/iris:predict",
                       "iris-models.apps.c2.example.com"),
    ]
    with pytest.raises(CliError, match="cluster c3 has no URL"):
        predict.targets(INTENT, path, ["c3"], {})
    with pytest.raises(CliError, match="CLUSTER=http"):
        predict.parse_via(["c1:8081"])


def test_the_table_shows_status_latency_and_a_cut_answer_or_the_error() -> None:
    text = predict.table([
        predict.Answer("c1", 200, 0.012, {"predictions": [1, 1]}),
        predict.Answer("c2", None, 1.5, error="connection refused"),
        predict.Answer("c3", 200, 0.01, {"x": "y" * 500}),
    ])
    lines = text.splitlines()
    assert lines[0].split() == ["CLUSTER", "STATUS", "LATENCY", "ANSWER"]
    assert lines[1].split() == ["c1", "200", "12ms", '{"predictions":[1,1]}']
    assert lines[2].split()[:3] == ["c2", "-", "1500ms"] and "connection refused" in lines[2]
    assert lines[3].endswith("...") and len(lines[3].split()[-1]) == predict.MAX_SHOWN
    assert predict.Answer("c1", 503, 0.1).ok is False
    v2 = {"model_name": "iris", "id": "x" * 40, "outputs": [
        {"name": "output-0", "shape": [2], "datatype": "INT64", "data": [1, 1]}]}
    assert predict.summary(v2) == '{"outputs":[[1,1]]}'


def test_through_the_fleet_endpoint_one_request_names_the_cluster_that_answered() -> None:
    """What ``endpoint serve`` answers: the model's fleet host asked, the cluster in a header
    (a 500 too); the real HAProxy is tests/integration/test_dataplane_fleet.py, step 9."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from addon_cli.endpoint import CLUSTER_HEADER

    seen: list[tuple[str, str]] = []

    class Router(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append((self.headers["Host"], self.path))
            self.rfile.read(int(self.headers["Content-Length"]))
            failing = self.path.startswith("/v2")
            raw = json.dumps({"error": "boom"} if failing else {"predictions": [1]}).encode()
            self.send_response(500 if failing else 200)
            self.send_header(CLUSTER_HEADER, "cluster2" if failing else "cluster1")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: object) -> None:
            del args

    server = ThreadingHTTPServer(("127.0.0.1", 0), Router)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        target = predict.fleet_target("iris", "team-a", "/v1/models/iris:predict", base + "/",
                                      "fleet.example.com")
        assert target == predict.Target(predict.FLEET, f"{base}/v1/models/iris:predict",
                                        "iris.team-a.fleet.example.com")
        answer = predict.send(target, {"instances": [[1, 2, 3, 4]]}, 10)
        assert (answer.cluster, answer.status, answer.body) == (
            "cluster1 (fleet endpoint)", 200, {"predictions": [1]})
        failed = predict.send(predict.fleet_target("iris", "team-a", "/v2/models/iris/infer",
                                                   base, "fleet.local"), {"inputs": []}, 10)
        assert (failed.cluster, failed.status, failed.ok) == (
            "cluster2 (fleet endpoint)", 500, False)
        assert seen == [("iris.team-a.fleet.example.com", "/v1/models/iris:predict"),
                        ("iris.team-a.fleet.local", "/v2/models/iris/infer")]
    finally:
        server.shutdown()
    with pytest.raises(CliError, match="--endpoint"):
        predict.fleet_target("iris", "team-a", "/", "127.0.0.1:8088", "fleet.local")
