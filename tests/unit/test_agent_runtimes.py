"""KServe's built-in runtimes through the applier, against an in-memory API server.

The applier's side of ``builtInRuntimes``: the agent's runtimes are applied and removed
again, a runtime of the same name someone else made is never touched (and reported), and a
runtime the stack's webhook cannot admit is reported without stopping the install. Any other
object of the bundle that someone else made is never touched either, and keeps the stack
from being reported ready.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from kubernetes.client.exceptions import ApiException

from addon_agent import labels as lb
from addon_agent.io.applier import Applier
from addon_agent.io.crd_cache import CrdCache
from addon_agent.io.inventory import Inventory
from addon_agent.io.observe import Observer
from addon_agent.pure import planning
from addon_agent.pure.planning import ClusterFacts
from addon_agent.stacks import KSERVE
from addon_api.spoke import ServingPlatformSpec

Obj = dict[str, Any]
Key = tuple[str, str, str]

BUNDLE = """
apiVersion: v1
kind: ConfigMap
metadata: {name: inferenceservice-config, namespace: kserve}
data: {deploy: '{}'}
---
apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata: {name: kserve-sklearnserver}
spec: {containers: [{name: kserve-container, image: kserve/sklearnserver:v0.17.0}]}
---
apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata: {name: kserve-xgbserver}
spec: {containers: [{name: kserve-container, image: kserve/xgbserver:v0.17.0}]}
"""

USERS = {
    "apiVersion": "serving.kserve.io/v1alpha1",
    "kind": "ClusterServingRuntime",
    "metadata": {"name": "kserve-xgbserver", "labels": {"team": "users"}},
    "spec": {"containers": [{"name": "kserve-container", "image": "example.com/xgb:1"}]},
}


class FakeKube:
    """Just what :meth:`Applier.install` uses; ``refuse`` makes runtime updates fail (with
    ``refuse_status``)."""

    def __init__(self) -> None:
        self.objects: dict[Key, Obj] = {}
        self.version = 0
        self.refuse: str | None = None
        self.refuse_status = 500

    def rediscover(self) -> None:
        """Nothing cached here."""

    @staticmethod
    def _key(kind: str, name: str, namespace: str | None) -> Key:
        return (kind, namespace or "", name)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        found = self.objects.get(self._key(kind, name, namespace))
        return copy.deepcopy(found) if found is not None else None

    def resource_version(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> str | None:
        found = self.objects.get(self._key(kind, name, namespace))
        return None if found is None else str(found["metadata"]["resourceVersion"])

    def metadata(
        self, api_version: str, kind: str, name: str, namespace: str | None = None,
        cached: bool = True,
    ) -> Obj | None:
        found = self.objects.get(self._key(kind, name, namespace))
        return None if found is None else copy.deepcopy(found["metadata"])

    def latest_metadata(self, api_version: str, kind: str, name: str) -> Obj | None:
        """A consistent read of a cluster-scoped object's metadata (the same here)."""
        return self.metadata(api_version, kind, name, cached=False)

    def apply(self, obj: Obj) -> Obj:
        meta = obj["metadata"]
        key = self._key(obj["kind"], meta["name"], meta.get("namespace"))
        if self.refuse and planning.is_runtime(obj) and key in self.objects:
            raise _refused(self.refuse, self.refuse_status)
        self.version += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.objects[key] = stored
        return copy.deepcopy(stored)

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        return self.objects.pop(self._key(kind, name, namespace), None) is not None


def _refused(message: str, status: int = 500) -> ApiException:
    err = ApiException(status=status, reason="Internal Server Error" if status >= 500
                       else "Bad Request")
    err.body = json.dumps({"kind": "Status", "message": message})
    return err


def applier(kube: FakeKube) -> Applier:
    return Applier(kube, CrdCache(kube), Inventory(kube, "agent-ns"))  # type: ignore[arg-type]


def observer(kube: FakeKube) -> Observer:
    return Observer(kube, CrdCache(kube))  # type: ignore[arg-type]


def install(inst: Applier, **kserve: Any) -> planning.Plan:
    spec = ServingPlatformSpec.model_validate({"platform": "KServe", "kserve": kserve})
    the_plan = planning.plan(planning.parse_bundle(BUNDLE), spec, KSERVE, ClusterFacts())
    inst.install(the_plan)
    return the_plan


def runtime(kube: FakeKube, name: str) -> Obj | None:
    return kube.objects.get(("ClusterServingRuntime", "", name))


def test_builtin_runtimes_installed_and_removed_leaving_a_foreign_one() -> None:
    kube = FakeKube()
    kube.apply(copy.deepcopy(USERS))
    inst = applier(kube)
    the_plan = install(inst)
    sklearn = runtime(kube, "kserve-sklearnserver")
    assert sklearn is not None and lb.is_ours(sklearn)
    assert runtime(kube, "kserve-xgbserver") == {
        **USERS,
        "metadata": {**USERS["metadata"], "resourceVersion": "1"},
    }  # the user's runtime of the same name: not taken over, not changed
    assert the_plan.runtime_errors == []
    assert the_plan.runtime_conflicts == ["ClusterServingRuntime kserve-xgbserver"]
    assert the_plan.conflicts == []
    inventory = {(r.kind, r.name) for r in inst.inventory.load()}
    assert ("ClusterServingRuntime", "kserve-sklearnserver") in inventory
    assert ("ClusterServingRuntime", "kserve-xgbserver") not in inventory

    install(inst, builtInRuntimes=False)
    assert runtime(kube, "kserve-sklearnserver") is None  # the agent's: removed
    assert runtime(kube, "kserve-xgbserver") is not None  # the user's: left alone
    assert kube.objects[("ConfigMap", "kserve", "inferenceservice-config")]

    install(inst, builtInRuntimes=True)
    assert runtime(kube, "kserve-sklearnserver") is not None


def _edited(kube: FakeKube) -> None:
    """Someone changes the agent's runtimes: the agent applies them again (an update)."""
    for (kind, _, _), obj in kube.objects.items():
        if kind == "ClusterServingRuntime" and lb.is_ours(obj):
            kube.version += 1
            obj["metadata"]["resourceVersion"] = str(kube.version)


def test_runtime_the_webhook_refuses_is_reported_and_retried() -> None:
    kube = FakeKube()
    inst = applier(kube)
    install(inst)  # first install: created before the webhook exists
    # Edited since: applied again, now an update through the webhook, whose server does not
    # answer yet.
    _edited(kube)
    kube.refuse = 'Internal error occurred: failed calling webhook "clusterservingruntime"'
    the_plan = install(inst)
    assert sorted(the_plan.runtime_errors) == [
        f"ClusterServingRuntime {name}: {kube.refuse}"
        for name in ("kserve-sklearnserver", "kserve-xgbserver")
    ]
    assert the_plan.webhook_unreachable  # a 5xx: asked again soon, not at the resync
    # the rest of the install went on; the runtimes stay the agent's (kept in the inventory)
    inventory = {(r.kind, r.name) for r in inst.inventory.load()}
    assert ("ClusterServingRuntime", "kserve-sklearnserver") in inventory
    assert runtime(kube, "kserve-sklearnserver") is not None
    kube.refuse = None  # the webhook serves: the next reconcile clears the errors
    served = install(inst)
    assert served.runtime_errors == [] and not served.webhook_unreachable


def test_a_runtime_the_webhook_denies_is_reported_but_not_asked_again_soon() -> None:
    """A denial (4xx) stands until the spec or the webhook changes: the resync tries it
    again, not :data:`~addon_agent.shell.platform.WEBHOOK_RECHECK`."""
    kube = FakeKube()
    inst = applier(kube)
    install(inst)
    _edited(kube)
    kube.refuse = 'admission webhook "clusterservingruntime" denied the request: no'
    kube.refuse_status = 400
    the_plan = install(inst)
    assert len(the_plan.runtime_errors) == 2 and not the_plan.webhook_unreachable


def test_a_same_named_object_someone_else_made_is_never_applied_labelled_or_deleted() -> None:
    kube = FakeKube()
    theirs: Obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "inferenceservice-config", "namespace": "kserve",
                     "labels": {"team": "users"}},
        "data": {"deploy": '{"theirs": true}'},
    }
    kube.apply(copy.deepcopy(theirs))
    before = copy.deepcopy(kube.objects[("ConfigMap", "kserve", "inferenceservice-config")])
    inst = applier(kube)
    the_plan = install(inst)
    assert the_plan.conflicts == ["ConfigMap kserve/inferenceservice-config"]
    assert kube.objects[("ConfigMap", "kserve", "inferenceservice-config")] == before
    assert ("ConfigMap", "inferenceservice-config") not in {
        (r.kind, r.name) for r in inst.inventory.load()}
    assert runtime(kube, "kserve-sklearnserver") is not None  # the rest is installed
    assert inst.uninstall() == []
    assert runtime(kube, "kserve-sklearnserver") is None
    assert kube.objects[("ConfigMap", "kserve", "inferenceservice-config")] == before


def _established_crd(name: str) -> Obj:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "status": {"conditions": [{"type": "Established", "status": "True"}]}}


def test_the_facts_name_an_openshift_cluster_by_its_served_apis() -> None:
    """The service CA's and the SecurityContextConstraints' CRDs make an OpenShift cluster:
    the plan then takes certificates from the service CA and names no runtime user."""
    kube = FakeKube()
    assert observer(kube).facts() == ClusterFacts()
    for name in ("servicecas.operator.openshift.io",
                 "securitycontextconstraints.security.openshift.io"):
        kube.apply(_established_crd(name))
    assert observer(kube).facts() == ClusterFacts(service_ca=True, assigns_users=True)
