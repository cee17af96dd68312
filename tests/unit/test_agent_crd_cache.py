"""CrdCache: a CRD is read in full again only after its resourceVersion moved."""

from __future__ import annotations

from typing import Any

from addon_agent.io.crd_cache import CrdCache


class FakeKube:
    """CRDs by name; counts full reads and remembers how metadata was asked for."""

    def __init__(self) -> None:
        self.crds: dict[str, dict[str, Any]] = {}
        self.full_reads = 0
        self.cached_reads: list[bool] = []

    def metadata(self, api: str, kind: str, name: str, namespace: Any = None, *,
                 cached: bool = False) -> dict[str, Any] | None:
        self.cached_reads.append(cached)
        crd = self.crds.get(name)
        return dict(crd["metadata"]) if crd else None

    def latest_metadata(self, api: str, kind: str, name: str) -> dict[str, Any] | None:
        """A consistent read (``Kube.latest_metadata``): recorded as not cached."""
        return self.metadata(api, kind, name, cached=False)

    def get(self, api: str, kind: str, name: str, namespace: Any = None) -> Any:
        self.full_reads += 1
        return self.crds.get(name)


def crd(rv: str) -> dict[str, Any]:
    return {"metadata": {"name": "x", "resourceVersion": rv}, "spec": {"big": rv}}


def test_full_read_only_after_a_change() -> None:
    kube = FakeKube()
    cache = CrdCache(kube)  # type: ignore[arg-type]
    assert cache.get("x") is None and kube.full_reads == 0
    kube.crds["x"] = crd("1")
    assert cache.get("x")["spec"]["big"] == "1"  # type: ignore[index]
    assert cache.get("x")["spec"]["big"] == "1"  # type: ignore[index]
    assert kube.full_reads == 1
    kube.crds["x"] = crd("2")
    assert cache.get("x", cached=False)["spec"]["big"] == "2"  # type: ignore[index]
    assert kube.full_reads == 2
    assert kube.cached_reads[-1] is False and kube.cached_reads[0] is True
    del kube.crds["x"]
    assert cache.get("x") is None
    kube.crds["x"] = crd("2")
    assert cache.get("x")["spec"]["big"] == "2"  # type: ignore[index]
    assert kube.full_reads == 3  # what was deleted is read in full again


class FakeClusterKube(FakeKube):
    """Also lists the stack's controller Deployment (none) for the observer."""

    def list(self, api: str, kind: str, **_: Any) -> list[dict[str, Any]]:
        return []


def test_finding_an_installation_reads_its_key_crd_whole_only_after_it_changed() -> None:
    """The observer looks at KServe's InferenceService CRD (a megabyte) on every resync: a
    metadata read as it is now (not the watch cache: whose CRD it is decides), a full read
    only when it moved."""
    from addon_agent.io.observe import Observer
    from addon_agent.pure import ownership
    from addon_agent.stacks import KSERVE

    kube = FakeClusterKube()
    name = ownership.KEY_CRDS[KSERVE.platform]
    kube.crds[name] = {"metadata": {"name": name, "resourceVersion": "1",
                                    "labels": {"app.kubernetes.io/managed-by": "someone"}}}
    observer = Observer(kube, CrdCache(kube))  # type: ignore[arg-type]
    for _ in range(3):
        found = observer.find_installation(KSERVE)
        assert found.crd is not None and found.owner() is not None
    assert kube.full_reads == 1
    assert kube.cached_reads == [False, False, False]
    kube.crds[name] = {"metadata": {"name": name, "resourceVersion": "2"}}
    assert observer.find_installation(KSERVE).owner() is None
    assert kube.full_reads == 2


def test_the_kube_answers_are_the_json_the_api_server_sent() -> None:
    """Kube asks the dynamic client to keep each answer as parsed JSON (its default wraps it
    in ``ResourceInstance`` objects, two recursive copies per read)."""
    import json
    from unittest.mock import MagicMock

    from addon_agent.io.kube import Kube

    body = {"metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {"items": [{"k": 1}]}}
    calls: list[dict[str, Any]] = []

    def get(**kwargs: Any) -> Any:
        calls.append(kwargs)
        serializer = kwargs["serializer"]
        return serializer(None, json.loads(json.dumps(body)))

    kube = Kube.__new__(Kube)
    kube.resource = MagicMock(return_value=MagicMock(namespaced=False, get=get))  # type: ignore[method-assign]
    got = kube.get("v1", "Thing", "x")
    assert got == body and type(got) is dict
    assert kube.metadata("v1", "Thing", "x") == body["metadata"]
    assert len(calls) == 2


def test_the_items_of_a_list_name_their_kind_as_the_clients_wrapper_did() -> None:
    """The API server leaves apiVersion and kind out of a list's items; messages name an
    object by its kind ("Deployment ns/name"), so the items get them from the list."""
    from unittest.mock import MagicMock

    from addon_agent.io.kube import Kube

    answer = {"apiVersion": "apps/v1", "kind": "DeploymentList",
              "items": [{"metadata": {"name": "a", "namespace": "n"}},
                        {"apiVersion": "apps/v1", "kind": "Deployment",
                         "metadata": {"name": "b", "namespace": "n"}}]}

    def get(**kwargs: Any) -> Any:
        return kwargs["serializer"](None, answer)

    kube = Kube.__new__(Kube)
    kube.resource = MagicMock(return_value=MagicMock(namespaced=True, get=get))  # type: ignore[method-assign]
    items = kube.list("apps/v1", "Deployment")
    assert [(i["apiVersion"], i["kind"], i["metadata"]["name"]) for i in items] == [
        ("apps/v1", "Deployment", "a"), ("apps/v1", "Deployment", "b")]


class RecordingResource:
    """A dynamic resource that answers a metadata LIST or GET and records how it was asked."""

    namespaced = False

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.asked: list[dict[str, Any]] = []

    def get(self, **kwargs: Any) -> Any:
        self.asked.append(kwargs)
        selector = kwargs.get("field_selector", "")
        if selector:
            wanted = selector.removeprefix("metadata.name=")
            return {"items": [{"metadata": {"name": n, "resourceVersion": "7"}}
                              for n in self.names if n == wanted]}
        return {"metadata": {"name": kwargs["name"], "resourceVersion": "7"}}


def _kube_of(release: tuple[str, str], resource: RecordingResource, monkeypatch: Any) -> Any:
    from types import SimpleNamespace

    from addon_agent.io import kube as kube_module
    from addon_agent.io.kube import Kube

    kube = Kube.__new__(Kube)
    kube.api = None  # type: ignore[assignment]
    kube._lists_from_cache = None
    kube.resource = lambda api, kind: resource  # type: ignore[method-assign]
    major, minor = release
    monkeypatch.setattr(kube_module.client, "VersionApi", lambda api: SimpleNamespace(
        get_code=lambda: SimpleNamespace(major=major, minor=minor)))
    return kube


def test_a_consistent_crd_read_is_a_list_of_its_name_where_the_server_lists_from_its_cache(
        monkeypatch: Any) -> None:
    """From Kubernetes 1.31 (a provider's "31+" too) the latest metadata of a CRD is asked
    as a metadata LIST of its name, which the API server answers from its watch cache; a
    GET would read and decode the whole CRD from etcd. A name that is not there is None."""
    from addon_agent.io.kube import PARTIAL_METADATA_LIST

    for release in (("1", "31"), ("1", "34+")):
        resource = RecordingResource(["x.example.com"])
        kube = _kube_of(release, resource, monkeypatch)
        meta = kube.latest_metadata("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                                    "x.example.com")
        assert meta == {"name": "x.example.com", "resourceVersion": "7"}
        assert kube.latest_metadata("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                                    "y.example.com") is None
        first = resource.asked[0]
        assert len(resource.asked) == 2
        assert first["field_selector"] == "metadata.name=x.example.com"
        assert first["header_params"] == {"Accept": PARTIAL_METADATA_LIST}
        assert "resource_version" not in first and "name" not in first


def test_a_consistent_crd_read_is_a_get_where_the_server_lists_from_storage(
        monkeypatch: Any) -> None:
    """Before 1.31 a LIST without resourceVersion reads every CRD from etcd: the metadata
    GET of the one name costs less there."""
    resource = RecordingResource(["x.example.com"])
    kube = _kube_of(("1", "30"), resource, monkeypatch)
    meta = kube.latest_metadata("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                                "x.example.com")
    assert meta == {"name": "x.example.com", "resourceVersion": "7"}
    (asked,) = resource.asked
    assert asked["name"] == "x.example.com" and "field_selector" not in asked
    assert asked["resource_version"] is None
