"""The fleet console's pure parts and its refusals that need no hub (issue 33).

Reading the hub as each user is shown against the hub testbed in
tests/integration/test_console.py; here: where a request's identity comes from, what the
fleet view is made of, and what the server answers before it would call the hub.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from addon_cli.console import credentials, fleet, server
from addon_cli.console import main as console_main


@pytest.mark.parametrize(("headers", "token"), [
    ({"X-Forwarded-Access-Token": "sha256~abc", "Authorization": "Bearer other"}, "sha256~abc"),
    ({"Authorization": "Bearer abc"}, "abc"),
    ({"Authorization": "bearer  abc "}, "abc"),
    ({"Authorization": "Basic dXNlcjpwdw=="}, None),
    ({"Authorization": "Bearer "}, None),
    ({}, None),
])
def test_the_users_token_comes_from_the_proxys_headers(headers: dict[str, str],
                                                       token: str | None) -> None:
    assert credentials.token_of(headers) == token


def test_behind_a_proxy_a_request_without_a_token_has_no_identity_at_all() -> None:
    source = credentials.Source("https://hub:6443", "/ca.crt")
    assert source.for_request({}) is None
    found = source.for_request({"Authorization": "Bearer t"})
    assert found == credentials.Credentials("https://hub:6443", "/ca.crt", token="t")
    assert found.headers() == {"Authorization": "Bearer t"}


def test_on_a_workstation_every_request_is_the_kubeconfigs_user(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("""
apiVersion: v1
kind: Config
clusters: [{name: hub, cluster: {server: "https://hub.example:6443",
            insecure-skip-tls-verify: true}}]
users: [{name: me, user: {token: my-token}}]
contexts: [{name: hub, context: {cluster: hub, user: me}}]
current-context: hub
""")
    source = credentials.from_kubeconfig(str(kubeconfig))
    mine = source.for_request({"Authorization": "Bearer someone-else"})
    assert mine is not None and (mine.server, mine.token) == ("https://hub.example:6443",
                                                              "my-token")
    with pytest.raises(credentials.CredentialsError, match="no usable kubeconfig"):
        credentials.from_kubeconfig(str(tmp_path / "missing"))


def test_outside_a_pod_the_proxy_mode_needs_the_hubs_address(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(credentials.CredentialsError, match="--hub-server is required"):
        credentials.behind_proxy(None, None)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert credentials.behind_proxy(None, None) == credentials.Source(
        "https://10.0.0.1:443", credentials.IN_CLUSTER_CA)


@pytest.mark.parametrize(("argv", "says"), [
    (["--listen=0.0.0.0:8080"], "serves only you, on a loopback address"),
    (["--hub-server=https://hub:6443"], "--hub-server and --hub-ca go with --proxy"),
    (["--listen=127.0.0.1:http"], "invalid literal"),
])
def test_the_command_refuses_to_serve_a_kubeconfig_to_others(
        argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert console_main.main(argv) == 2
    assert says in capsys.readouterr().err


def mcisvc(name: str, namespace: str = "team-a", **status: Any) -> dict[str, Any]:
    return {"kind": "MultiClusterInferenceService",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "7"},
            "status": status}


def test_the_fleet_view_is_the_command_lines_rows_and_names_what_is_refused() -> None:
    entry = {"cluster": "c1", "phase": "Failed", "ready": False, "reason": "ApplyFailed",
             "message": "bad"}
    store = {"MultiClusterInferenceService": {
        ("team-a", "b"): mcisvc("b", clusters=[entry]),
        ("team-a", "a"): mcisvc("a", clusters=[dict(entry, phase="Ready", ready=True)])}}
    view = fleet.snapshot(store, {"ModelServing": "forbidden: no"})
    # Sorted as `status` sorts them: kind, namespace, name, cluster.
    assert [(r["name"], r["cluster"], r["phase"], r["detail"]) for r in view["rows"]] == [
        ("a", "c1", "Ready", ""), ("b", "c1", "Failed", "ApplyFailed: bad")]
    assert view["refused"] == {"ModelServing": "forbidden: no"}


def test_watch_events_fold_into_the_store() -> None:
    objects: dict[fleet.Key, Any] = {}
    assert fleet.apply_event(objects, "ADDED", mcisvc("m"))
    assert fleet.apply_event(objects, "MODIFIED", mcisvc("m", phase="Ready"))
    assert objects[("team-a", "m")]["status"] == {"phase": "Ready"}
    assert not fleet.apply_event(objects, "BOOKMARK", {"metadata": {"resourceVersion": "9"}})
    assert fleet.apply_event(objects, "DELETED", mcisvc("m"))
    assert not fleet.apply_event(objects, "DELETED", mcisvc("m"))
    assert fleet.version_of(mcisvc("m")) == "7"


def _call(static: Path, path: str, headers: dict[str, str] | None = None,
          method: str = "GET", body: Any = None) -> tuple[int, str]:
    """One request to a console whose hub is an address nothing listens on."""
    async def go() -> tuple[int, str]:
        app = server.make_app(credentials.Source("https://127.0.0.1:9", None), static)
        async with TestClient(TestServer(app)) as http:
            resp = await http.request(method, path, headers=headers or {}, json=body)
            return resp.status, await resp.text()
    return asyncio.run(go())


def test_a_write_without_the_pages_header_is_refused_before_any_hub_call(
        tmp_path: Path) -> None:
    """A page of another site can make the browser send the user's cookies or the proxy's
    token with a form post, but not a custom header: writes need X-Console-Request."""
    token = {"Authorization": "Bearer t"}
    for method, path in (("POST", "/api/apply"), ("DELETE", "/api/object?kind=mcisvc")):
        status, body = _call(tmp_path, path, token, method, {"object": {}})
        assert status == 403 and "X-Console-Request: 1" in body, (method, body)
    status, body = _call(tmp_path, "/api/apply", {**token, "X-Console-Request": "1"}, "POST",
                         {"nothing": 1})
    assert status == 400 and "expected" in body, body


def test_without_a_token_the_api_answers_401_before_any_hub_call(tmp_path: Path) -> None:
    # A call to that hub would fail otherwise than 401.
    for path in ("/api/whoami", "/api/fleet", "/api/fleet/events?namespace=x"):
        status, body = _call(tmp_path, path)
        assert status == 401 and "no user token" in body, (path, body)
    status, body = _call(tmp_path, "/healthz")
    assert (status, body) == (200, "ok")


def test_an_unbuilt_page_says_how_to_build_it(tmp_path: Path) -> None:
    status, body = _call(tmp_path, "/fleet")
    assert status == 503 and "make console" in body
    (tmp_path / "index.html").write_text("<html>page</html>")
    assert _call(tmp_path, "/any/route") == (200, "<html>page</html>")


class _TenantHub:
    """A hub as a tenant reads it: its model, cluster1 selected, no works nor Events."""

    def __init__(self, model: dict[str, Any]) -> None:
        self.model = model

    def intent(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        return self.model

    def placement(self, namespace: str, name: str) -> dict[str, Any]:
        return {"metadata": {"namespace": namespace, "name": name}}

    def decisions(self, namespace: str, placement: str) -> list[dict[str, Any]]:
        return [{"status": {"decisions": [{"clusterName": "cluster1"}]}}]

    def cluster(self, name: str) -> dict[str, Any]:
        from addon_cli.hub import EXIT_FORBIDDEN, CliError

        raise CliError(EXIT_FORBIDDEN, "managedclusters is forbidden")

    def works(self, selector: str, namespace: str | None = None) -> list[dict[str, Any]]:
        from addon_cli.hub import EXIT_FORBIDDEN, CliError

        raise CliError(EXIT_FORBIDDEN, "manifestworks is forbidden")

    def events(self, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
        from addon_cli.hub import EXIT_FORBIDDEN, CliError

        raise CliError(EXIT_FORBIDDEN, "events is forbidden")


def test_a_models_page_is_the_explain_chain_per_cluster_with_what_the_user_may_not_read(
) -> None:
    from addon_cli import troubleshooting
    from addon_cli.console import intent

    model = {"kind": "MultiClusterInferenceService",
             "metadata": {"namespace": "team-a", "name": "iris", "generation": 1},
             "spec": {"placementRef": {"name": "p"}},
             "status": {"observedGeneration": 1, "phase": "Progressing",
                        "conditions": [{"type": "Ready", "status": "False",
                                        "reason": "NotAllClustersReady", "message": "0/2"}],
                        "clusters": [
                            {"cluster": "cluster1", "phase": "Waiting", "ready": False,
                             "reason": "WaitingForPlatform",
                             "waitingFor": ["ServingPlatform Available"]},
                            {"cluster": "cluster2", "phase": "Ready", "ready": True}]}}
    page = intent.page(_TenantHub(model), "MultiClusterInferenceService",  # type: ignore[arg-type]
                       "team-a", "iris")
    assert (page["phase"], page["ready"]) == ("Progressing", {
        "status": "False", "reason": "NotAllClustersReady", "message": "0/2"})
    one = {link["name"]: link for link in page["chains"]["cluster1"]}
    assert list(one) == ["intent", "placement", "status", "work", "next"]
    advice = troubleshooting.advice("WaitingForPlatform")
    assert advice is not None and one["next"]["summary"] == advice.todo
    assert one["work"]["summary"].endswith("not readable with your rights")
    # cluster2 is not among the Placement's decisions: the ManagedCluster read is refused,
    # and the page says so for that cluster instead of failing.
    assert page["chains"]["cluster2"] == [{
        "name": "read", "ok": None, "summary": "not readable with your rights: "
        "managedclusters is forbidden", "evidence": []}]
    assert (page["events"], page["eventsRefused"]) == ([], "events is forbidden")
    assert page["rollout"] == ""


def test_a_rollout_action_is_the_annotation_the_command_line_sets() -> None:
    from addon_api import constants as c
    from addon_cli import views

    waiting = {"phase": "WaitingForApproval", "targetRevision": 3, "step": 1,
               "stableRevision": 2}
    assert views.rollout_action("approve", "mcisvc/m", waiting) == (
        {c.ANNOTATION_ROLLOUT_APPROVE: "3/2"}, "mcisvc/m: step 2 of revision 3 approved")
    assert views.rollout_action("undo", "mcisvc/m", waiting)[0] == {
        c.ANNOTATION_ROLLOUT_UNDO: "3:2"}
    assert views.rollout_action("resume", "mcisvc/m", {})[0] == {
        c.ANNOTATION_ROLLOUT_PAUSE: None}
    for action, roll, says in (("approve", {"phase": "Progressing"}, "waits for no approval"),
                               ("undo", {}, "has no rollout to undo"),
                               ("rewind", {}, "unknown rollout action")):
        with pytest.raises(ValueError, match=says):
            views.rollout_action(action, "mcisvc/m", roll)


def _placement(*expressions: str, **spec: Any) -> dict[str, Any]:
    return {"spec": {"predicates": [{"requiredClusterSelector": {
        "celSelector": {"celExpressions": list(expressions)}}}], **spec}}


@pytest.mark.parametrize(("placement", "names"), [
    (_placement("managedCluster.metadata.name in ['cluster1', 'cluster-2.eu']"),
     ["cluster1", "cluster-2.eu"]),
    (_placement("managedCluster.metadata.name in ['cluster1']"), ["cluster1"]),
    (_placement("managedCluster.metadata.name in []"), []),
    # Anything else chooses its clusters some other way: the form offers the Placement whole.
    (_placement("managedCluster.metadata.name in ['a'] || true"), None),
    (_placement("managedCluster.metadata.name in ['a''b']"), None),
    (_placement("managedCluster.metadata.labels['env'] == 'prod'"), None),
    (_placement("managedCluster.metadata.name in ['a']", "true"), None),
    (_placement("managedCluster.metadata.name in ['a']", numberOfClusters=1), None),
    ({"spec": {"predicates": [{"requiredClusterSelector": {
        "labelSelector": {"matchLabels": {"env": "prod"}},
        "celSelector": {"celExpressions": ["managedCluster.metadata.name in ['a']"]}}}]}}, None),
    ({"spec": {}}, None),
])
def test_a_placement_names_its_clusters_only_in_the_form_the_model_form_writes(
        placement: dict[str, Any], names: list[str] | None) -> None:
    from addon_cli.console.hubapi import listed_clusters

    assert listed_clusters(placement) == names
