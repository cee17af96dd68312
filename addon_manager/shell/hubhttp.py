"""The manager's HTTP connection to the hub API server, over aiohttp (kopf's own client).

:class:`HubHttp` turns the kubernetes client configuration ``main()`` loads (kubeconfig or
in-cluster: server, CA, client certificate, bearer token, basic auth, ``tls-server-name``,
``proxy-url``) into aiohttp requests made on the event loop. The informers
(:mod:`addon_manager.shell.informers`) read through it and the writer
(:mod:`addon_manager.shell.apply`) writes through it: no thread pool, so the writes do not
compete with the event loop for the GIL, and no response is decoded that nobody reads.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from kubernetes import client

TOKEN_SECONDS = 10.0
"""How long a bearer token read from the configuration is used before it is read again (the
kubelet rotates projected tokens well before they expire)."""


def loads(data: bytes) -> Any:
    """Decode a JSON body from the hub.

    orjson first: it decodes the API server's lists in half the time of the json module.
    It refuses nesting deeper than 1,024 levels, which the API server admits in the open
    parts of a schema: the json module (the manager raises the recursion limit) takes those.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


@dataclass(frozen=True)
class Response:
    """What a request got back: the HTTP status, the body, and the ``Retry-After`` header."""

    status: int
    body: bytes
    retry_after: str | None = None

    def json(self) -> Any:
        """The body decoded as JSON."""
        return loads(self.body)

    def message(self) -> str:
        """The API server's message (a Status object's ``message``), else the body's start."""
        try:
            decoded = self.json()
        except ValueError:
            decoded = None
        if isinstance(decoded, Mapping) and decoded.get("message"):
            return str(decoded["message"])
        return self.body[:300].decode("utf-8", "replace")


class HubHttp:
    """One aiohttp session to the hub as the identity of a kubernetes client configuration.

    The bearer token is read from ``cfg`` again every :data:`TOKEN_SECONDS`, so an in-cluster
    token that the kubelet rotates keeps working. ``connections`` bounds the session's open
    connections.
    """

    def __init__(self, cfg: client.Configuration, connections: int = 4) -> None:
        self.cfg = cfg
        self.base = str(cfg.host).rstrip("/")
        self.connections = connections
        self._session: aiohttp.ClientSession | None = None
        self._base_headers: dict[str, str] = {}
        self._headers_until = 0.0

    def _ssl(self) -> ssl.SSLContext | bool:
        if not self.base.startswith("https"):
            return False
        if not self.cfg.verify_ssl:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx = ssl.create_default_context(cafile=self.cfg.ssl_ca_cert or None)
        if self.cfg.cert_file:
            ctx.load_cert_chain(self.cfg.cert_file, self.cfg.key_file or None)
        return ctx

    def _headers(self) -> dict[str, str]:
        now = time.monotonic()
        if self._headers_until <= now:
            # Asking the configuration for the token runs its refresh hook, which re-reads
            # the kubeconfig's or the in-cluster token (a millisecond each time): done once
            # per TOKEN_SECONDS, not once per request.
            token = self.cfg.get_api_key_with_prefix(
                "BearerToken") or self.cfg.get_api_key_with_prefix("authorization")
            self._base_headers = {"Accept": "application/json"}
            if token:
                self._base_headers["Authorization"] = token
            self._headers_until = now + TOKEN_SECONDS
        return dict(self._base_headers)

    def _auth(self) -> aiohttp.BasicAuth | None:
        if self.cfg.username and self.cfg.password:
            return aiohttp.BasicAuth(self.cfg.username, self.cfg.password)
        return None

    def options(self, content_type: str = "") -> dict[str, Any]:
        """Headers, auth, and the kubeconfig's ``tls-server-name`` and ``proxy-url``."""
        headers = self._headers()
        if content_type:
            headers["Content-Type"] = content_type
        options: dict[str, Any] = {"headers": headers, "auth": self._auth()}
        if getattr(self.cfg, "tls_server_name", None):
            options["server_hostname"] = self.cfg.tls_server_name
        if self.cfg.proxy:
            options["proxy"] = self.cfg.proxy
        return options

    def session(self) -> aiohttp.ClientSession:
        """The HTTP session (made on first use, in the running event loop)."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._ssl(), limit=self.connections),
            )
        return self._session

    async def request(
        self, method: str, path: str, *, params: Mapping[str, str] | None = None,
        body: Any = None, content_type: str = "", timeout: float = 60.0,
    ) -> Response:
        """One request, its whole response read.

        Transport failures raise aiohttp's or the OS's errors (the caller decides what to
        retry).
        """
        data = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
        limits = aiohttp.ClientTimeout(total=timeout, sock_connect=15)
        async with self.session().request(
            method, self.base + path, params=params, data=data, timeout=limits,
            **self.options(content_type if data is not None else ""),
        ) as resp:
            return Response(resp.status, await resp.read(), resp.headers.get("Retry-After"))

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()
            self._session = None
