"""``kubectl get ... -o json`` and the harness's server-side applies, done in process.

The same API requests, no kubectl process.

Tests poll the clusters thousands of times per run; each kubectl process costs about 0.1 s of
CPU (start-up, kubeconfig, discovery cache) on a machine that is CPU-bound. :class:`Reader`
resolves a resource type as kubectl does (plural, singular, kind, short name, optionally with
``.group``) from the API server's discovery, then lists or gets with the same query
(namespace, label selector) and returns what kubectl would print: the object, or a ``List``
whose items carry ``apiVersion`` and ``kind``. Anything it does not understand (other flags,
several names, output formats other than json) is :class:`NotHandled`, and the caller runs
kubectl itself. :meth:`Reader.apply` sends the server-side apply requests of ``kubectl apply
--server-side --force-conflicts`` (one PATCH per object, strict field validation): the tests'
fixtures apply a few hundred times per run, each kubectl process about 0.1 s of CPU.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

APPLY_PATCH = "application/apply-patch+yaml"
"""The content type of a server-side apply request (JSON is YAML)."""

AGGREGATED_DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
"""What to accept for ``/apis`` in one document: every group, version and resource."""
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
"""What to accept for a list of names and labels only (a CRD list is megabytes otherwise)."""

DISCOVERY_REFRESH_SECONDS = 1.0
"""An unknown type re-reads discovery at most this often (a CRD may just have appeared)."""


WARNING = re.compile(r'\d{3} \S+ "((?:[^"\\]|\\.)*)"')
"""One warning of a ``Warning`` header (RFC 7234: code, agent, quoted text)."""


def warning_texts(headers: list[str]) -> list[str]:
    """The texts of ``Warning`` header values, unquoted, as kubectl prints them."""
    out = []
    for header in headers:
        for match in WARNING.finditer(header):
            out.append(re.sub(r"\\(.)", r"\1", match.group(1)))
    return out


def error_line(body: Any) -> str:
    """The line kubectl prints for an API error: ``Error from server (Reason): message``."""
    reason = body.get("reason", "Error") if isinstance(body, dict) else "Error"
    message = body.get("message", "") if isinstance(body, dict) else str(body)
    return f"Error from server ({reason}): {message}\n"


class NotHandled(Exception):
    """These arguments need the real kubectl."""


@dataclass(frozen=True)
class Resource:
    """One API resource as discovery lists it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    def path(self, namespace: str | None, name: str | None) -> str:
        """The URL path of the collection (or of ``name`` in it)."""
        root = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced and namespace:
            root += f"/namespaces/{namespace}"
        root += f"/{self.plural}"
        return f"{root}/{name}" if name else root

    @property
    def api_version(self) -> str:
        """``group/version`` (``version`` for the core group)."""
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass(frozen=True)
class Query:
    """What a ``kubectl get`` command line asks for."""

    types: tuple[str, ...]
    name: str | None
    namespace: str | None
    all_namespaces: bool
    selector: str | None


@dataclass(frozen=True)
class Answer:
    """kubectl's exit code, stdout and stderr for one query."""

    returncode: int
    stdout: str
    stderr: str


def parse(args: tuple[str, ...]) -> Query:
    """Parse the arguments after ``get``; :class:`NotHandled` for anything unusual."""
    positional: list[str] = []
    namespace = selector = None
    all_namespaces = json_output = False
    it = iter(args)
    for arg in it:
        if arg in ("-n", "--namespace"):
            namespace = next(it, None)
        elif arg.startswith("--namespace="):
            namespace = arg.split("=", 1)[1]
        elif arg in ("-l", "--selector"):
            selector = next(it, None)
        elif arg.startswith("--selector="):
            selector = arg.split("=", 1)[1]
        elif arg in ("-A", "--all-namespaces"):
            all_namespaces = True
        elif arg in ("-o", "--output"):
            json_output = next(it, None) == "json"
            if not json_output:
                raise NotHandled(arg)
        elif arg == "-ojson" or arg == "--output=json":
            json_output = True
        elif arg.startswith("-"):
            raise NotHandled(arg)
        else:
            positional.append(arg)
    if not json_output or not positional or len(positional) > 2:
        raise NotHandled(" ".join(args))
    first = positional[0]
    if "/" in first:
        if len(positional) != 1:
            raise NotHandled(" ".join(args))
        kind, slash_name = first.split("/", 1)
        return Query((kind,), slash_name, namespace, all_namespaces, selector)
    types = tuple(first.split(","))
    name = positional[1] if len(positional) == 2 else None
    if name is not None and len(types) != 1:
        raise NotHandled(" ".join(args))
    return Query(types, name, namespace, all_namespaces, selector)


def served_resources(discovery: dict[str, Any]) -> set[str]:
    """``plural.group`` of each resource of an aggregated discovery document (``/apis``).

    The name of a CRD whose API the server serves: its discovery lists a CRD only once the
    CRD is Established (apiextensions-apiserver's DiscoveryController), and a client finds it
    there. Raises :class:`NotHandled` for another document (a server without aggregated
    discovery answers the plain group list).
    """
    if discovery.get("kind") != "APIGroupDiscoveryList":
        raise NotHandled(f"not aggregated discovery: {discovery.get('kind')}")
    return {f"{r['resource']}.{group['metadata']['name']}"
            for group in discovery.get("items") or []
            for version in group.get("versions") or []
            for r in version.get("resources") or []}


def index(groups: list[tuple[str, str, list[dict[str, Any]]]]) -> dict[str, Resource]:
    """Every name a type can go by -> its resource.

    Earlier groups win, as kubectl's own priority puts the core group first.
    """
    out: dict[str, Resource] = {}
    for group, version, resources in groups:
        for r in resources:
            if "/" in r["name"]:
                continue  # a subresource
            res = Resource(group, version, r["name"], r["kind"], bool(r.get("namespaced")))
            names = {r["name"], r.get("singularName") or "", r["kind"].lower()}
            names.update(r.get("shortNames") or [])
            for n in filter(None, names):
                for key in (n, f"{n}.{group}", f"{n}.{version}.{group}") if group else (n,):
                    out.setdefault(key.lower(), res)
    return out


class Reader:
    """Answers ``get ... -o json`` for one cluster through a kubernetes ApiClient."""

    def __init__(self, api_client: Any, default_namespace: str = "default") -> None:
        self._api = api_client
        self._auth = {a["key"]: a["value"] for a in (
            api_client.configuration.auth_settings().values() if api_client is not None else ())
            if a["in"] == "header" and a["value"]}
        """The credentials sent as headers (a kubeconfig's bearer token; none for a client
        certificate, which the connection itself carries)."""
        self.default_namespace = default_namespace
        """The namespace of a namespaced type when the command names none (kubectl's)."""
        self._lock = threading.Lock()
        self._types: dict[str, Resource] = {}
        self._discovered_at = float("-inf")

    def get(self, args: tuple[str, ...], timeout: float) -> Answer:
        """What ``kubectl get <args>`` would answer (:class:`NotHandled` when unsure)."""
        query = parse(args)
        try:
            resources = [self.resolve(t, timeout) for t in query.types]
        except LookupError as err:
            return Answer(1, "", f'error: the server doesn\'t have a resource type "{err}"\n')
        except OSError as err:
            return Answer(1, "", f"error: {err}\n")
        namespace = None if query.all_namespaces else query.namespace or self.default_namespace
        items: list[dict[str, Any]] = []
        for res in resources:
            status, body = self.request(
                res.path(namespace, query.name), timeout,
                {"labelSelector": query.selector} if query.selector else {},
            )
            if status == 404 and query.name:
                return Answer(
                    1, "",
                    f'Error from server (NotFound): {res.plural}.{res.group or "core"}'
                    f' "{query.name}" not found\n',
                )
            if status >= 400:
                return Answer(1, "", error_line(body))
            if query.name:
                return Answer(0, json.dumps(body), "")
            for item in body.get("items") or []:
                item.setdefault("apiVersion", res.api_version)
                item.setdefault("kind", res.kind)
                items.append(item)
        listing = {"apiVersion": "v1", "kind": "List", "items": items,
                   "metadata": {"resourceVersion": ""}}
        return Answer(0, json.dumps(listing), "")

    def apply(self, objects: list[dict[str, Any]], field_manager: str, timeout: float) -> None:
        """Server-side apply ``objects`` in order, taking every field they set.

        The requests of ``kubectl apply --server-side --force-conflicts
        --field-manager=<field_manager>``.

        :class:`NotHandled` when kubectl should do it: an object without a name or of a type
        discovery does not list (yet), an API server that does not answer, or a refusal by
        the server (invalid, a webhook's denial). Applying is idempotent, so kubectl then
        applies them all again and says what failed in its own words.
        """
        for obj in objects:
            meta = obj.get("metadata") or {}
            api_version, kind, name = obj.get("apiVersion"), obj.get("kind"), meta.get("name")
            if not (api_version and kind and name):
                raise NotHandled(f"{kind}/{name}: no apiVersion, kind or name")
            group, _, version = str(api_version).rpartition("/")
            key = f"{kind}.{version}.{group}" if group else str(kind)
            try:
                res = self.resolve(key, timeout)
            except (LookupError, OSError) as err:
                raise NotHandled(str(err)) from err
            if (res.group, res.version, res.kind) != (group, version, kind):
                raise NotHandled(f"{api_version} {kind} resolves to {res.api_version} {res.kind}")
            namespace = (meta.get("namespace") or self.default_namespace) if res.namespaced \
                else None
            try:
                status, body = self.request(
                    res.path(namespace, str(name)), timeout,
                    {"fieldManager": field_manager, "force": "true", "fieldValidation": "Strict"},
                    method="PATCH", body=json.dumps(obj), content_type=APPLY_PATCH,
                )
            except OSError as err:  # unreachable: kubectl tries, and fails in its words
                raise NotHandled(str(err)) from err
            if status >= 400:
                message = body.get("message", "") if isinstance(body, dict) else str(body)
                raise NotHandled(f"{kind}/{name}: {status} {message}")

    def crds(self, timeout: float) -> tuple[list[str], set[str]]:
        """The names of the cluster's CRDs, and of those whose API is served.

        Two small requests: the CRDs' metadata only, and the aggregated discovery document
        (:func:`served_resources`), where a full CRD list is megabytes for the server to
        encode and the harness to decode. :class:`NotHandled` when either is not answered so.
        """
        try:
            status, listing = self.request(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", timeout,
                accept=METADATA_LIST)
            if status >= 400 or listing.get("kind") != "PartialObjectMetadataList":
                raise NotHandled(f"CRD metadata list: {status} {listing.get('kind')}")
            status, discovery = self.request("/apis", timeout, accept=AGGREGATED_DISCOVERY)
        except OSError as err:
            raise NotHandled(str(err)) from err
        if status >= 400:
            raise NotHandled(f"aggregated discovery: {status}")
        names = [str(i["metadata"]["name"]) for i in listing.get("items") or []]
        return names, served_resources(discovery)

    def token(self, namespace: str, account: str, seconds: int, timeout: float) -> str:
        """A token of ServiceAccount ``namespace/account``, valid for ``seconds``.

        From the TokenRequest API, as ``kubectl create token --duration`` asks for it;
        :class:`NotHandled` on a refusal.
        """
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token"
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "spec": {"expirationSeconds": seconds}}
        try:
            status, body = self.request(path, timeout, method="POST", body=request,
                                         content_type="application/json")
        except OSError as err:
            raise NotHandled(str(err)) from err
        if status >= 400 or not isinstance(body, dict):
            raise NotHandled(f"TokenRequest for {namespace}/{account}: {status}")
        token = (body.get("status") or {}).get("token")
        if not token:
            raise NotHandled(f"TokenRequest for {namespace}/{account}: {status}")
        return str(token)

    def ready(self, timeout: float) -> bool:
        """Whether the API server answers ``/readyz`` with 200 (``kubectl get --raw``)."""
        try:
            status, _ = self.request("/readyz", timeout)
        except OSError:
            return False
        return status == 200

    def resolve(self, token: str, timeout: float) -> Resource:
        """The resource a type name means (plural, kind, short name, with ``.group``).

        Discovery is read again, at most once a second, for a name not known yet;
        :class:`LookupError` when the server serves no such type.
        """
        key = token.lower()
        with self._lock:
            if key in self._types:
                return self._types[key]
            if time.monotonic() - self._discovered_at > DISCOVERY_REFRESH_SECONDS:
                self._types = index(self._discover(timeout))
                self._discovered_at = time.monotonic()
            if key in self._types:
                return self._types[key]
        raise LookupError(token)

    def _discover(self, timeout: float) -> list[tuple[str, str, list[dict[str, Any]]]]:
        found: list[tuple[str, str, list[dict[str, Any]]]] = []
        _, core = self.request("/api/v1", timeout)
        found.append(("", "v1", core.get("resources") or []))
        _, groups = self.request("/apis", timeout)
        for group in groups.get("groups") or []:
            # Every served version, the preferred one first: a kind may be served only in
            # another (KServe's ServingRuntimes are v1alpha1, its InferenceService v1beta1).
            preferred = group["preferredVersion"]["version"]
            versions = [preferred] + [
                v["version"] for v in group.get("versions") or [] if v["version"] != preferred
            ]
            for version in versions:
                status, listing = self.request(f"/apis/{group['name']}/{version}", timeout)
                if status < 400:
                    found.append((group["name"], version, listing.get("resources") or []))
        return found

    def request(
        self, path: str, timeout: float, query: dict[str, str] | None = None,
        method: str = "GET", body: str | dict[str, Any] | None = None,
        content_type: str | None = None, accept: str = "application/json",
        warnings: list[str] | None = None,
    ) -> tuple[int, Any]:
        """One request as the client's identity: (status, the decoded JSON answer).

        The identity is the cluster's admin for :meth:`Cluster.reader`.
        The server's warnings (its ``Warning`` headers' texts, which kubectl prints as
        ``Warning: ...``) are appended to ``warnings`` when given. :class:`OSError` when the
        server does not answer (refused, TLS, timeout).
        """
        url = self._api.configuration.host + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {"Accept": accept, **self._auth}
        if content_type:
            headers["Content-Type"] = content_type
        try:
            resp = self._api.rest_client.request(
                method, url, headers=headers, body=body, _request_timeout=timeout
            )
            raw = resp.read()
        except Exception as err:  # connection refused, TLS, timeout: kubectl fails too
            raise OSError(str(err)) from err
        if warnings is not None:
            warnings.extend(warning_texts(resp.headers.getlist("Warning")))
        try:
            return int(resp.status), json.loads(raw or b"{}")
        except ValueError:
            return int(resp.status), {"message": raw.decode(errors="replace")[:500]}
