"""HubWriter against a scripted local HTTP server: the requests it makes (paths, verbs,
content types, field manager, force), retries with backoff on throttling, server errors,
conflicts and dropped connections, what it gives up on, and which calls count as writes."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from kubernetes import client

from addon_manager.shell import apply, hubhttp, metrics

Answer = tuple[int, dict[str, Any]] | str  # (status, JSON body), or "drop" the connection


@dataclass
class Seen:
    """One request the server got."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: Any
    auth: str


@dataclass
class Server:
    """Answers requests from a script, in order; 200 {} once the script is spent."""

    script: list[Answer] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.seen.append(Seen(request.method, request.path, dict(request.query),
                              request.content_type, json.loads(raw) if raw else None,
                              request.headers.get("Authorization", "")))
        answer = self.script.pop(0) if self.script else (200, {})
        if answer == "drop":
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        status, body = answer
        headers = {"Retry-After": "0"} if status == 429 else {}
        return web.json_response(body, status=status, headers=headers)


def _writes() -> float:
    return sum(
        s.value
        for m in metrics.API_WRITES.collect()
        for s in m.samples
        if s.name.endswith("_total")
    )


def _writer(port: int) -> apply.HubWriter:
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    cfg.api_key = {"authorization": "Bearer t0ken"}
    return apply.HubWriter(cfg, concurrency=2, attempts=4)


def run(script: list[Answer], body: Callable[[apply.HubWriter], Awaitable[Any]]) -> tuple[
        Any, list[Seen]]:
    """Serve ``script``, run ``body`` with a writer pointed at the server; its result and
    the requests seen."""
    server = Server(list(script))

    async def main() -> Any:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", server.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        writer = _writer(port)
        try:
            return await body(writer)
        finally:
            await writer.close()
            await runner.cleanup()

    return asyncio.run(main()), server.seen


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    real = asyncio.sleep

    async def quick(_: float) -> None:
        await real(0)

    monkeypatch.setattr(asyncio, "sleep", quick)


WORK = {"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "w", "namespace": "c1"}, "spec": {}}
WORK_PATH = "/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks/w"


def test_apply_is_a_server_side_apply_as_the_field_manager() -> None:
    _, seen = run([], lambda w: w.apply_work(WORK, force=False))
    [req] = seen
    assert (req.method, req.path, req.content_type) == (
        "PATCH", WORK_PATH, "application/apply-patch+yaml")
    assert req.query == {"fieldManager": "model-serving-addon", "force": "false"}
    assert req.body == WORK and req.auth == "Bearer t0ken"
    _, seen = run([], lambda w: w.apply_work(WORK, force=True))
    assert seen[0].query["force"] == "true"


def test_retries_throttling_server_errors_and_conflicts() -> None:
    before = _writes()
    _, seen = run([(429, {}), (503, {}), (409, {"message": "conflict"})],
                  lambda w: w.apply_work(WORK, force=True))
    assert len(seen) == 4 and _writes() - before == 4  # every attempt is a write


def test_gives_up_and_does_not_retry_client_errors() -> None:
    async def refused(w: apply.HubWriter) -> apply.WriteError:
        with pytest.raises(apply.WriteError) as err:
            await w.apply_work(WORK, force=True)
        return err.value

    err, seen = run([(422, {"kind": "Status", "message": "spec.x: Invalid value"})], refused)
    assert err.status == 422 and len(seen) == 1
    assert "HTTP 422" in str(err) and "spec.x: Invalid value" in str(err)
    err, seen = run([(500, {})] * 10, refused)
    assert err.status == 500 and len(seen) == 4

    async def foreign(w: apply.HubWriter) -> apply.WriteError:
        with pytest.raises(apply.WriteError) as err:
            await w.apply_work(WORK, force=False)
        return err.value

    # a conflict on a non-forced apply is someone else's work: not retried, message kept
    conflict = "Apply failed with 1 conflict: conflict with \"x\": .spec.workload.manifests"
    err, seen = run([(409, {"message": conflict})], foreign)
    assert err.status == 409 and len(seen) == 1 and ".spec.workload.manifests" in str(err)


def test_retries_a_dropped_connection_and_reports_a_dead_server() -> None:
    """What a restarting API server does to a request (connection closed mid-request) is
    retried; a server that is not there ends in a WriteError, never another exception that
    would abort a whole reconcile."""
    _, seen = run(["drop", "drop"], lambda w: w.apply_work(WORK, force=True))
    assert len(seen) == 3
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    writer = _writer(port)

    async def main() -> None:
        try:
            with pytest.raises(apply.WriteError):
                await writer.delete_work("c1", "w")
        finally:
            await writer.close()

    asyncio.run(main())


def test_gone_is_fine_for_delete_status_and_an_existing_addon() -> None:
    async def calls(w: apply.HubWriter) -> None:
        await w.delete_work("c1", "w")
        await w.patch_status("modelserving.opendatahub.io", "v1alpha1", "modelservings",
                             "ns", "ms", {"phase": "Ready"})
        await w.ensure_addon("c1")

    _, seen = run([(404, {}), (404, {}), (409, {})], calls)
    assert [(s.method, s.path) for s in seen] == [
        ("DELETE", WORK_PATH),
        ("PATCH", "/apis/modelserving.opendatahub.io/v1alpha1/namespaces/ns/modelservings/ms"
                  "/status"),
        ("POST", "/apis/addon.open-cluster-management.io/v1alpha1/namespaces/c1"
                 "/managedclusteraddons"),
    ]
    assert seen[1].content_type == "application/merge-patch+json"
    assert seen[1].query["fieldValidation"] == "Ignore"
    assert seen[1].body == {"status": {"phase": "Ready"}}
    assert seen[2].body["metadata"]["name"] == "model-serving"


def test_secret_reads_are_not_writes() -> None:
    async def reads(w: apply.HubWriter) -> list[Any]:
        return [await w.read_secret("ns", "s"), await w.read_secret("ns", "gone")]

    before = _writes()
    got, seen = run([(200, {"data": {"k": "dg=="}}), (404, {})], reads)
    assert got == [{"k": "dg=="}, None]
    assert [s.path for s in seen] == ["/api/v1/namespaces/ns/secrets/s",
                                      "/api/v1/namespaces/ns/secrets/gone"]
    assert _writes() == before

    async def forbidden(w: apply.HubWriter) -> int:
        with pytest.raises(apply.WriteError) as err:
            await w.read_secret("ns", "s")
        return err.value.status

    assert run([(403, {"message": "forbidden"})], forbidden)[0] == 403


def test_a_rotated_token_is_used_within_token_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The configuration's token is read once per TOKEN_SECONDS (reading it runs the
    kubeconfig's refresh hook), not per request, and a rotated one is picked up after."""
    now = {"t": 1000.0}
    monkeypatch.setattr(hubhttp.time, "monotonic", lambda: now["t"])
    reads = {"n": 0}

    async def calls(w: apply.HubWriter) -> None:
        def refresh(cfg: client.Configuration) -> None:
            reads["n"] += 1
            cfg.api_key = {"authorization": f"Bearer token-{reads['n']}"}

        w.http.cfg.refresh_api_key_hook = refresh
        for _ in range(3):
            await w.delete_work("c1", "w")
        now["t"] += hubhttp.TOKEN_SECONDS + 1
        await w.delete_work("c1", "w")

    _, seen = run([], calls)
    tokens = [s.auth for s in seen]
    assert tokens[:3] == [tokens[0]] * 3 and tokens[3] != tokens[0]
    assert reads["n"] == 4  # two lookups (BearerToken, authorization) per refresh


def test_bodies_decode_as_the_json_module_would_even_past_orjsons_nesting_limit() -> None:
    import sys

    from addon_manager.shell.main import RECURSION_LIMIT

    body = {"items": [{"metadata": {"name": "w", "resourceVersion": "12"}, "n": 1.5, "b": None,
                       "s": "é\u2028"}]}
    raw = json.dumps(body).encode()
    assert hubhttp.loads(raw) == json.loads(raw)
    # the API server admits 10,000 levels in a schema's open parts; orjson stops at 1,024
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION_LIMIT))  # as the manager's main() does
    try:
        decoded = hubhttp.loads(deep)
    finally:
        sys.setrecursionlimit(limit)
    depth = 0
    while isinstance(decoded, dict):
        decoded, depth = decoded["a"], depth + 1
    assert (depth, decoded) == (5000, 1)
    with pytest.raises(ValueError):
        hubhttp.loads(b'{"a": ')  # what neither decodes is still an error


def test_a_work_write_whose_turn_comes_after_its_shard_went_is_not_sent() -> None:
    """Sharded managers: ``holds`` is asked when a write gets its turn (the writer sends at
    most ``concurrency``, 2, at once), not when it was queued. Four applies queued at once by
    a replica whose shard goes once the first write is answered: the two sent at once reach
    the hub, the other two are withheld (before, they were sent with the old epoch and the
    hub's fence refused them, after the new holder had started)."""
    sent: list[int] = []

    async def fan_out(w: apply.HubWriter) -> list[BaseException | None]:
        async def one(i: int) -> None:
            body = {**WORK, "metadata": {"name": f"w{i}", "namespace": "c1"}}
            await w.apply_work(body, force=True, holds=lambda: not sent)
            sent.append(i)

        return await asyncio.gather(*(one(i) for i in range(4)), return_exceptions=True)

    results, seen = run([], fan_out)
    assert [r is None for r in results] == [True, True, False, False]
    assert all(isinstance(r, apply.Withheld) for r in results[2:])
    assert [s.path.rsplit("/", 1)[1] for s in seen] == ["w0", "w1"]

    async def delete(w: apply.HubWriter) -> None:
        with pytest.raises(apply.Withheld):
            await w.delete_work("c1", "w", holds=lambda: False)

    _, seen = run([], delete)
    assert seen == []
