"""Writes to the hub API: server-side apply of ManifestWorks, deletes, status, add-ons.

All I/O of the manager goes through :class:`HubWriter`: it bounds concurrency, retries
throttling, server errors and conflicts with backoff, and counts every write request
(``model_serving_api_writes_total``) so tests can check that a steady state writes nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as TransportError

from addon_api import constants as c
from addon_manager import metrics

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


def _retry_after(err: ApiException) -> float | None:
    headers = err.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class HubWriter:
    """Bounded, retrying, counted access to the hub API server."""

    def __init__(
        self, api_client: client.ApiClient, concurrency: int = 16, attempts: int = 6
    ) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.attempts = attempts
        self.concurrency = concurrency
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=concurrency, thread_name_prefix="hub-write"
        )
        self._sem: asyncio.Semaphore | None = None

    def close(self) -> None:
        """Stop the worker threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _call(
        self, verb: str, resource: str, fn: Callable[[], T], *, write: bool = True,
        retry_conflict: bool = True,
    ) -> T:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        loop = asyncio.get_running_loop()
        delay = 0.2
        for attempt in range(1, self.attempts + 1):
            async with self._sem:
                if write:
                    metrics.API_WRITES.labels(verb, resource).inc()
                try:
                    return await loop.run_in_executor(self._pool, fn)
                except ApiException as err:
                    status = int(err.status or 0)
                    retriable = status in RETRIABLE and (status != 409 or retry_conflict)
                    if not retriable or attempt == self.attempts:
                        raise WriteError(
                            f"{verb} {resource}: HTTP {status} {err.reason}: "
                            f"{(err.body or '')[:300]}", status,
                        ) from err
                    wait = _retry_after(err) or delay
                except (OSError, TransportError) as err:
                    # Refused, reset or dropped while the API server or etcd restarts: the
                    # client raises these (urllib3's errors are not OSErrors) instead of a status.
                    if attempt == self.attempts:
                        raise WriteError(f"{verb} {resource}: {err}") from err
                    wait = delay
            log.info("retrying %s %s in %.1fs (attempt %d)", verb, resource, wait, attempt)
            await asyncio.sleep(wait * (0.75 + random.random() / 2))
            delay = min(delay * 2, 5.0)
        raise AssertionError("unreachable")

    async def apply_work(self, body: dict[str, Any], *, force: bool) -> None:
        """Server-side apply one ManifestWork as field manager ``model-serving-addon``.

        ``force`` only for works already known to be ours: a work someone else manages
        makes a non-forced apply fail with a conflict instead of being taken over.
        """
        meta = body["metadata"]
        await self._call(
            "apply", WORK_PLURAL,
            lambda: self.api.patch_namespaced_custom_object(
                WORK_GROUP, WORK_VERSION, meta["namespace"], WORK_PLURAL, meta["name"], body,
                field_manager=c.FIELD_MANAGER, force=force, _content_type=APPLY_CONTENT_TYPE,
            ),
            retry_conflict=force,
        )

    async def delete_work(self, namespace: str, name: str) -> None:
        """Delete one ManifestWork (Foreground on the spoke is the work's deleteOption)."""
        def call() -> None:
            try:
                self.api.delete_namespaced_custom_object(
                    WORK_GROUP, WORK_VERSION, namespace, WORK_PLURAL, name
                )
            except ApiException as err:
                if err.status != 404:
                    raise

        await self._call("delete", WORK_PLURAL, call)

    async def patch_status(
        self, group: str, version: str, plural: str, namespace: str, name: str,
        status: dict[str, Any],
    ) -> None:
        """Merge-patch the status subresource of one intent (404 means it is gone: ignored).

        Fields the installed CRD does not know (a manager newer than its CRDs: ``helm
        upgrade`` leaves CRDs alone) are dropped by the API server without a warning each;
        with thousands of cluster entries the warning headers alone would exceed what the
        HTTP client accepts (100) and fail every status write.
        """
        def call() -> None:
            try:
                self.api.patch_namespaced_custom_object_status(
                    group, version, namespace, plural, name, {"status": status},
                    field_manager=c.FIELD_MANAGER, field_validation="Ignore",
                    _content_type=MERGE_CONTENT_TYPE,
                )
            except ApiException as err:
                if err.status != 404:
                    raise

        await self._call("patch-status", plural, call)

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

        def call() -> None:
            try:
                self.api.create_namespaced_custom_object(
                    ADDON_GROUP, ADDON_VERSION, cluster, ADDON_PLURAL, body,
                    field_manager=c.FIELD_MANAGER,
                )
            except ApiException as err:
                if err.status != 409:
                    raise

        await self._call("create", ADDON_PLURAL, call)

    async def read_secret(self, namespace: str, name: str) -> dict[str, str] | None:
        """A hub Secret's ``data`` as stored (base64 values), or None when it does not exist.

        The reconciler decodes the keys it seals (a value that does not decode is a reason,
        not an exception); a 403 is a :class:`WriteError` with ``status`` 403.
        """
        def call() -> dict[str, str] | None:
            try:
                secret = self.core.read_namespaced_secret(name, namespace)
            except ApiException as err:
                if err.status == 404:
                    return None
                raise
            return {str(k): str(v) for k, v in (secret.data or {}).items()}

        return await self._call("get", "secrets", call, write=False)
