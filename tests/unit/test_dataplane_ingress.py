"""The spoke ingress's Caddy configuration and the InferenceService hosts it routes (pure)."""

from __future__ import annotations

from pathlib import Path

from testbed.dataplane.ingress import UPSTREAM_HEADER, caddy_config
from testbed.dataplane.kubelet import isvc_hosts


def test_each_host_proxies_round_robin_to_its_ready_pods() -> None:
    config = caddy_config("127.0.0.1:2019", "127.0.0.1:8000", {
        "b.example.com": ["127.0.0.1:1", "127.0.0.1:2"],
        "a.example.com": [],
    }, Path("/data"))
    assert config["admin"] == {"listen": "127.0.0.1:2019", "config": {"persist": False}}
    assert config["storage"] == {"module": "file_system", "root": "/data"}
    server = config["apps"]["http"]["servers"]["ingress"]
    assert server["listen"] == ["127.0.0.1:8000"]
    # Plain HTTP on loopback: no certificates, no redirects, whatever the hosts.
    assert server["automatic_https"] == {"disable": True}
    first, second, last = server["routes"]
    assert first["match"] == [{"host": ["a.example.com"]}] and first["terminal"]
    assert first["handle"] == [{"handler": "static_response", "status_code": 503,
                                "body": "no ready endpoints for a.example.com\n"}]
    assert second["match"] == [{"host": ["b.example.com"]}]
    (proxy,) = second["handle"]
    assert proxy["handler"] == "reverse_proxy"
    assert proxy["upstreams"] == [{"dial": "127.0.0.1:1"}, {"dial": "127.0.0.1:2"}]
    assert proxy["load_balancing"] == {"selection_policy": {"policy": "round_robin"}}
    assert proxy["headers"]["response"]["set"] == {
        UPSTREAM_HEADER: ["{http.reverse_proxy.upstream.hostport}"]}
    assert "match" not in last
    assert last["handle"][0]["status_code"] == 404


def test_no_routes_is_a_404_for_every_host() -> None:
    routes = caddy_config("a", "b", {}, Path("/d"))["apps"]["http"]["servers"]["ingress"]
    assert [r["handle"][0]["status_code"] for r in routes["routes"]] == [404]


def test_an_inferenceservices_hosts_are_its_urls_and_its_components() -> None:
    isvc = {"status": {
        "url": "http://sklearn-iris-models.example.com",
        "address": {"url": "http://sklearn-iris-predictor.models.svc.cluster.local"},
        "components": {"predictor": {
            "url": "http://sklearn-iris-predictor-models.example.com",
            "latestCreatedRevision": "x"}},
    }}
    assert isvc_hosts(isvc) == ("sklearn-iris-models.example.com",
                                "sklearn-iris-predictor-models.example.com")
    assert isvc_hosts({"status": {}}) == ()
    assert isvc_hosts({}) == ()
