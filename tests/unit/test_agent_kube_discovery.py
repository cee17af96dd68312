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
