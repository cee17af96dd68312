"""The pre-delete hook's release (issue 29, item 11): entries and the agent's finalizers go."""

from __future__ import annotations

import copy
from typing import Any, cast

from addon_agent import release
from addon_agent.io.kube import Kube
from addon_api import constants as c

Obj = dict[str, Any]
FINALIZER = f"{c.GROUP}/agent"


class FakeKube:
    """Objects by (kind, namespace, name); merge patches of metadata.finalizers with a
    resourceVersion precondition."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.removed: list[tuple[str, str]] = []

    def put(self, kind: str, name: str, namespace: str = "", finalizers: list[str] | None = None
            ) -> None:
        meta: Obj = {"name": name, "resourceVersion": "1", "finalizers": finalizers or []}
        if namespace:
            meta["namespace"] = namespace
        self.objects[(kind, namespace, name)] = {"kind": kind, "metadata": meta}

    def list(self, api_version: str, kind: str, **_: Any) -> list[Obj]:
        return [copy.deepcopy(o) for (k, _ns, _n), o in self.objects.items() if k == kind]

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        return copy.deepcopy(self.objects.get((kind, namespace or "", name)))

    def patch(self, api_version: str, kind: str, name: str, body: Obj,
              namespace: str | None = None) -> Obj:
        obj = self.objects[(kind, namespace or "", name)]
        assert body["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
        obj["metadata"]["finalizers"] = body["metadata"]["finalizers"]
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
        return obj


def test_release_drops_only_the_agents_finalizer_and_removes_each_connections_entries(
    monkeypatch: Any,
) -> None:
    kube = FakeKube()
    kube.put(c.KIND_SEALED_STORAGE_CONNECTION, "s3", "agent-ns", [FINALIZER, "other/keep"])
    kube.put(c.KIND_SEALED_STORAGE_CONNECTION, "done", "agent-ns", [])
    kube.put(c.KIND_SERVING_PLATFORM, "model-serving", "", [FINALIZER])
    removed: list[tuple[str, str]] = []
    monkeypatch.setattr(release.delivery, "remove",
                        lambda _kube, ns, name: removed.append((ns, name)))
    out = release.release(cast(Kube, kube))
    assert sorted(removed) == [("agent-ns", "done"), ("agent-ns", "s3")]
    assert kube.objects[(c.KIND_SEALED_STORAGE_CONNECTION, "agent-ns", "s3")]["metadata"][
        "finalizers"] == ["other/keep"]
    assert kube.objects[(c.KIND_SERVING_PLATFORM, "", "model-serving")]["metadata"][
        "finalizers"] == []
    assert out.finalizers == [f"{c.KIND_SEALED_STORAGE_CONNECTION} agent-ns/s3",
                              f"{c.KIND_SERVING_PLATFORM} /model-serving"]
    # Idempotent: a second run (the Job retried) finds nothing to drop.
    assert release.release(cast(Kube, kube)).finalizers == []


def test_the_patch_keeps_others_finalizers_and_is_conditional_on_the_version() -> None:
    obj = {"metadata": {"finalizers": ["a", FINALIZER, "b"], "resourceVersion": "7"}}
    assert release.without_finalizer(obj) == {
        "metadata": {"finalizers": ["a", "b"], "resourceVersion": "7"}}
    assert release.without_finalizer({"metadata": {"finalizers": ["a"]}}) is None
