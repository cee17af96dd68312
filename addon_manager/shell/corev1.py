"""The core API group (``/api/v1``) as plain JSON: the manager's few Secrets and ConfigMaps.

Not the kubernetes client's ``CoreV1Api``: that generated module is 2 MB, and importing it
cost every manager start about 0.7 CPU-seconds (a third of an idle manager's first 30 s,
2026-12-07) for six kinds of request. These requests go through the same ``ApiClient`` (its
configuration, credentials and connection pool), fail with the client's own
``ApiException``, and return the API server's JSON as dicts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

OBJECT = "/api/v1/namespaces/{namespace}/{plural}/{name}"
COLLECTION = "/api/v1/namespaces/{namespace}/{plural}"


class CoreV1:
    """Namespaced core objects (``secrets``, ``configmaps``) read, written and watched."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        """The object ``namespace/name`` (``ApiException`` 404 when there is none)."""
        return dict(self._call("GET", OBJECT, plural, namespace, name))

    def create(self, plural: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create ``body`` in ``namespace`` (``ApiException`` 409 when it exists)."""
        return dict(self._call("POST", COLLECTION, plural, namespace, body=body))

    def replace(self, plural: str, namespace: str, name: str,
                body: dict[str, Any]) -> dict[str, Any]:
        """Replace ``namespace/name`` with ``body`` (409 when its resourceVersion is stale)."""
        return dict(self._call("PUT", OBJECT, plural, namespace, name, body=body))

    def list(self, plural: str, namespace: str) -> dict[str, Any]:
        """Every object of ``plural`` in ``namespace``: ``items`` and the list's metadata."""
        return dict(self._call("GET", COLLECTION, plural, namespace))

    def watch(self, plural: str, namespace: str, resource_version: str,
              timeout_seconds: int) -> Iterator[dict[str, Any]]:
        """The watch events (``type``, ``object`` as a dict) after ``resource_version``."""

        def request(plural: str, namespace: str, **kwargs: Any) -> object:
            query = [("watch", "true"), ("allowWatchBookmarks", "false")]
            if kwargs.get("resource_version"):
                query.append(("resourceVersion", str(kwargs["resource_version"])))
            if kwargs.get("timeout_seconds"):
                query.append(("timeoutSeconds", str(kwargs["timeout_seconds"])))
            return self._call("GET", COLLECTION, plural, namespace, query=query, stream=True)

        stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
            request, plural, namespace, resource_version=resource_version,
            timeout_seconds=timeout_seconds)
        for event in stream:
            yield dict(event)

    def _call(self, method: str, path: str, plural: str, namespace: str, name: str = "", *,
              body: dict[str, Any] | None = None, query: Sequence[tuple[str, str]] = (),
              stream: bool = False) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        params = {"namespace": namespace, "plural": plural}
        if name:
            params["name"] = name
        request = self.api.param_serialize(
            method, path, path_params=params, query_params=list(query),
            header_params=headers, body=body, auth_settings=["BearerToken"])
        response = self.api.call_api(*request)
        if stream and 200 <= response.status <= 299:
            return response.response  # the open urllib3 response, read line by line
        response.read()  # type: ignore[no-untyped-call]
        if not 200 <= response.status <= 299:
            raise ApiException.from_response(http_resp=response, body=(
                response.data or b"").decode("utf-8", "replace"), data=None)
        return self.api.response_deserialize(response, {"2XX": "object"}).data
