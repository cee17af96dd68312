"""A namespace the agent created is deleted again only while it holds nothing the agent did
not create; otherwise it is kept (and handed over when it stops being a serving namespace)."""

from __future__ import annotations

import copy
from typing import Any

from addon_agent import labels as lb
from addon_agent.io import namespaces

Obj = dict[str, Any]


class FakeKube:
    """Objects by (kind, namespace, name); ConfigMaps, Secrets and ``forbidden`` kinds are the
    namespaced kinds; the ``forbidden`` ones may not be listed (a vendor's CRD that is not
    aggregated into the view role the agent is bound to)."""

    def __init__(self, *forbidden: str) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.deleted: list[str] = []
        self.forbidden = forbidden

    def put(self, kind: str, name: str, namespace: str = "", **meta: Any) -> None:
        metadata: Obj = {"name": name, **meta}
        if namespace:
            metadata["namespace"] = namespace
        self.objects[(kind, namespace, name)] = {"kind": kind, "metadata": metadata}

    def namespaced_kinds(self) -> list[tuple[str, str]]:
        return [("v1", "ConfigMap"), ("v1", "Secret"), ("metrics.k8s.io/v1beta1", "PodMetrics"),
                *(("vendor.example/v1", kind) for kind in self.forbidden)]

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        return copy.deepcopy(self.objects.get((kind, namespace or "", name)))

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None) -> list[Obj]:
        if kind in self.forbidden:
            from kubernetes.client.exceptions import ApiException
            raise ApiException(status=403, reason="Forbidden")
        assert kind != "PodMetrics"
        key, _, value = (label_selector or "").partition("=")
        items = [copy.deepcopy(o) for (k, ns, _), o in self.objects.items()
                 if k == kind and (namespace is None or ns == namespace)
                 and (not key or (o["metadata"].get("labels") or {}).get(key) == value)]
        for item in items:
            item.pop("kind")  # list items of built-in kinds carry no kind
        return items

    def apply(self, obj: Obj, *, force: bool = True) -> Obj:
        meta = obj["metadata"]
        self.objects[(obj["kind"], meta.get("namespace") or "", meta["name"])] = obj
        return obj

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        self.deleted.append(f"{kind} {name}")
        return self.objects.pop((kind, namespace or "", name), None) is not None


KEPT = {lb.LABEL_KEPT_NAMESPACE: "true"}


def created(kube: FakeKube, name: str) -> Obj:
    kube.put("Namespace", name, labels={**lb.ours(), lb.LABEL_SERVING_NAMESPACE: "true"},
             annotations={lb.ANNOTATION_CREATED_BY_AGENT: "true"})
    kube.put("ConfigMap", "kube-root-ca.crt", name)
    kube.put("ConfigMap", "made-by-agent", name, labels=lb.ours())
    return kube.objects[("Namespace", "", name)]


def test_contents_lists_every_kind_the_agent_may_list_with_its_kind() -> None:
    kube = FakeKube()
    created(kube, "ml")
    kube.put("ConfigMap", "users-config", "ml")
    found = namespaces.contents(kube, ["ml", "gone"])  # type: ignore[arg-type]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in found["ml"]) == [
        ("ConfigMap", "kube-root-ca.crt"), ("ConfigMap", "made-by-agent"),
        ("ConfigMap", "users-config")]
    assert "gone" not in found


def test_a_namespace_holding_a_kind_the_agent_may_not_list_is_kept_and_says_why() -> None:
    """What the agent cannot see may be a tenant's data (issue 29, item 9): never deleted."""
    kube = FakeKube("Backup")
    ns = created(kube, "ml")
    assert namespaces.holds_user_objects(kube, "ml") == [  # type: ignore[arg-type]
        "Backup ml/* (the agent may not list them)"]
    assert namespaces.disable(kube, ns) == [  # type: ignore[arg-type]
        "Backup ml/* (the agent may not list them)"]
    assert kube.deleted == []
    # handed over, marked kept
    assert kube.objects[("Namespace", "", "ml")]["metadata"] == {"name": "ml", "labels": KEPT}


def test_a_removal_keeps_a_namespace_it_cannot_see_into() -> None:
    from addon_agent.pure import removal

    kube = FakeKube("Backup")
    created(kube, "ml")
    created(kube, "ml-empty")
    kube.forbidden = ()
    seen = namespaces.contents(kube, ["ml-empty"])  # type: ignore[arg-type]
    kube.forbidden = ("Backup",)
    left = removal.leftovers([], [], ["ml", "ml-empty"],
                             contents={**namespaces.contents(kube, ["ml"]),  # type: ignore[arg-type]
                                       **seen})
    assert left.namespaces == frozenset({"ml"})
    assert "Namespace ml (holds Backup ml/* (the agent may not list them))" in left.message


def test_dropped_namespace_the_agent_created_is_deleted_only_when_it_holds_nothing_else() -> None:
    kube = FakeKube()
    empty = created(kube, "ml-empty")
    namespaces.disable(kube, empty)  # type: ignore[arg-type]
    assert kube.deleted == ["Namespace ml-empty"]

    held = created(kube, "ml-held")
    kube.put("ConfigMap", "users-config", "ml-held")
    namespaces.disable(kube, held)  # type: ignore[arg-type]
    assert "Namespace ml-held" not in kube.deleted
    # kept, and no longer the agent's: its labels and annotation are gone but the kept mark
    assert kube.objects[("Namespace", "", "ml-held")]["metadata"] == {"name": "ml-held",
                                                                     "labels": KEPT}
    assert kube.objects[("ConfigMap", "ml-held", "users-config")]


def test_a_group_that_goes_during_discovery_is_skipped() -> None:
    """A stack's CRDs deleted between listing the groups and reading one: no error."""
    from unittest.mock import MagicMock

    from kubernetes.dynamic.exceptions import NotFoundError

    from addon_agent.io.kube import Kube

    answers: dict[str, Any] = {
        "/api": {"kind": "APIVersions", "versions": ["v1"]},  # no aggregated discovery
        "/api/v1": {"resources": [{"name": "configmaps", "kind": "ConfigMap",
                                   "namespaced": True, "verbs": ["list"]}]},
        "/apis": {"groups": [{"preferredVersion": {"groupVersion": "serving.kserve.io/v1"}}]},
    }

    def request(method: str, path: str, **_: Any) -> Any:
        if path not in answers:
            raise NotFoundError(MagicMock(status=404, reason="Not Found", data=b"", headers={}))
        return answers[path]

    kube = Kube.__new__(Kube)
    kube.dyn = MagicMock(request=request)
    assert kube.namespaced_kinds() == [("v1", "ConfigMap")]


def test_aggregated_discovery_gives_every_namespaced_kind_in_two_requests() -> None:
    """Preferred (first) versions only; cluster-scoped kinds and kinds that cannot be listed
    left out; the core group has no name."""
    from unittest.mock import MagicMock

    from addon_agent.io.kube import AGGREGATED_DISCOVERY, Kube

    def resource(kind: str, scope: str = "Namespaced", verbs: tuple[str, ...] = ("get", "list"),
                 **more: Any) -> dict[str, Any]:
        return {"resource": kind.lower() + "s", "responseKind": {"kind": kind}, "scope": scope,
                "verbs": list(verbs), **more}

    answers: dict[str, Any] = {
        "/api": {"kind": "APIGroupDiscoveryList", "items": [
            {"metadata": {"name": ""}, "versions": [{"version": "v1", "resources": [
                resource("ConfigMap"), resource("Namespace", scope="Cluster"),
                resource("Pod", subresources=[{"subresource": "status"}]),
                resource("Binding", verbs=("create",))]}]}]},
        "/apis": {"kind": "APIGroupDiscoveryList", "items": [
            {"metadata": {"name": "serving.kserve.io"}, "versions": [
                {"version": "v1beta1", "resources": [resource("InferenceService")]},
                {"version": "v1alpha1", "resources": [resource("TrainedModel")]}]},
            {"metadata": {"name": "empty.example.com"}, "versions": []}]},
    }
    asked: list[tuple[str, str]] = []

    def request(method: str, path: str, header_params: dict[str, str], **_: Any) -> Any:
        asked.append((path, header_params["Accept"]))
        return answers[path]

    kube = Kube.__new__(Kube)
    kube.dyn = MagicMock(request=request)
    assert kube.namespaced_kinds() == [("v1", "ConfigMap"), ("v1", "Pod"),
                                       ("serving.kserve.io/v1beta1", "InferenceService")]
    assert asked == [("/api", AGGREGATED_DISCOVERY), ("/apis", AGGREGATED_DISCOVERY)]


def test_a_dropped_namespace_holding_data_is_reported_until_it_is_emptied_restart_or_not() -> None:
    """Issue 29, item 9: what the agent kept when a namespace left servingNamespaces is
    reported on every reconcile (the kept mark on the namespace is the only state: a fresh
    agent finds it again), and the namespace goes once it holds nothing else."""
    kube = FakeKube()
    assert namespaces.reconcile(kube, ["ml"], "KServe", None) == {}  # type: ignore[arg-type]
    kube.put("PersistentVolumeClaim", "data", "ml")
    kube.put("ConfigMap", "kube-root-ca.crt", "ml")
    kube.namespaced_kinds = lambda: [("v1", "ConfigMap"),  # type: ignore[method-assign]
                                     ("v1", "PersistentVolumeClaim")]
    held = {"ml": ["PersistentVolumeClaim ml/data"]}
    assert namespaces.reconcile(kube, [], "KServe", None) == held  # type: ignore[arg-type]
    assert kube.objects[("Namespace", "", "ml")]["metadata"] == {"name": "ml", "labels": KEPT}
    # the next reconcile (or a restarted agent's first) still reports it
    assert namespaces.reconcile(kube, [], "KServe", None) == held  # type: ignore[arg-type]
    assert namespaces.kept(kube) == ["ml"]  # type: ignore[arg-type]
    assert kube.deleted == []
    kube.delete("v1", "PersistentVolumeClaim", "data", "ml")
    assert namespaces.reconcile(kube, [], "KServe", None) == {}  # type: ignore[arg-type]
    assert ("Namespace", "", "ml") not in kube.objects  # the agent's again to delete


def test_a_kept_namespace_put_back_or_deleted_is_no_longer_reported() -> None:
    kube = FakeKube()
    ns = created(kube, "ml")
    kube.put("ConfigMap", "users-config", "ml")
    assert namespaces.disable(kube, ns) == ["ConfigMap ml/users-config"]  # type: ignore[arg-type]
    # put back: the agent's again, as created by it (a later drop checks it again)
    assert namespaces.reconcile(kube, ["ml"], "KServe", None) == {}  # type: ignore[arg-type]
    meta = kube.objects[("Namespace", "", "ml")]["metadata"]
    assert lb.LABEL_KEPT_NAMESPACE not in meta["labels"]
    assert meta["annotations"] == {lb.ANNOTATION_CREATED_BY_AGENT: "true"}
    assert namespaces.reconcile(kube, [], "KServe", None) == {  # type: ignore[arg-type]
        "ml": ["ConfigMap ml/users-config"]}
    # the admin deletes it: gone from the report (terminating counts as gone)
    kube.objects[("Namespace", "", "ml")]["metadata"]["deletionTimestamp"] = "now"
    assert namespaces.reconcile(kube, [], "KServe", None) == {}  # type: ignore[arg-type]
    assert kube.deleted == []  # not deleted again by the agent
    del kube.objects[("Namespace", "", "ml")]
    assert namespaces.reconcile(kube, [], "KServe", None) == {}  # type: ignore[arg-type]


def test_a_namespace_that_was_never_the_agents_is_not_marked_kept() -> None:
    kube = FakeKube()
    kube.put("Namespace", "theirs", labels={lb.LABEL_SERVING_NAMESPACE: "true"})
    kube.put("ConfigMap", "users-config", "theirs")
    assert namespaces.reconcile(kube, [], "KServe", None) == {}  # type: ignore[arg-type]
    assert kube.objects[("Namespace", "", "theirs")]["metadata"] == {"name": "theirs"}


def test_a_removal_deletes_an_emptied_kept_namespace_and_keeps_one_still_holding_data() -> None:
    from addon_agent.pure import removal

    kube = FakeKube()
    for name in ("ml-a", "ml-b"):
        ns = created(kube, name)
        kube.put("ConfigMap", "users-config", name)
        namespaces.disable(kube, ns)  # type: ignore[arg-type]
    kube.delete("v1", "ConfigMap", "users-config", "ml-b")
    doomed = namespaces.kept(kube)  # type: ignore[arg-type]
    left = removal.leftovers([], [], doomed,
                             contents=namespaces.contents(kube, doomed))  # type: ignore[arg-type]
    assert left.namespaces == frozenset({"ml-a"})
    namespaces.disable_all(kube, keep=left.namespaces)  # type: ignore[arg-type]
    assert ("Namespace", "", "ml-a") in kube.objects
    assert ("Namespace", "", "ml-b") not in kube.objects
