"""The agent's discovery lookups and invalidations never overlap (the client's cache is not
thread-safe: an overlap raised ``KeyError: 'resources'`` inside it)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

from addon_agent.io.kube import Kube


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
