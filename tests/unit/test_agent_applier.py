"""A version change through the applier, against an in-memory API server.

:meth:`addon_agent.io.applier.Applier.install` applies the new version's controllers (and what
they need to start) first and returns the :class:`~addon_agent.pure.decisions.Upgrade` it
waits for; the configuration follows only once the controllers have rolled out.
"""

from __future__ import annotations

import functools
from typing import Any

from addon_agent import labels as lb
from addon_agent.io.applier import Applier
from addon_agent.io.crd_cache import CrdCache
from addon_agent.io.inventory import INVENTORY_CONFIGMAP, Inventory
from addon_agent.pure import planning
from addon_agent.pure.decisions import Upgrade
from addon_agent.pure.planning import ClusterFacts
from addon_agent.stacks import KSERVE
from addon_api.spoke import ServingPlatformSpec
from tests.unit.test_agent_runtimes import FakeKube

Obj = dict[str, Any]

BUNDLE = """
apiVersion: v1
kind: ConfigMap
metadata: {name: inferenceservice-config, namespace: kserve}
data: {deploy: '{}'}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: kserve-controller-manager, namespace: kserve}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: kserve-controller-manager, namespace: kserve}
spec:
  replicas: 1
  selector: {matchLabels: {app: k}}
  template:
    metadata: {labels: {app: k}}
    spec: {containers: [{name: manager, image: kserve/kserve-controller:VERSION}]}
"""


def _plan(version: str) -> planning.Plan:
    spec = ServingPlatformSpec.model_validate({"platform": "KServe", "version": version,
                                              "kserve": {"builtInRuntimes": False}})
    return planning.plan(planning.parse_bundle(BUNDLE.replace("VERSION", version)), spec,
                         KSERVE.at(version), ClusterFacts())


def _version(kube: FakeKube, kind: str, name: str) -> str:
    obj = kube.objects[(kind, "kserve", name)]
    return str(obj["metadata"]["labels"][lb.LABEL_STACK_VERSION])


def _rolled_out(kube: FakeKube) -> None:
    deployment = kube.objects[("Deployment", "kserve", "kserve-controller-manager")]
    deployment["status"] = {"replicas": 1, "updatedReplicas": 1,
                            "conditions": [{"type": "Available", "status": "True"}]}


def test_a_version_change_applies_the_controllers_first_and_waits_for_their_rollout() -> None:
    kube = FakeKube()
    applier = Applier(kube, CrdCache(kube), Inventory(kube, "agent-ns"))  # type: ignore[arg-type]
    assert applier.install(_plan("v0.17.0")) is None  # a first install: everything at once
    assert _version(kube, "ConfigMap", "inferenceservice-config") == "v0.17.0"

    upgrade = applier.install(_plan("v0.20.0"))
    assert isinstance(upgrade, Upgrade)
    assert (upgrade.source, upgrade.target) == ("v0.17.0", "v0.20.0")
    assert "waiting for kserve-controller-manager to roll out" in upgrade.message
    assert _version(kube, "Deployment", "kserve-controller-manager") == "v0.20.0"
    assert _version(kube, "ServiceAccount", "kserve-controller-manager") == "v0.20.0"
    assert _version(kube, "ConfigMap", "inferenceservice-config") == "v0.17.0"  # not yet

    _rolled_out(kube)
    assert applier.install(_plan("v0.20.0")) is None
    assert _version(kube, "ConfigMap", "inferenceservice-config") == "v0.20.0"
    assert applier.upgrade_source(_plan("v0.20.0")) == ""


class DiscoveringKube(FakeKube):
    """Marks every CRD Established as it is applied and counts the rediscoveries asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.rediscovered = 0

    def rediscover(self) -> None:
        self.rediscovered += 1

    def apply(self, obj: Obj) -> Obj:
        if obj["kind"] == "CustomResourceDefinition":
            obj = {**obj, "status": {"conditions": [{"type": "Established", "status": "True"}]}}
        return super().apply(obj)


CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: inferenceservices.serving.kserve.io}
spec:
  group: serving.kserve.io
  names: {kind: InferenceService, plural: inferenceservices}
  scope: Namespaced
  versions: [{name: v1beta1, served: true, storage: true}]
---
"""


def test_the_kinds_are_discovered_again_only_after_a_pass_that_wrote_a_crd() -> None:
    kube = DiscoveringKube()
    applier = Applier(kube, CrdCache(kube), Inventory(kube, "agent-ns"))  # type: ignore[arg-type]
    spec = ServingPlatformSpec.model_validate({"platform": "KServe", "version": "v0.17.0",
                                              "kserve": {"builtInRuntimes": False}})

    def plan() -> planning.Plan:
        return planning.plan(planning.parse_bundle(CRD + BUNDLE.replace("VERSION", "v0.17.0")),
                             spec, KSERVE.at("v0.17.0"), ClusterFacts())

    assert applier.install(plan()) is None
    assert kube.rediscovered == 1  # the new CRD's kind is looked up from now on
    for _ in range(3):  # resyncs with nothing to write: no discovery
        assert applier.install(plan()) is None
    assert kube.rediscovered == 1
    kube.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                "inferenceservices.serving.kserve.io")  # someone deletes it: put back
    assert applier.install(plan()) is None
    assert kube.rediscovered == 2


class ServerKube(FakeKube):
    """Keeps ``uid`` and ``generation`` as an API server does and counts the agent's writes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []
        self._uids = 0

    def apply(self, obj: Obj) -> Obj:
        key = self._key(obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))
        before = self.objects.get(key)
        out = super().apply(obj)
        stored = self.objects[key]
        if before is None:
            self._uids += 1
            uid, generation = f"uid-{self._uids}", 1
        else:
            uid, generation = before["metadata"]["uid"], before["metadata"].get("generation", 1)
            generation += before.get("spec") != obj.get("spec")
        kept = {"uid": uid, **({"generation": generation} if "spec" in obj else {})}
        stored["metadata"].update(kept)  # a kind without a spec (a ConfigMap) keeps none
        stored["status"] = (before or {}).get("status")
        if obj["metadata"]["name"] != INVENTORY_CONFIGMAP:  # written at every pass
            self.writes.append(obj["metadata"]["name"])
        out["metadata"].update(kept)
        return out

    def controller_writes(self, kind: str, name: str, **change: Any) -> None:
        """Someone else changes the object: a new resourceVersion, and what ``change`` says."""
        obj = self.objects[(kind, "kserve", name)]
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        if "status" in change:
            obj["status"] = change["status"]
        if "replicas" in change:
            obj["spec"]["replicas"] = change["replicas"]
            obj["metadata"]["generation"] += 1
        if "drop_label" in change:
            obj["metadata"]["labels"].pop(change["drop_label"])
        if change.get("recreated"):
            self._uids += 1
            obj["metadata"].update(uid=f"uid-{self._uids}", generation=1)


def test_status_written_by_others_costs_no_write_but_their_spec_labels_or_recreation_do() -> (
        None):
    kube = ServerKube()
    applier = Applier(kube, CrdCache(kube), Inventory(kube, "agent-ns"))  # type: ignore[arg-type]
    plan = functools.partial(_plan, "v0.17.0")
    assert applier.install(plan()) is None
    first = len(kube.writes)
    assert first >= 3
    controller = "kserve-controller-manager"

    # The Deployment controller writes the status (again and again): nothing to apply.
    for replicas in (0, 1, 1):
        kube.controller_writes("Deployment", controller, status={"readyReplicas": replicas})
        assert applier.install(plan()) is None
    assert len(kube.writes) == first

    # Someone scales it: its spec moved on, so the agent's is applied again.
    kube.controller_writes("Deployment", controller, replicas=3)
    applier.install(plan())
    assert kube.writes[first:] == [controller]
    assert kube.objects[("Deployment", "kserve", controller)]["spec"]["replicas"] == 1

    # Someone strips the agent's label: applied again (the label says whose it is).
    kube.controller_writes("Deployment", controller, drop_label=lb.LABEL_STACK_VERSION)
    applier.install(plan())
    assert kube.writes[first + 1:] == [controller]
    assert _version(kube, "Deployment", controller) == "v0.17.0"

    # Deleted and made again by someone (same generation, another uid): applied again.
    kube.controller_writes("Deployment", controller, recreated=True)
    applier.install(plan())
    assert kube.writes[first + 2:] == [controller]

    # A kind without a generation (a ConfigMap) is applied again on any change.
    kube.controller_writes("ConfigMap", "inferenceservice-config")
    applier.install(plan())
    assert kube.writes[first + 3:] == ["inferenceservice-config"]


def test_a_restarted_agent_applies_only_what_changed_while_it_was_down() -> None:
    """What each write left is kept in the inventory ConfigMap: a new agent process (a new
    Applier and Inventory on the same cluster) writes nothing for a stack nobody touched, and
    applies again what changed meanwhile (before, it applied the whole stack again: KServe's
    CRDs alone are megabytes)."""
    kube = ServerKube()
    plan = functools.partial(_plan, "v0.17.0")
    Applier(kube, CrdCache(kube), Inventory(kube, "agent-ns")).install(  # type: ignore[arg-type]
        plan())
    first = len(kube.writes)
    assert first >= 3
    kube.controller_writes("Deployment", "kserve-controller-manager",
                           status={"readyReplicas": 1})  # while no agent runs
    restarted = Applier(kube, CrdCache(kube), Inventory(kube, "agent-ns"))  # type: ignore[arg-type]
    assert restarted.install(plan()) is None
    assert kube.writes[first:] == []
    kube.controller_writes("Deployment", "kserve-controller-manager", replicas=3)
    again = Applier(kube, CrdCache(kube), Inventory(kube, "agent-ns"))  # type: ignore[arg-type]
    again.install(plan())
    assert kube.writes[first:] == ["kserve-controller-manager"]
    # A record the ConfigMap lost (an older agent's, without them): the stack applied again.
    cm = kube.objects[("ConfigMap", "agent-ns", INVENTORY_CONFIGMAP)]
    cm["data"].pop("applied")
    Applier(kube, CrdCache(kube), Inventory(kube, "agent-ns")).install(  # type: ignore[arg-type]
        plan())
    assert len(kube.writes[first + 1:]) == first
