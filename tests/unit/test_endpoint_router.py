"""What the fleet endpoint's router is given (issue 34): routes from the hub's serving sets,
HAProxy's configuration and map, and the text of ``endpoint show``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from addon_cli import endpoint


def model(name: str = "iris", namespace: str = "team-a", policy: str = "Spread",
          members: list[dict[str, Any]] | None = None,
          excluded: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    members = members if members is not None else [
        {"cluster": "c1", "weight": 100, "url": "http://iris-models.example.com"},
        {"cluster": "c2", "weight": 100, "url": "http://iris-models.example.com"}]
    return {"metadata": {"name": name, "namespace": namespace}, "status": {"endpoint": {
        "policy": policy, "members": members, "excluded": excluded or [],
        "serving": sum(1 for m in members if m["weight"])}}}


VIA = {"c1": "127.0.0.1:3001", "c2": "127.0.0.1:3002"}


def test_spread_members_are_weighted_servers_at_each_clusters_ingress() -> None:
    route = endpoint.route_of(model(), VIA, "fleet.local")
    assert route.fleet_host == "iris.team-a.fleet.local"
    assert route.model_host == "iris-models.example.com"
    assert route.servers == (endpoint.Server("c1", "127.0.0.1:3001", 100),
                             endpoint.Server("c2", "127.0.0.1:3002", 100))


def test_without_via_the_models_url_is_the_address() -> None:
    route = endpoint.route_of(model(members=[
        {"cluster": "c1", "weight": 5, "url": "https://iris.apps.c1.example.com"},
        {"cluster": "c2", "weight": 5, "url": "http://iris.apps.c1.example.com:8080"}]),
        {}, "fleet.local")
    assert [(s.address, s.tls) for s in route.servers] == [
        ("iris.apps.c1.example.com:443", True), ("iris.apps.c1.example.com:8080", False)]


def test_failover_keeps_the_hubs_order_the_standbys_as_backups() -> None:
    route = endpoint.route_of(model(policy="Failover", members=[
        {"cluster": "c2", "weight": 100, "url": "http://iris-models.example.com"},
        {"cluster": "c1", "weight": 0, "url": "http://iris-models.example.com"}]), VIA, "f")
    assert [(s.cluster, s.weight, s.backup) for s in route.servers] == [
        ("c2", 1, False), ("c1", 1, True)]  # a backup needs a weight to be used


def test_weights_above_haproxys_limit_are_scaled_keeping_their_ratio() -> None:
    route = endpoint.route_of(model(members=[
        {"cluster": "c1", "weight": 1000, "url": "http://h"},
        {"cluster": "c2", "weight": 1, "url": "http://h"}]), VIA, "f")
    assert [s.weight for s in route.servers] == [256, 1]


def test_members_that_cannot_be_routed_are_named_with_why() -> None:
    route = endpoint.route_of(model(members=[
        {"cluster": "c1", "weight": 100, "url": "http://iris-models.example.com"},
        {"cluster": "c2", "weight": 100, "url": "http://iris-other.example.com"},
        {"cluster": "c3", "weight": 100, "url": ""}]), VIA, "f")
    assert [s.cluster for s in route.servers] == ["c1"]
    assert route.skipped == (
        ("c2", "its model host iris-other.example.com is not iris-models.example.com"),
        ("c3", "no address: its URL has no host and --via names none"))


def test_a_model_with_no_serving_set_yet_has_no_server() -> None:
    route = endpoint.route_of({"metadata": {"name": "new", "namespace": "ns"}}, VIA, "f")
    assert (route.servers, route.model_host) == ((), "")


def test_the_configuration_routes_each_host_to_its_backend_with_checks_and_retries(
        tmp_path: Path) -> None:
    found = endpoint.routes([model("b"), model("a", policy="Failover")], VIA, "fleet.local")
    config = endpoint.haproxy_config(found, "127.0.0.1:8088", tmp_path, 250)
    assert endpoint.hosts_map(found) == (
        "a.team-a.fleet.local m_team-a_a\nb.team-a.fleet.local m_team-a_b\n")
    assert f"map({tmp_path}/hosts.map)" in config
    assert "    retry-on conn-failure empty-response response-timeout 502 503 504" in config
    assert "inter 250ms" in config
    backend = config[config.index("backend m_team-a_a"):config.index("backend m_team-a_b")]
    assert "    http-request set-header Host iris-models.example.com\n" in backend
    assert ("http-check send meth GET uri /v1/models/a ver HTTP/1.1 "
            "hdr Host iris-models.example.com") in backend
    assert "    server c1 127.0.0.1:3001 weight 1 check\n" in backend
    assert "    server c2 127.0.0.1:3002 weight 1 check backup\n" in backend


@pytest.mark.parametrize("bad", ["127.0.0.1:1 weight 0 check\n    server x", "a b", "h;"])
def test_nothing_the_hub_reports_can_add_a_line_to_the_configuration(
        bad: str, tmp_path: Path) -> None:
    found = endpoint.routes([model()], {"c1": "127.0.0.1:1"}, "fleet.local")
    found = [endpoint.Route(r.namespace, r.name, r.fleet_host, bad, r.servers) for r in found]
    with pytest.raises(ValueError, match="cannot go into the proxy's configuration"):
        endpoint.haproxy_config(found, "127.0.0.1:8088", tmp_path)


def test_via_is_cluster_equals_an_address() -> None:
    assert endpoint.parse_via(["c1=http://127.0.0.1:30570", "c2=10.0.0.2:80"]) == {
        "c1": "127.0.0.1:30570", "c2": "10.0.0.2:80"}
    with pytest.raises(ValueError, match="CLUSTER=BASE"):
        endpoint.parse_via(["c1"])


def test_show_lists_the_members_then_every_cluster_left_out_with_why() -> None:
    text = endpoint.show(model(policy="Failover", members=[
        {"cluster": "c2", "weight": 100, "url": "http://iris-models.example.com",
         "revision": 3},
        {"cluster": "c3", "weight": 0, "url": "http://iris-models.example.com"}],
        excluded=[{"cluster": "c1", "reason": "NotReady", "message": "Failed: CrashLooping"}]))
    assert text.splitlines() == [
        "mcisvc/iris in team-a: Failover, 1 of 3 cluster(s) serving",
        "CLUSTER  WEIGHT       REVISION  URL / WHY NOT",
        "c2       100          3         http://iris-models.example.com",
        "c3       0 (standby)  -         http://iris-models.example.com",
        "c1       -            -         NotReady: Failed: CrashLooping",
    ]
    assert "no serving set yet" in endpoint.show({"metadata": {"name": "x", "namespace": "n"}})


@pytest.mark.parametrize(("predictor", "check"), [
    ({}, "http-check send meth GET uri /v1/models/iris ver HTTP/1.1"),
    ({"model": {"protocolVersion": "v1"}}, "http-check send meth GET uri /v1/models/iris ver"),
    # MLServer speaks V2 only: a V1 check would find every server down
    ({"model": {"protocolVersion": "v2"}},
     "http-check send meth GET uri /v2/models/iris/ready ver HTTP/1.1"),
    ({"protocolVersion": "v2"}, "uri /v2/models/iris/ready"),
    ({"model": {"protocolVersion": "grpc-v2"}}, None),  # a TCP check: no HTTP to ask with
])
def test_the_health_check_asks_in_the_models_protocol(
        predictor: dict[str, Any], check: str | None, tmp_path: Path) -> None:
    intent = model()
    intent["spec"] = {"template": {"predictor": predictor}}
    config = endpoint.haproxy_config(endpoint.routes([intent], VIA, "f"), "127.0.0.1:1",
                                     tmp_path)
    if check is None:
        assert "httpchk" not in config and "http-check" not in config
        assert "    server c1 127.0.0.1:3001 weight 100 check\n" in config
    else:
        assert check in config and "option httpchk" in config
