"""The hub's API as one console user reaches it: lists, watches, who they are (async I/O).

Each call carries the user's credentials (:class:`~addon_cli.console.credentials.Credentials`)
and nothing else; a refusal comes back as :class:`HubError` with the API server's own words,
which the page shows as they are.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from addon_api import constants as c
from addon_cli.console.credentials import Credentials
from addon_cli.views import KINDS

WATCH_SECONDS = 240
"""How long one watch request lasts before the console starts the next (from where it was)."""


class HubError(Exception):
    """The hub refused or failed a request: its HTTP status and its message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _path(kind: str, namespace: str | None) -> str:
    plural = KINDS[kind].plural
    where = f"namespaces/{namespace}/" if namespace else ""
    return f"/apis/{c.GROUP}/{c.VERSION}/{where}{plural}"


async def _refusal(resp: aiohttp.ClientResponse) -> HubError:
    text = await resp.text()
    try:
        message = str(json.loads(text).get("message") or text)
    except (ValueError, AttributeError):
        message = text
    return HubError(resp.status, message.strip() or resp.reason or f"HTTP {resp.status}")


class UserHub:
    """The hub, read with one user's credentials over one HTTP session."""

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self.session = aiohttp.ClientSession(
            base_url=credentials.server.rstrip("/"), headers=credentials.headers(),
            connector=aiohttp.TCPConnector(ssl=credentials.ssl_context()),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=None))

    async def close(self) -> None:
        """Close the session (its connections)."""
        await self.session.close()

    async def __aenter__(self) -> UserHub:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def whoami(self) -> dict[str, Any]:
        """Who the hub says the user is: ``{"username": ..., "groups": [...]}``."""
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        async with self.session.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                     json=review, timeout=aiohttp.ClientTimeout(15)) as resp:
            if resp.status >= 300:
                raise await _refusal(resp)
            info = ((await resp.json()).get("status") or {}).get("userInfo") or {}
        return {"username": str(info.get("username") or ""),
                "groups": [str(g) for g in info.get("groups") or []]}

    async def list(self, kind: str, namespace: str | None) -> tuple[list[dict[str, Any]], str]:
        """The intents of ``kind`` (in ``namespace``; None: all) and the list's version.

        The version is where a watch of them starts.
        """
        async with self.session.get(_path(kind, namespace),
                                    timeout=aiohttp.ClientTimeout(30)) as resp:
            if resp.status >= 300:
                raise await _refusal(resp)
            body = await resp.json()
        items = [dict(i, kind=kind) for i in body.get("items") or []]
        return items, str((body.get("metadata") or {}).get("resourceVersion") or "")

    async def watch(self, kind: str, namespace: str | None, version: str
                    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """The changes to the intents of ``kind`` after ``version``: (type, object) pairs.

        Ends after :data:`WATCH_SECONDS` (the caller watches again from the last version it
        saw); a version too old for the server raises HubError 410 (the caller lists again).
        """
        params = {"watch": "1", "resourceVersion": version, "allowWatchBookmarks": "true",
                  "timeoutSeconds": str(WATCH_SECONDS)}
        async with self.session.get(_path(kind, namespace), params=params) as resp:
            if resp.status >= 300:
                raise await _refusal(resp)
            pending = b""
            async for chunk in resp.content.iter_any():  # an event may exceed a line buffer
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    obj = dict(event.get("object") or {})
                    if event.get("type") == "ERROR":
                        raise HubError(int(obj.get("code") or 500),
                                       str(obj.get("message") or ""))
                    yield str(event.get("type")), dict(obj, kind=kind)
