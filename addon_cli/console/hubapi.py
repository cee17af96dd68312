"""The hub's API as one console user reaches it: lists, watches, who they are (async I/O).

Each call carries the user's credentials (:class:`~addon_cli.console.credentials.Credentials`)
and nothing else; a refusal comes back as :class:`HubError` with the API server's own words,
which the page shows as they are.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any, Self

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
    """The hub, read (and, through :class:`Writes`, written) with one user's credentials."""

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self.session = aiohttp.ClientSession(
            base_url=credentials.server.rstrip("/"), headers=credentials.headers(),
            connector=aiohttp.TCPConnector(ssl=credentials.ssl_context()),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=None))

    async def close(self) -> None:
        """Close the session (its connections)."""
        await self.session.close()

    async def __aenter__(self) -> Self:
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


FIELD_MANAGER = "model-serving-console"
"""The field manager of what the console writes (server-side apply), as the user."""
WRITABLE = {
    **{kind: (c.GROUP, c.VERSION, crd.plural) for kind, crd in KINDS.items()},
    "Placement": ("cluster.open-cluster-management.io", "v1beta1", "placements"),
}
"""The kinds the console writes (as the user, whose rights decide): the add-on's intents and
the Placements that choose their clusters."""


class Refusal(HubError):
    """The hub refused a write: its words, and the fields it named (admission, schema)."""

    def __init__(self, status: int, message: str, causes: list[dict[str, str]]) -> None:
        super().__init__(status, message)
        self.causes = causes


def _object_path(kind: str, namespace: str, name: str = "") -> str:
    group, version, plural = WRITABLE[kind]
    tail = f"/{name}" if name else ""
    return f"/apis/{group}/{version}/namespaces/{namespace}/{plural}{tail}"


async def _write_refusal(resp: aiohttp.ClientResponse) -> Refusal:
    text = await resp.text()
    try:
        body = json.loads(text)
    except ValueError:
        body = {"message": text}
    causes = [{"field": str(x.get("field") or ""), "message": str(x.get("message") or ""),
               "reason": str(x.get("reason") or "")}
              for x in (body.get("details") or {}).get("causes") or []]
    return Refusal(resp.status, str(body.get("message") or text or resp.reason), causes)


class Writes:
    """What the console writes, as its user (mixed into :class:`UserHub`)."""

    session: aiohttp.ClientSession

    async def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply ``obj`` as the user; :class:`Refusal` with the hub's words."""
        kind = str(obj.get("kind") or "")
        meta = obj.get("metadata") or {}
        if kind not in WRITABLE:
            raise Refusal(400, f"the console does not write {kind or 'objects without a kind'}"
                          f" (it writes {', '.join(sorted(WRITABLE))})",
                          [{"field": "kind", "message": "not written here", "reason": ""}])
        path = _object_path(kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        async with self.session.patch(
                path, params={"fieldManager": FIELD_MANAGER, "fieldValidation": "Strict"},
                data=json.dumps(obj), headers={"Content-Type": "application/apply-patch+yaml"},
                timeout=aiohttp.ClientTimeout(30)) as resp:
            if resp.status >= 300:
                raise await _write_refusal(resp)
            result: dict[str, Any] = await resp.json()
            return result

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        """One object, read as the user."""
        async with self.session.get(_object_path(kind, namespace, name),
                                    timeout=aiohttp.ClientTimeout(30)) as resp:
            if resp.status >= 300:
                raise await _write_refusal(resp)
            found: dict[str, Any] = await resp.json()
            return found

    async def annotate(self, kind: str, namespace: str, name: str,
                       annotations: dict[str, str | None]) -> None:
        """Set (None: remove) annotations of one object, as the user (a merge patch)."""
        async with self.session.patch(
                _object_path(kind, namespace, name), params={"fieldManager": FIELD_MANAGER},
                data=json.dumps({"metadata": {"annotations": annotations}}),
                headers={"Content-Type": "application/merge-patch+json"},
                timeout=aiohttp.ClientTimeout(30)) as resp:
            if resp.status >= 300:
                raise await _write_refusal(resp)

    async def put_secret(self, namespace: str, name: str, values: dict[str, str]) -> list[str]:
        """Write a Secret's values as the user; its key names (the values never come back).

        Server-side applied whole: keys not given are removed, so what the form shows (the
        key names) is all there is.
        """
        body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": name, "namespace": namespace,
                             "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}},
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}}
        async with self.session.patch(
                f"/api/v1/namespaces/{namespace}/secrets/{name}",
                params={"fieldManager": FIELD_MANAGER, "fieldValidation": "Strict",
                        "force": "true"},
                data=json.dumps(body), headers={"Content-Type": "application/apply-patch+yaml"},
                timeout=aiohttp.ClientTimeout(30)) as resp:
            if resp.status >= 300:
                raise await _write_refusal(resp)
            stored = await resp.json()
        return sorted((stored.get("data") or {}).keys())

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        """Delete one object as the user (its finalizers then run as usual)."""
        if kind not in WRITABLE:
            raise Refusal(400, f"the console does not delete {kind}", [])
        async with self.session.delete(_object_path(kind, namespace, name),
                                       timeout=aiohttp.ClientTimeout(30)) as resp:
            if resp.status >= 300:
                raise await _write_refusal(resp)

    async def placements(self, namespace: str) -> list[dict[str, Any]]:
        """The Placements of a namespace with the clusters each has decided (for pickers)."""
        group, version, plural = WRITABLE["Placement"]
        base = f"/apis/{group}/{version}/namespaces/{namespace}"
        async with self.session.get(f"{base}/{plural}",
                                    timeout=aiohttp.ClientTimeout(30)) as resp:
            if resp.status >= 300:
                raise await _refusal(resp)
            items = (await resp.json()).get("items") or []
        async with self.session.get(f"{base}/placementdecisions",
                                    timeout=aiohttp.ClientTimeout(30)) as resp:
            if resp.status >= 300:
                raise await _refusal(resp)
            decisions = (await resp.json()).get("items") or []
        chosen: dict[str, list[str]] = {}
        for d in decisions:
            owner = ((d.get("metadata") or {}).get("labels") or {}).get(
                "cluster.open-cluster-management.io/placement", "")
            chosen.setdefault(owner, []).extend(
                str(x.get("clusterName")) for x in (d.get("status") or {}).get("decisions") or [])
        return [{"name": str((p.get("metadata") or {}).get("name")),
                 "clusters": sorted(chosen.get(str((p.get("metadata") or {}).get("name")), [])),
                 "names": listed_clusters(p)}
                for p in items]


_NAME = r"'[a-z0-9.-]+'"
_LISTED = re.compile(rf"^managedCluster\.metadata\.name in \[((?:{_NAME}(?:, {_NAME})*)?)\]$")


def listed_clusters(placement: Mapping[str, Any]) -> list[str] | None:
    """The clusters a Placement names one by one, or None when it selects them otherwise.

    A Placement names its clusters when its only predicate is one CEL expression of the form
    the console's model form writes for an explicit cluster list
    (``managedCluster.metadata.name in ['cluster1', 'cluster2']``) and it sets nothing else
    that narrows the choice (number of clusters, prioritizers aside).
    """
    spec = placement.get("spec") or {}
    predicates = spec.get("predicates") or []
    if len(predicates) != 1 or spec.get("numberOfClusters") is not None:
        return None
    selector = predicates[0].get("requiredClusterSelector") or {}
    if set(selector) != {"celSelector"}:
        return None
    expressions = (selector.get("celSelector") or {}).get("celExpressions") or []
    found = _LISTED.match(expressions[0]) if len(expressions) == 1 else None
    if found is None:
        return None
    return [name.strip("'") for name in found.group(1).split(", ") if name]


class ConsoleHub(UserHub, Writes):
    """The hub as one console user reads and writes it."""
