"""The namespace policy reaches each agent as a ConfigMap the manager owns (issue 32).

Not an AddOnDeploymentConfig variable (1,024 characters at most, and absent on a cluster
with an AddOnDeploymentConfig of its own): a ManifestWork per cluster that a ModelServing or
StorageConnection selects, written beside their works, rewritten when the policy or the
agent's namespace changes, and gone with the last intent that needs it.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from addon_api import constants as c
from addon_api import tenancy
from addon_manager.engine.policy import Policy
from addon_manager.facts import conflicts, naming
from addon_manager.kinds import namespace_policy
from addon_manager.shell.reconcile import Reconciler
from testbed.support.fake_hub import FakeHub
from testbed.support.sealing import memory_sealer

POLICY = Policy(namespaces=replace(tenancy.parse("ns=models,ns;team-a=team-a"),
                                   denied=frozenset({"finance"})))


def msv(name: str = "kserve", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": c.API_VERSION, "kind": c.KIND_MODEL_SERVING,
            "metadata": {"name": name, "namespace": "ns", "generation": 1,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"platform": "KServe", "placementRef": {"name": "p"},
                     "servingNamespaces": ["models"], **spec}}


def reconcile(hub: FakeHub, body: dict[str, Any], admin: Policy = POLICY) -> None:
    asyncio.run(Reconciler(hub, hub, memory_sealer(), admin=admin).reconcile(body["kind"], body))


def policy_configmap(hub: FakeHub, cluster: str) -> dict[str, Any]:
    work = hub.bodies[(cluster, naming.POLICY_WORK_NAME)]
    manifests = work["spec"]["workload"]["manifests"]
    assert len(manifests) == 1 and "executor" not in work["spec"], work["spec"]
    return dict(manifests[0])


def test_a_model_serving_delivers_the_policy_to_each_clusters_agent_namespace() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})},
                  agent_namespaces={"c2": "custom-agent"})
    reconcile(hub, msv())
    for cluster, namespace in (("c1", c.AGENT_NAMESPACE), ("c2", "custom-agent")):
        cm = policy_configmap(hub, cluster)
        assert (cm["kind"], cm["metadata"]) == ("ConfigMap", {
            "name": c.NAMESPACE_POLICY_CONFIGMAP, "namespace": namespace})
        # What the agent reads back is the manager's policy, denied namespaces included.
        assert tenancy.from_configmap(cm["data"]) == POLICY.namespaces
    assert hub.works[("c1", naming.POLICY_WORK_NAME)].kind == naming.KIND_POLICY


def test_the_same_policy_writes_nothing_and_a_changed_one_rewrites_every_cluster() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    reconcile(hub, msv())
    before = len(hub.writes)
    reconcile(hub, msv())
    assert hub.writes[before:] == [w for w in hub.writes[before:] if w[0] == "status"]
    wider = replace(POLICY, namespaces=replace(tenancy.parse("ns=models,ns,more"),
                                               denied=frozenset({"finance"})))
    reconcile(hub, msv(), wider)
    policy_writes = [w for w in hub.writes[before:] if w[1].endswith(naming.POLICY_WORK_NAME)]
    assert policy_writes == [("apply", f"c1/{naming.POLICY_WORK_NAME}"),
                             ("apply", f"c2/{naming.POLICY_WORK_NAME}")]
    assert tenancy.from_configmap(policy_configmap(hub, "c1")["data"]).targets("ns") == {
        "models", "ns", "more"}


def test_a_policy_longer_than_an_addon_variable_is_delivered_whole() -> None:
    many = ";".join(f"tenant-{i:04d}=tenant-{i:04d},shared-models" for i in range(400))
    admin = Policy(namespaces=tenancy.parse(many + ";ns=models"))
    assert len(admin.namespaces.render()) > 10 * 1024
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    reconcile(hub, msv(), admin)
    read = tenancy.from_configmap(policy_configmap(hub, "c1")["data"])
    assert read == admin.namespaces and read.targets("tenant-0399") == {
        "tenant-0399", "shared-models"}


def test_a_refused_model_serving_sends_no_policy_either() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    reconcile(hub, msv(servingNamespaces=["kube-system"]))
    status = hub.statuses["kserve"]
    assert (status["phase"], status["conditions"][0]["reason"]) == (
        "Invalid", "NamespaceNotAllowed")
    assert hub.bodies == {}


def test_the_policy_goes_with_the_last_intent_that_needs_it() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"}), ("ns", "p2"): frozenset({"c2"})},
                  msv_claims=[conflicts.Claim("ns", "kserve", "2026-01-01T00:00:00Z",
                                              frozenset({"c1"}))],
                  storage={("ns", "s3"): frozenset({"c1"})})
    reconcile(hub, msv())
    assert ("c1", naming.POLICY_WORK_NAME) in hub.works
    # The ModelServing goes; a StorageConnection still selects c1: the policy stays.
    gone = msv()
    gone["metadata"]["deletionTimestamp"] = "2026-03-01T00:00:00Z"
    hub.msv_claims = []
    reconcile(hub, gone)
    assert not hub.works_of(c.KIND_MODEL_SERVING, "ns", "kserve")
    assert ("c1", naming.POLICY_WORK_NAME) in hub.works
    # Nothing selects c1 any more: collected.
    hub.storage = {}
    removed = asyncio.run(Reconciler(hub, hub, memory_sealer(), admin=POLICY).collect(
        namespace_policy.SPEC))
    assert removed == 1 and ("c1", naming.POLICY_WORK_NAME) not in hub.works


def test_a_policy_work_is_needed_where_an_intent_selects_or_still_has_a_work() -> None:
    hub = FakeHub(storage={("ns", "s3"): frozenset({"c1"})})
    assert namespace_policy.SPEC.needed_on is not None
    assert namespace_policy.SPEC.needed_on(hub, ["c1", "c2"]) == {"c1"}
    assert namespace_policy.SPEC.needed_on(hub, []) == frozenset()


@pytest.mark.parametrize(("data", "key"), [
    ({c.POLICY_KEY_TARGETS: "ns=Not_A_Label"}, c.POLICY_KEY_TARGETS),
    ({c.POLICY_KEY_TARGETS: "ns=models", c.POLICY_KEY_DENIED: "ok,BAD!"}, c.POLICY_KEY_DENIED),
])
def test_an_unreadable_policy_configmap_names_its_key(data: dict[str, str], key: str) -> None:
    with pytest.raises(ValueError, match=f"^key {key}: "):
        tenancy.from_configmap(data)


def test_an_empty_policy_configmap_is_the_default_policy() -> None:
    assert tenancy.from_configmap({}) == tenancy.NamespacePolicy()
    assert tenancy.from_configmap(None).targets("team-a") == {"team-a"}
