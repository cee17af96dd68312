"""The agent's discovery lookups and invalidations never overlap (the client's cache is not
thread-safe: an overlap raised ``KeyError: 'resources'`` inside it), and a kind that is not
installed is not a full discovery per lookup."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from addon_agent.io import kube as kube_module
from addon_agent.io.kube import MISS_REDISCOVERY_SECONDS, Kube


class RacyResources:
    """A discovery cache that counts calls running at the same time as another."""

    def __init__(self) -> None:
        self.running = 0
        self.overlaps = 0
        self.guard = threading.Lock()

    def _call(self) -> None:
        with self.guard:
            self.running += 1
            if self.running > 1:
                self.overlaps += 1
        time.sleep(0.0005)
        with self.guard:
            self.running -= 1

    def get(self, **kind: Any) -> Any:
        self._call()
        return kind

    def invalidate_cache(self) -> None:
        self._call()


def _kube(resources: RacyResources) -> Kube:
    kube = Kube.__new__(Kube)
    kube.dyn = SimpleNamespace(resources=resources)
    kube._discovery_lock = threading.RLock()
    kube._missing = {}
    return kube


def test_lookups_and_invalidations_from_many_threads_never_overlap() -> None:
    resources = RacyResources()
    kube = _kube(resources)

    def work(i: int) -> None:
        for _ in range(40):
            if i % 2:
                kube.rediscover()
            else:
                assert kube.resource("v1", "ConfigMap") == {"api_version": "v1",
                                                            "kind": "ConfigMap"}

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert resources.overlaps == 0
    # The same calls without the lock do overlap: the check above can fail.
    bare = RacyResources()
    unlocked = [threading.Thread(target=lambda: [bare.get() for _ in range(40)])
                for _ in range(6)]
    for t in unlocked:
        t.start()
    for t in unlocked:
        t.join()
    assert bare.overlaps > 0


class Discovery:
    """A discovery cache like the client's: a miss asks the API server again (and is counted)."""

    def __init__(self, served: set[str]) -> None:
        self.server = served
        self.known = set(served)
        self.invalidations = 0

    def get(self, api_version: str, kind: str) -> str:
        if kind not in self.known:
            self.invalidate_cache()
            if kind not in self.known:
                raise ResourceNotFoundError(f"{api_version} {kind}")
        return kind

    def invalidate_cache(self) -> None:
        self.invalidations += 1
        self.known = set(self.server)


def test_a_missing_kind_is_asked_for_again_only_once_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    discovery = Discovery({"ConfigMap"})
    kube = _kube(discovery)  # type: ignore[arg-type]
    now = [1000.0]
    monkeypatch.setattr(kube_module.time, "monotonic", lambda: now[0])
    for _ in range(20):  # an agent polling for InferenceService before KServe is installed
        assert not kube.served("serving.kserve.io/v1beta1", "InferenceService")
        now[0] += 0.1
    assert discovery.invalidations == 1  # the first miss; the client asked again itself

    discovery.server.add("InferenceService")  # someone else installs KServe
    now[0] += MISS_REDISCOVERY_SECONDS - 2.1
    assert not kube.served("serving.kserve.io/v1beta1", "InferenceService")
    now[0] += 0.1
    assert kube.served("serving.kserve.io/v1beta1", "InferenceService")
    assert discovery.invalidations == 2
    assert kube.resource("v1", "ConfigMap") == "ConfigMap"
    assert discovery.invalidations == 2  # kinds it knows cost nothing

    assert not kube.served("monitoring.coreos.com/v1", "ServiceMonitor")
    assert discovery.invalidations == 3
    discovery.server.add("ServiceMonitor")  # a kind whose CRD the agent applied: told at once
    kube.rediscover()
    assert kube.served("monitoring.coreos.com/v1", "ServiceMonitor")
    assert discovery.invalidations == 4


class DiscoveryApi:
    """An ApiClient answering the discovery requests of a cluster serving ConfigMaps."""

    class configuration:  # the attribute name the client reads
        host = "https://discovery.test:6443"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def select_header_accept(self, accepts: list[str]) -> str:
        return accepts[0]

    def param_serialize(self, method: str, path: str, **_: Any) -> tuple[str, str]:
        return method, path

    def call_api(self, method: str, path: str, **_: Any) -> Any:
        import json

        answers = {
            "/version": {"major": "1", "minor": "34", "gitVersion": "v1.34.0"},
            "/api": {"kind": "APIVersions", "versions": ["v1"]},
            "/apis": {"kind": "APIGroupList", "groups": []},
            "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "configmaps", "singularName": "configmap", "namespaced": True,
                 "kind": "ConfigMap", "verbs": ["get", "list"]}]},
        }
        self.asked.append(path)
        return SimpleNamespace(status=200, response=SimpleNamespace(
            data=json.dumps(answers[path]).encode()))


def test_discovery_is_kept_in_memory_and_never_left_in_a_file(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each client discovers afresh and writes no cache file: nothing is left behind in the
    pod's /tmp when the agent is killed, and no file of another process is read."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    api = DiscoveryApi()
    first = Kube(api)  # type: ignore[arg-type]
    assert first.resource("v1", "ConfigMap").kind == "ConfigMap"
    first.rediscover()
    assert first.served("v1", "ConfigMap")
    second = Kube(api)  # type: ignore[arg-type]
    assert second.served("v1", "ConfigMap")
    assert list(tmp_path.iterdir()) == []
    assert api.asked.count("/api/v1") >= 3  # every client, and every rediscovery, asks
