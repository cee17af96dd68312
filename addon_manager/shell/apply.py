"""Writes to the hub API: server-side apply of ManifestWorks, deletes, status, add-ons.

All I/O of the manager goes through :class:`HubWriter`: it bounds concurrency, retries
throttling, server errors and conflicts with backoff, and counts every write request
(``model_serving_api_writes_total``) so tests can check that a steady state writes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
from kubernetes import client

from addon_api import constants as c
from addon_manager.shell import metrics
from addon_manager.shell.hubhttp import HubHttp, Response

T = TypeVar("T")
log = logging.getLogger(__name__)

WORK_GROUP, WORK_VERSION, WORK_PLURAL = "work.open-cluster-management.io", "v1", "manifestworks"
ADDON_GROUP, ADDON_VERSION, ADDON_PLURAL = (
    "addon.open-cluster-management.io", "v1alpha1", "managedclusteraddons",
)
RETRIABLE = {409, 429, 500, 502, 503, 504}
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
MERGE_CONTENT_TYPE = "application/merge-patch+json"


class WriteError(RuntimeError):
    """A write failed for good (after retries, or not retriable); ``status`` is the HTTP code."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class HttpStatus(Exception):
    """The API server answered a write with an error status (raised inside a request)."""

    def __init__(self, response: Response) -> None:
        super().__init__(f"HTTP {response.status}")
        self.response = response


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _path(group: str, version: str, namespace: str, plural: str, name: str = "") -> str:
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    return f"{base}/namespaces/{namespace}/{plural}" + (f"/{name}" if name else "")


Holds = Callable[[], bool]
"""Whether this replica still holds the shard a write is made by (sharded managers)."""


class Withheld(Exception):
    """A work write not sent: the replica handed over the shard it was to be written by.

    It did while the write waited for its turn (:class:`HubWriter`'s concurrency).
    """


class HubWriter:
    """Bounded, retrying, counted access to the hub API server (async, on the event loop)."""

    def __init__(
        self, cfg: client.Configuration, concurrency: int = 16, attempts: int = 6
    ) -> None:
        self.http = HubHttp(cfg, connections=concurrency)
        self.attempts = attempts
        self.concurrency = concurrency
        self._sem: asyncio.Semaphore | None = None

    async def close(self) -> None:
        """Close the HTTP session."""
        await self.http.close()

    async def _call(
        self, verb: str, resource: str, fn: Callable[[], Awaitable[T]], *, write: bool = True,
        retry_conflict: bool = True, holds: Holds | None = None,
    ) -> T:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        delay = 0.2
        for attempt in range(1, self.attempts + 1):
            async with self._sem:
                if holds is not None and not holds():  # asked at its turn, not when queued
                    raise Withheld(f"{verb} {resource}: not sent, the shard was handed over")
                if write:
                    metrics.API_WRITES.labels(verb, resource).inc()
                try:
                    return await fn()
                except HttpStatus as err:
                    status = err.response.status
                    retriable = status in RETRIABLE and (status != 409 or retry_conflict)
                    if not retriable or attempt == self.attempts:
                        raise WriteError(
                            f"{verb} {resource}: HTTP {status}: {err.response.message()}", status,
                        ) from err
                    wait = _retry_after(err.response.retry_after) or delay
                except (TimeoutError, OSError, aiohttp.ClientError) as err:
                    # Refused, reset or dropped while the API server or etcd restarts: no
                    # status to judge by, so retried like a server error.
                    if attempt == self.attempts:
                        raise WriteError(f"{verb} {resource}: {err!r}") from err
                    wait = delay
            log.info("retrying %s %s in %.1fs (attempt %d)", verb, resource, wait, attempt)
            await asyncio.sleep(wait * (0.75 + random.random() / 2))
            delay = min(delay * 2, 5.0)
        raise AssertionError("unreachable")

    async def _send(
        self, method: str, path: str, *, params: dict[str, str] | None = None, body: Any = None,
        content_type: str = "", ok: tuple[int, ...] = (),
    ) -> Response:
        """One request; a status >= 400 not in ``ok`` raises :class:`HttpStatus`."""
        response = await self.http.request(
            method, path, params=params, body=body,
            content_type=content_type or ("application/json" if body is not None else ""),
        )
        if response.status >= 400 and response.status not in ok:
            raise HttpStatus(response)
        return response

    async def apply_work(self, body: dict[str, Any], *, force: bool,
                         holds: Holds | None = None) -> int | None:
        """Server-side apply one ManifestWork as field manager ``model-serving-addon``.

        ``force`` only for works already known to be ours: a work someone else manages
        makes a non-forced apply fail with a conflict instead of being taken over. Returns
        the work's resourceVersion after the write (None when the answer has none).
        ``holds`` (sharded managers) is asked right before each attempt is sent: once it
        says no, :class:`Withheld` is raised and nothing is sent.
        """
        meta = body["metadata"]
        path = _path(WORK_GROUP, WORK_VERSION, meta["namespace"], WORK_PLURAL, meta["name"])
        params = {"fieldManager": c.FIELD_MANAGER, "force": "true" if force else "false"}
        response = await self._call(
            "apply", WORK_PLURAL,
            lambda: self._send("PATCH", path, params=params, body=body,
                               content_type=APPLY_CONTENT_TYPE),
            retry_conflict=force, holds=holds,
        )
        return resource_version_of(response.body)

    async def delete_work(self, namespace: str, name: str, *, holds: Holds | None = None
                          ) -> None:
        """Delete one ManifestWork; one already gone is fine.

        Foreground deletion on the spoke is the work's own ``deleteOption``. ``holds`` as
        for :meth:`apply_work`.
        """
        path = _path(WORK_GROUP, WORK_VERSION, namespace, WORK_PLURAL, name)
        await self._call("delete", WORK_PLURAL,
                         lambda: self._send("DELETE", path, ok=(404,)), holds=holds)

    async def patch_status(
        self, group: str, version: str, plural: str, namespace: str, name: str,
        status: dict[str, Any],
    ) -> None:
        """Merge-patch the status subresource of one intent (404 means it is gone: ignored).

        Fields the installed CRD does not know (a manager newer than its CRDs: ``helm
        upgrade`` leaves CRDs alone) are dropped by the API server without a warning each
        (``fieldValidation=Ignore``); with thousands of cluster entries the warning headers
        alone could exceed what an HTTP client accepts and fail every status write.
        """
        path = _path(group, version, namespace, plural, name) + "/status"
        params = {"fieldManager": c.FIELD_MANAGER, "fieldValidation": "Ignore"}
        await self._call(
            "patch-status", plural,
            lambda: self._send("PATCH", path, params=params, body={"status": status},
                               content_type=MERGE_CONTENT_TYPE, ok=(404,)),
        )

    async def ensure_addon(self, cluster: str) -> None:
        """Create the ManagedClusterAddOn ``model-serving`` in a cluster namespace if missing.

        It names no install namespace: the AddOnDeploymentConfig's ``agentInstallNamespace``
        decides (OCM reports the outcome in ``status.namespace``; the deprecated
        ``spec.installNamespace`` is left to its CRD default).
        """
        body = {
            "apiVersion": f"{ADDON_GROUP}/{ADDON_VERSION}",
            "kind": "ManagedClusterAddOn",
            "metadata": {
                "name": c.ADDON_NAME,
                "namespace": cluster,
                "labels": {c.LABEL_MANAGED_BY: c.FIELD_MANAGER},
            },
            "spec": {},
        }
        path = _path(ADDON_GROUP, ADDON_VERSION, cluster, ADDON_PLURAL)
        await self._call(
            "create", ADDON_PLURAL,
            lambda: self._send("POST", path, params={"fieldManager": c.FIELD_MANAGER},
                               body=body, ok=(409,)),
        )

    async def create_revision(self, body: dict[str, Any]) -> None:
        """Create one ControllerRevision; one that exists is fine (its name has its digest)."""
        path = _path("apps", "v1", body["metadata"]["namespace"], "controllerrevisions")
        await self._call(
            "create", "controllerrevisions",
            lambda: self._send("POST", path, params={"fieldManager": c.FIELD_MANAGER},
                               body=body, ok=(409,)),
        )

    async def delete_revision(self, namespace: str, name: str) -> None:
        """Delete one ControllerRevision; one already gone is fine."""
        path = _path("apps", "v1", namespace, "controllerrevisions", name)
        await self._call("delete", "controllerrevisions",
                         lambda: self._send("DELETE", path, ok=(404,)))

    async def apply_object(self, group: str, version: str, plural: str, body: dict[str, Any],
                           *, status: bool = False) -> None:
        """Server-side apply one namespaced object, or (``status``) its status subresource.

        As field manager ``model-serving-addon``, forced: the manager's fields are its own. A
        kind the hub does not serve is a :class:`WriteError` with ``status`` 404 (not
        retried).
        """
        meta = body["metadata"]
        path = _path(group, version, meta["namespace"], plural, meta["name"])
        path += "/status" if status else ""
        params = {"fieldManager": c.FIELD_MANAGER, "force": "true"}
        await self._call("apply-status" if status else "apply", plural,
                         lambda: self._send("PATCH", path, params=params, body=body,
                                            content_type=APPLY_CONTENT_TYPE))

    async def delete_object(self, group: str, version: str, plural: str, namespace: str,
                            name: str) -> None:
        """Delete one namespaced object; one already gone (or a kind not served) is fine."""
        path = _path(group, version, namespace, plural, name)
        await self._call("delete", plural, lambda: self._send("DELETE", path, ok=(404,)))

    async def read_secret(self, namespace: str, name: str) -> dict[str, str] | None:
        """A hub Secret's ``data`` as stored (base64 values), or None when it does not exist.

        The reconciler decodes the keys it seals (a value that does not decode is a reason,
        not an exception); a 403 is a :class:`WriteError` with ``status`` 403.
        """
        async def call() -> dict[str, str] | None:
            response = await self._send("GET", _path("", "v1", namespace, "secrets", name),
                                        ok=(404,))
            if response.status == 404:
                return None
            data = response.json().get("data") or {}
            return {str(k): str(v) for k, v in data.items()}

        return await self._call("get", "secrets", call, write=False)


_RESOURCE_VERSION = re.compile(rb'"resourceVersion":"(\d+)"')


def resource_version_of(body: bytes) -> int | None:
    """metadata.resourceVersion of an object the API server answered with, without decoding it.

    The API server writes ``metadata`` before ``spec``, so the first match is the object's
    own (the manifests inside come later).
    """
    found = _RESOURCE_VERSION.search(body, 0, 4096)
    return int(found[1]) if found else None
