"""Thin synchronous Kubernetes I/O for the agent (dynamic client, server-side apply)."""

from __future__ import annotations

import os
import tempfile
import threading
import time
import uuid
from typing import Any

from kubernetes import client, config
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.discovery import LazyDiscoverer
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from addon_api import constants as c

Obj = dict[str, Any]
PARTIAL_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
PARTIAL_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
CONSISTENT_LISTS_FROM_CACHE = (1, 31)
"""The first Kubernetes release whose API server answers a LIST without resourceVersion from
its watch cache once that cache has caught up with storage (consistent reads from cache, on
by default since 1.31): a read as current as a GET, without reading the object from etcd."""

AGGREGATED_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
)
"""Accept header of aggregated discovery (every group's resources in one answer), falling back
to the plain answer on an API server without it."""

MISS_REDISCOVERY_SECONDS = 10.0
"""How long a kind found not served is taken as not served without asking the API server.
A kind that is not installed (InferenceService before KServe is or after it went) is looked
up every few seconds, and the client answers each miss with a full discovery, a request per
API group: an agent without KServe made ten discovery requests a second. Kinds the agent
installs itself are seen at once (:meth:`Kube.rediscover` once their CRDs are Established);
anyone else's within this long."""


def aggregated_namespaced_kinds(answer: Obj) -> list[tuple[str, str]]:
    """(apiVersion, kind) of the namespaced, listable kinds of an ``APIGroupDiscoveryList``.

    Each group's first version is its preferred one; subresources are nested in their
    resource there, so every resource listed is a kind.
    """
    out: list[tuple[str, str]] = []
    for group in answer.get("items") or []:
        versions = group.get("versions") or []
        if not versions:
            continue
        name = str((group.get("metadata") or {}).get("name") or "")
        version = str(versions[0].get("version"))
        api_version = f"{name}/{version}" if name else version
        out += [
            (api_version, str(r["responseKind"]["kind"]))
            for r in versions[0].get("resources") or []
            if r.get("scope") == "Namespaced" and "list" in (r.get("verbs") or [])
            and (r.get("responseKind") or {}).get("kind")
        ]
    return out


def _plain(_client: Any, data: Any) -> Any:
    """The dynamic client's answer as the JSON it was: a dict, not a ``ResourceInstance``.

    The client wraps every answer in ``ResourceInstance`` (a recursive copy into attribute
    objects) that the agent turned back into a dict at once: for a KServe CRD of a megabyte
    each read cost two recursive copies, half of a steady agent's CPU. As that wrapper does,
    each item of a list gets the list's ``apiVersion`` and its ``kind`` (the API server
    leaves them out of the items).
    """
    if isinstance(data, dict):
        kind = str(data.get("kind") or "")
        if kind.endswith("List") and isinstance(data.get("items"), list):
            for item in data["items"]:
                if isinstance(item, dict):
                    item.setdefault("apiVersion", data.get("apiVersion"))
                    item.setdefault("kind", kind[: -len("List")])
    return data


def api_client_for(kubeconfig: str | None) -> client.ApiClient:
    """An ApiClient from ``kubeconfig``, or from in-cluster config when none is given."""
    if kubeconfig:
        api: client.ApiClient = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        return api
    config.load_incluster_config()  # type: ignore[no-untyped-call]
    return client.ApiClient()


class UnsavedDiscoverer(LazyDiscoverer):
    """The dynamic client's lazy discovery, kept in memory only.

    The library's discoverers save what they found to a file after each discovery (a file
    shared by every process of the user unless told otherwise) and read that file when they
    start: a file left by another process or an earlier run would claim kinds that are gone.
    The agent gave each client a temporary directory of its own instead, which an agent
    killed (SIGKILL, OOM) left behind in its pod's ``/tmp`` volume at every restart; and each
    save encoded the whole cache to JSON again. This one never writes the file, so the
    (never existing) path it is given makes every client discover afresh.
    """

    def _write_cache(self) -> None:
        return None


def _unsaved_cache_path() -> str:
    """A cache path no file has: :class:`UnsavedDiscoverer` never writes one there."""
    return os.path.join(tempfile.gettempdir(), f"agent-discovery-unsaved-{uuid.uuid4().hex}.json")


class Kube:
    """Get, list, apply and delete any kind by apiVersion/kind."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.dyn = DynamicClient(  # type: ignore[no-untyped-call]
            api, cache_file=_unsaved_cache_path(), discoverer=UnsavedDiscoverer
        )
        self._discovery_lock = threading.RLock()
        """The dynamic client's discovery cache is not thread-safe: a lookup while another
        thread invalidates it fails inside the client (``KeyError: 'resources'``). The agent's
        handlers run in threads, so every lookup and invalidation holds this lock."""
        self._missing: dict[tuple[str, str], float] = {}
        """Kinds found not served, with when (monotonic seconds)."""
        self._lists_from_cache: bool | None = None
        """Whether the API server serves consistent LISTs from its watch cache (asked once)."""

    def resource(self, api_version: str, kind: str) -> Any:
        """The dynamic resource of a kind; raises ``ResourceNotFoundError`` if not served.

        The client asks the API server again (every group) when a kind is not in what it
        discovered; a kind found missing is then answered as missing for
        :data:`MISS_REDISCOVERY_SECONDS` (or until :meth:`rediscover`) without asking.
        """
        key = (api_version, kind)
        with self._discovery_lock:
            missed = self._missing.get(key)
            if missed is not None and time.monotonic() - missed < MISS_REDISCOVERY_SECONDS:
                raise ResourceNotFoundError(f"{api_version} {kind} is not served")
            try:
                found = self.dyn.resources.get(api_version=api_version, kind=kind)
            except ResourceNotFoundError:
                self._missing[key] = time.monotonic()
                raise
            self._missing.pop(key, None)
            return found

    def rediscover(self) -> None:
        """Forget the discovered kinds (CRDs came or went); the next lookup asks again."""
        with self._discovery_lock:
            self.dyn.resources.invalidate_cache()
            self._missing.clear()

    def served(self, api_version: str, kind: str) -> bool:
        """Whether the API server serves a kind."""
        try:
            self.resource(api_version, kind)
        except ResourceNotFoundError:
            return False
        return True

    def _discovery(self, path: str, accept: str = "application/json") -> Obj:
        out = self.dyn.request("GET", path, header_params={"Accept": accept}, serializer=_plain)
        return dict(out)

    def namespaced_kinds(self) -> list[tuple[str, str]]:
        """(apiVersion, kind) of every namespaced kind the API server lists.

        Preferred versions, no subresources: what a namespace can hold. Asked with aggregated
        discovery (two requests, where one per API group was a few dozen: an agent removing a
        stack asks on every resync); an API server that does not offer it is asked group by
        group.
        """
        answers = [self._discovery(path, AGGREGATED_DISCOVERY) for path in ("/api", "/apis")]
        if all(a.get("kind") == "APIGroupDiscoveryList" for a in answers):
            return [kind for answer in answers for kind in aggregated_namespaced_kinds(answer)]
        lists = [("v1", self._discovery("/api/v1"))]
        for group in self._discovery("/apis").get("groups") or []:
            version = (group.get("preferredVersion") or {}).get("groupVersion")
            if version:
                try:
                    lists.append((version, self._discovery(f"/apis/{version}")))
                except NotFoundError:  # its last CRD went between the two requests (removal)
                    continue
        return [
            (api_version, str(r["kind"]))
            for api_version, resources in lists
            for r in resources.get("resources") or []
            if "/" not in r["name"] and r.get("namespaced") and "list" in (r.get("verbs") or [])
        ]

    def apply(self, obj: Obj, *, force: bool = True) -> Obj:
        """Server-side apply ``obj`` with the agent's field manager."""
        res = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        out = res.server_side_apply(
            body=obj,
            name=meta["name"],
            namespace=meta.get("namespace") if res.namespaced else None,
            field_manager=c.FIELD_MANAGER,
            force_conflicts=force,
            serializer=_plain,
        )
        result: Obj = out
        return result

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj | None:
        """An object, or None when it does not exist."""
        res = self.resource(api_version, kind)
        try:
            out = res.get(name=name, namespace=namespace if res.namespaced else None,
                          serializer=_plain)
        except NotFoundError:
            return None
        result: Obj = out
        return result

    def metadata(
        self, api_version: str, kind: str, name: str, namespace: str | None = None,
        *, cached: bool = False,
    ) -> Obj | None:
        """Metadata of an object (metadata-only GET), None when absent.

        ``cached`` lets the API server answer from its watch cache (resourceVersion 0): no
        storage read, but it may trail the latest write by a moment.
        """
        res = self.resource(api_version, kind)
        try:
            out = res.get(
                name=name,
                namespace=namespace if res.namespaced else None,
                header_params={"Accept": PARTIAL_METADATA},
                resource_version="0" if cached else None,
                serializer=_plain,
            )
        except NotFoundError:
            return None
        meta: Obj = out.get("metadata") or {}
        return meta

    def lists_from_cache(self) -> bool:
        """Whether the API server answers a consistent LIST from its watch cache.

        That is, whether its release is :data:`CONSISTENT_LISTS_FROM_CACHE` or later
        (``/version``, asked once).
        """
        if self._lists_from_cache is None:
            info = client.VersionApi(self.api).get_code()
            minor = int("".join(ch for ch in str(info.minor) if ch.isdigit()) or 0)
            self._lists_from_cache = (int(info.major), minor) >= CONSISTENT_LISTS_FROM_CACHE
        return self._lists_from_cache

    def latest_metadata(self, api_version: str, kind: str, name: str) -> Obj | None:
        """Metadata of a cluster-scoped object as it is now (a consistent read), or None.

        None when the object is absent; needs the ``list`` verb on the kind. Asked as a LIST
        of that one name where the API server serves those from its watch cache
        (:meth:`lists_from_cache`), else as a metadata GET. A GET without resourceVersion
        reads and decodes the whole object from etcd, whatever part of it is asked for: for
        KServe's InferenceService CRD (a megabyte) 58.7 ms of the testbed's API server's CPU
        against 1.2 ms for the LIST (200 reads each, Kubernetes 1.34).
        """
        if not self.lists_from_cache():
            return self.metadata(api_version, kind, name)
        res = self.resource(api_version, kind)
        out = res.get(field_selector=f"metadata.name={name}",
                      header_params={"Accept": PARTIAL_METADATA_LIST}, serializer=_plain)
        items = out.get("items") or []
        if not items:
            return None
        meta: Obj = items[0].get("metadata") or {}
        return meta

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Obj]:
        """Objects of a kind (all namespaces unless ``namespace``)."""
        res = self.resource(api_version, kind)
        kwargs: dict[str, Any] = {}
        if label_selector:
            kwargs["label_selector"] = label_selector
        if field_selector:
            kwargs["field_selector"] = field_selector
        if res.namespaced and namespace:
            kwargs["namespace"] = namespace
        try:
            out = res.get(serializer=_plain, **kwargs)
        except NotFoundError:  # the kind went away (its CRD was deleted): discovery is stale
            self.rediscover()
            return []
        items: list[Obj] = out.get("items", [])
        return items

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        """Delete an object (background propagation); False when it was already gone."""
        res = self.resource(api_version, kind)
        try:
            res.delete(
                name=name,
                namespace=namespace if res.namespaced else None,
                body={"propagationPolicy": "Background"},
                serializer=_plain,
            )
        except NotFoundError:
            return False
        return True

    def patch_status(
        self, api_version: str, kind: str, name: str, status: Obj, namespace: str | None = None
    ) -> None:
        """Merge-patch the status subresource of an object."""
        res = self.resource(api_version, kind)
        res.status.patch(
            body={"status": status},
            name=name,
            namespace=namespace if res.namespaced else None,
            content_type="application/merge-patch+json",
            serializer=_plain,
        )

    def patch(
        self, api_version: str, kind: str, name: str, body: Obj, namespace: str | None = None
    ) -> Obj:
        """Merge-patch an object."""
        res = self.resource(api_version, kind)
        out = res.patch(
            body=body,
            name=name,
            namespace=namespace if res.namespaced else None,
            content_type="application/merge-patch+json",
            serializer=_plain,
        )
        result: Obj = out
        return result


def create(kube: Kube, obj: Obj) -> Obj:
    """Create an object (fails if it exists)."""
    res = kube.resource(obj["apiVersion"], obj["kind"])
    out = res.create(
        body=obj, namespace=obj["metadata"].get("namespace") if res.namespaced else None,
        serializer=_plain,
    )
    result: Obj = out
    return result


def replace(kube: Kube, obj: Obj) -> Obj:
    """Replace an object; its metadata.resourceVersion makes this a compare-and-swap."""
    res = kube.resource(obj["apiVersion"], obj["kind"])
    meta = obj["metadata"]
    out = res.replace(
        body=obj, name=meta["name"], namespace=meta.get("namespace") if res.namespaced else None,
        serializer=_plain,
    )
    result: Obj = out
    return result
