"""The console's HTTP server: the page, and its API over the user's own hub access (aiohttp).

Routes:

- ``GET /`` and ``/assets/*``: the page (built from ``web/`` into ``static/``);
- ``GET /api/whoami``: who the hub says the user is;
- ``GET /api/fleet?namespace=NS``: the fleet view once (every intent x cluster row);
- ``GET /api/fleet/events?namespace=NS``: the same as server-sent events, sent again after
  every change the hub's watches report (no page reloads);
- ``GET /api/intent?kind=K&namespace=NS&name=N``: one intent's page (per cluster why (not),
  its rollout, its Events: :mod:`addon_cli.console.intent`);
- ``GET /api/clusters`` and ``GET /api/cluster?name=C``: the managed clusters (add-on health,
  stack and version, intents), and what runs on one (:mod:`addon_cli.console.clusters`);
- ``GET /api/placements?namespace=NS``: the namespace's Placements and their clusters;
- ``POST /api/rollout`` (``{"kind", "namespace", "name", "action"}``): pause, resume, undo or
  approve a progressive rollout, as ``rollout ACTION`` does;
- ``POST /api/secret`` (``{"namespace", "name", "values"}``): storage credentials written as
  the user; only the key names come back, and nothing ever reads a Secret's values;
- ``POST /api/apply`` (``{"object": ...}``) and ``DELETE /api/object?kind=&namespace=&name=``:
  writes as the user (server-side apply, field manager ``model-serving-console``), refused
  with the hub's words and the fields it names; each needs the ``X-Console-Request: 1`` header;
- ``GET /healthz``: the process answers (no hub call).

Without ``namespace``, every namespace (what a hub admin may list). Each API request reads the
hub with its user's credentials (:mod:`addon_cli.console.credentials`): 401 without any, and
the hub's own refusal, with its status and words, when the user may not.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from pathlib import Path
from typing import Any

from aiohttp import web

from addon_cli import views
from addon_cli.console import clusters, fleet, intent
from addon_cli.console.credentials import Credentials, Source
from addon_cli.console.hubapi import ConsoleHub, HubError, Refusal, UserHub
from addon_cli.hub import EXIT_FORBIDDEN, EXIT_NOT_FOUND, CliError, Hub

log = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("static")
"""Where ``make console`` builds the page (not in the source tree's git)."""
SOURCE_KEY = web.AppKey("source", Source)
STATIC_KEY = web.AppKey("static", Path)
DEBOUNCE_SECONDS = 0.2
"""Changes that come together are sent as one update."""
HEARTBEAT_SECONDS = 15.0
"""An SSE comment this often keeps proxies from closing a quiet stream."""


def _credentials(request: web.Request) -> Credentials:
    found = request.app[SOURCE_KEY].for_request(request.headers)
    if found is None:
        raise web.HTTPUnauthorized(
            text=json.dumps({"message": "no user token: the console reads the hub as its user "
                             "only (X-Forwarded-Access-Token or Authorization: Bearer)"}),
            content_type="application/json")
    return found


def _namespace(request: web.Request) -> str | None:
    namespace = request.query.get("namespace", "").strip()
    return namespace or None


def _error(err: HubError) -> web.Response:
    return web.json_response({"message": err.message}, status=err.status)


async def whoami(request: web.Request) -> web.Response:
    """Who the hub says the user is."""
    async with UserHub(_credentials(request)) as hub:
        try:
            return web.json_response(await hub.whoami())
        except HubError as err:
            return _error(err)


async def _list_all(hub: UserHub, namespace: str | None
                    ) -> tuple[dict[str, dict[fleet.Key, Any]], dict[str, str], dict[str, str]]:
    """Every kind's intents the user may list; the refusals; each kind's list version."""
    store: dict[str, dict[fleet.Key, Any]] = {}
    refused: dict[str, str] = {}
    versions: dict[str, str] = {}
    kinds = list(views.KINDS)
    answers = await asyncio.gather(*(hub.list(kind, namespace) for kind in kinds),
                                   return_exceptions=True)  # the four lists at once
    for kind, answer in zip(kinds, answers, strict=True):
        if isinstance(answer, HubError) and answer.status == 403:
            refused[kind] = answer.message
        elif isinstance(answer, BaseException):
            raise answer
        else:
            items, versions[kind] = answer
            store[kind] = {fleet.key_of(i): i for i in items}
    return store, refused, versions


async def fleet_once(request: web.Request) -> web.Response:
    """The fleet view once."""
    async with UserHub(_credentials(request)) as hub:
        try:
            store, refused, _ = await _list_all(hub, _namespace(request))
        except HubError as err:
            return _error(err)
    if len(refused) == len(views.KINDS):
        return web.json_response({"message": next(iter(refused.values()))}, status=403)
    return web.json_response(fleet.snapshot(store, refused))


async def fleet_events(request: web.Request) -> web.StreamResponse:
    """The fleet view as server-sent events: now, then after every change."""
    namespace = _namespace(request)
    async with UserHub(_credentials(request)) as hub:
        try:
            store, refused, versions = await _list_all(hub, namespace)
        except HubError as err:
            return _error(err)
        if len(refused) == len(views.KINDS):
            return web.json_response({"message": next(iter(refused.values()))}, status=403)
        response = web.StreamResponse(headers={
            "Content-Type": "text/event-stream", "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no"})
        await response.prepare(request)
        changed = asyncio.Event()
        watchers = [asyncio.create_task(_watch(hub, kind, namespace, versions[kind],
                                               store[kind], changed))
                    for kind in store]
        try:
            await _send(response, "fleet", fleet.snapshot(store, refused))
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), HEARTBEAT_SECONDS)
                if not changed.is_set():
                    await response.write(b": still here\n\n")
                    continue
                await asyncio.sleep(DEBOUNCE_SECONDS)
                changed.clear()
                await _send(response, "fleet", fleet.snapshot(store, refused))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
        return response


async def _send(response: web.StreamResponse, event: str, data: Any) -> None:
    await response.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())


async def _watch(hub: UserHub, kind: str, namespace: str | None, version: str,
                 objects: dict[fleet.Key, Any], changed: asyncio.Event) -> None:
    """Keep one kind's store current from the hub's watch; set ``changed`` on each change."""
    while True:
        try:
            async for event, obj in hub.watch(kind, namespace, version):
                version = fleet.version_of(obj) or version
                if fleet.apply_event(objects, event, obj):
                    changed.set()
        except HubError as err:
            if err.status != 410:  # anything but "too old": wait a little, then again
                log.info("watching %s: %s", kind, err.message)
                await asyncio.sleep(2.0)
            items, version = await hub.list(kind, namespace)
            objects.clear()
            objects.update({fleet.key_of(i): i for i in items})
            changed.set()


async def intent_page(request: web.Request) -> web.Response:
    """One intent's page: per cluster why (not), its rollout, its hub Events."""
    query = request.query
    try:
        kind = views.kind_of(query.get("kind", ""))
    except ValueError as err:
        return web.json_response({"message": str(err)}, status=400)
    namespace, name = query.get("namespace", ""), query.get("name", "")
    if not namespace or not name:
        return web.json_response({"message": "namespace and name are required"}, status=400)
    return await _read(request, intent.page, kind, namespace, name)


CSRF_HEADER = "X-Console-Request"
"""A header every write from the page carries. A page of another site cannot send it (a custom
header needs a CORS preflight, which the console never grants), so a write without it is not
the console's page acting for its user."""


def _write_allowed(request: web.Request) -> None:
    if request.headers.get(CSRF_HEADER) != "1":
        raise web.HTTPForbidden(text=json.dumps({"message": (
            f"writes need the {CSRF_HEADER}: 1 header (the console's page sends it)")}),
            content_type="application/json")


def _refused(err: HubError) -> web.Response:
    causes = err.causes if isinstance(err, Refusal) else []
    return web.json_response({"message": err.message, "causes": causes}, status=err.status)


async def apply(request: web.Request) -> web.Response:
    """Create or change one object as the user (server-side apply; the hub judges it)."""
    _write_allowed(request)
    cred = _credentials(request)
    try:
        obj = (await request.json()).get("object")
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        return web.json_response({"message": "expected {\"object\": {...}}", "causes": []},
                                 status=400)
    async with ConsoleHub(cred) as hub:
        try:
            done = await hub.apply(obj)
        except HubError as err:
            return _refused(err)
    meta = done.get("metadata") or {}
    return web.json_response({"kind": done.get("kind"), "namespace": meta.get("namespace"),
                              "name": meta.get("name"), "generation": meta.get("generation")})


async def delete(request: web.Request) -> web.Response:
    """Delete one object as the user."""
    _write_allowed(request)
    cred = _credentials(request)
    query = request.query
    kind = query.get("kind", "")
    with contextlib.suppress(ValueError):
        kind = views.kind_of(kind)
    async with ConsoleHub(cred) as hub:
        try:
            await hub.delete(kind, query.get("namespace", ""), query.get("name", ""))
        except HubError as err:
            return _refused(err)
    return web.json_response({"deleted": True})


async def rollout(request: web.Request) -> web.Response:
    """A rollout action (pause, resume, undo, approve), as the user.

    The annotation the command line's ``rollout ACTION`` sets
    (:func:`addon_cli.views.rollout_action`).
    """
    _write_allowed(request)
    cred = _credentials(request)
    try:
        body = await request.json()
        kind = views.kind_of(str(body.get("kind") or ""))
        namespace, name = str(body["namespace"]), str(body["name"])
        action = str(body.get("action") or "")
        to_revision = int(body["toRevision"]) if body.get("toRevision") else None
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        return web.json_response({"message": f"bad rollout request: {err}", "causes": []},
                                 status=400)
    async with ConsoleHub(cred) as hub:
        try:
            found = await hub.get(kind, namespace, name)
            roll = (found.get("status") or {}).get("rollout") or {}
            what = f"{views.short(kind)}/{name}"
            try:
                annotations, done = views.rollout_action(action, what, roll, to_revision)
            except ValueError as err:
                return web.json_response({"message": str(err), "causes": []}, status=409)
            await hub.annotate(kind, namespace, name, annotations)
        except HubError as err:
            return _refused(err)
    return web.json_response({"message": done})


async def secret(request: web.Request) -> web.Response:
    """Write a Secret's values (storage credentials) as the user; answer only its key names.

    The values are written once and never read back or shown: the console has no endpoint
    that returns a Secret's data.
    """
    _write_allowed(request)
    cred = _credentials(request)
    try:
        body = await request.json()
        namespace, name = str(body["namespace"]), str(body["name"])
        values = {str(k): str(v) for k, v in dict(body["values"]).items()}
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        return web.json_response({"message": f"bad secret request: {err}", "causes": []},
                                 status=400)
    async with ConsoleHub(cred) as hub:
        try:
            keys = await hub.put_secret(namespace, name, values)
        except HubError as err:
            return _refused(err)
    return web.json_response({"namespace": namespace, "name": name, "keys": keys})


async def placements(request: web.Request) -> web.Response:
    """The namespace's Placements and the clusters each chose (the model form's picker)."""
    async with ConsoleHub(_credentials(request)) as hub:
        try:
            return web.json_response(await hub.placements(request.query.get("namespace", "")))
        except HubError as err:
            return _error(err)


async def _read(request: web.Request, read: Any, *args: Any) -> web.Response:
    """``read(hub, *args)`` in a thread, with the user's Hub; CliError as the hub's status."""
    hub = Hub(configuration=_credentials(request).configuration())
    try:
        return web.json_response(await asyncio.to_thread(read, hub, *args))
    except CliError as err:
        status = {EXIT_FORBIDDEN: 403, EXIT_NOT_FOUND: 404}.get(err.code, 502)
        return web.json_response({"message": str(err)}, status=status)
    finally:
        hub.api.close()  # type: ignore[no-untyped-call]


async def clusters_page(request: web.Request) -> web.Response:
    """Every managed cluster (the viewer role's read)."""
    return await _read(request, clusters.clusters)


async def cluster_page(request: web.Request) -> web.Response:
    """One managed cluster and what runs there."""
    name = request.query.get("name", "")
    if not name:
        return web.json_response({"message": "name is required"}, status=400)
    return await _read(request, clusters.cluster, name)


async def healthz(_: web.Request) -> web.Response:
    """The process answers."""
    return web.Response(text="ok")


async def page(request: web.Request) -> web.StreamResponse:
    """The page (every path that is not the API's: the page routes itself)."""
    index = request.app[STATIC_KEY] / "index.html"
    if not index.is_file():
        return web.Response(status=503, text=(
            "the console's page is not built: run `make console` (it builds addon_cli/console/"
            "web with npm into addon_cli/console/static); the API under /api answers already"))
    return web.FileResponse(index, headers={"Cache-Control": "no-cache"})


def make_app(source: Source, static: Path = STATIC) -> web.Application:
    """The console's application, reading the hub as each request's user."""
    app = web.Application()
    app[SOURCE_KEY] = source
    app[STATIC_KEY] = static
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/api/whoami", whoami)
    app.router.add_get("/api/fleet", fleet_once)
    app.router.add_get("/api/fleet/events", fleet_events)
    app.router.add_get("/api/intent", intent_page)
    app.router.add_get("/api/clusters", clusters_page)
    app.router.add_get("/api/cluster", cluster_page)
    app.router.add_get("/api/placements", placements)
    app.router.add_post("/api/apply", apply)
    app.router.add_post("/api/rollout", rollout)
    app.router.add_post("/api/secret", secret)
    app.router.add_delete("/api/object", delete)
    if (static / "assets").is_dir():
        app.router.add_static("/assets", static / "assets")
    app.router.add_get("/{tail:.*}", page)
    return app
