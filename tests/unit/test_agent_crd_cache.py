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
