"""Two hub tenants, each used through impersonation of a user with only its namespace's rights.

Every escape a tenant tries ends in an admission error or a condition naming the field, and
nothing reaches the spoke: another tenant's namespace, ``kube-system``, devFlags the admin did
not allow, a manifests URI without a digest. A ManifestWork forged into the cluster namespace
with a tenant's executor, targeting another tenant's namespace, is refused by OCM's work agent
itself (the executor has rights only in its tenant's namespaces). The manager runs with the
default policy: each hub namespace may target the spoke namespace of its own name.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from addon_api import constants as c
from addon_api import tenancy
from addon_manager.kinds.tenant_access import access_work_name
from testbed.chart import render
from testbed.fleet import Testbed
from testbed.identities import MANAGER_NAMESPACE
from testbed.support.manager import (
    Manager,
    exists,
    get_json,
    intent,
    model_serving,
    placement,
    running_manager,
    set_platform_phase,
    works,
)
from testbed.support.waiting import eventually

RUNTIME = {"containers": [{"name": "c", "image": "img:1"}],
           "supportedModelFormats": [{"name": "sklearn"}]}


class Tenants:
    """Hub namespaces A and B (and spoke namespaces of the same names), a user for each."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:6]
        self.a, self.b = f"ta-{tag}", f"tb-{tag}"
        self.label = f"t-{tag}"
        self.users = {self.a: f"alice-{tag}", self.b: f"bob-{tag}"}

    def apply_as(self, hub: Any, ns: str, obj: dict[str, Any], check: bool = True) -> Any:
        """``kubectl apply`` impersonating the tenant user of ``ns`` (any object's namespace)."""
        return hub.kubectl("apply", f"--as={self.users[ns]}", "-n", obj["metadata"]["namespace"],
                           "-f", "-", input=json.dumps(obj), check=check)


@pytest.fixture(scope="module")
def tenants(testbed: Testbed) -> Iterator[Tenants]:
    """Both tenants set up as docs/security.md tells a hub admin to (the chart's tenant role,
    bound in the tenant's namespace only), and a Placement on cluster1 in each."""
    t = Tenants()
    hub, spoke = testbed.hub, testbed.spokes[0]
    role = [o for o in render() if o["kind"] == "ClusterRole"
            and o["metadata"]["name"] == "model-serving-addon-tenant"]
    assert len(role) == 1, "the chart ships the tenant role"
    hub.apply_objects(role)
    hub.kubectl("label", "managedcluster", spoke.name, f"{t.label}=yes")
    for ns in (t.a, t.b):
        testbed.bind_clusterset(ns)
        hub.kubectl("create", "rolebinding", "model-serving-tenant", "-n", ns,
                    "--clusterrole=model-serving-addon-tenant", f"--user={t.users[ns]}")
        t.apply_as(hub, ns, placement("p", ns, {t.label: "yes"}))
        spoke.kubectl("create", "namespace", ns)
    yield t
    for ns in (t.a, t.b):
        hub.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        spoke.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    hub.kubectl("label", "managedcluster", spoke.name, f"{t.label}-", check=False)


ADMIN_NS = MANAGER_NAMESPACE
"""The platform admin's hub namespace (the manager's own): the only one whose ModelServings
may own a stack by default."""


@pytest.fixture(scope="module")
def manager(testbed: Testbed, tenants: Tenants,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Manager]:
    """One manager with the default policy: stacks owned from the manager's own namespace only
    (an empty --stack-owner-namespaces), each tenant targeting the spoke namespace of its own
    name (the admin's namespace may serve into any)."""
    hub = testbed.hub
    with running_manager(testbed, tmp_path_factory.mktemp("manager"),
                         f"--target-namespaces={ADMIN_NS}=*", "--stack-owner-namespaces=",
                         "--no-addon-enablement") as mgr:
        yield mgr
        hub.kubectl("delete", "msv", "--all", "-n", ADMIN_NS, "--wait=false", check=False)
        for ns in (tenants.a, tenants.b):  # while the manager runs: it holds the finalizers
            hub.kubectl("delete", "msv,sconn,mcsr,mcisvc", "--all", "-n", ns, "--wait=false",
                        check=False)
        eventually(lambda: all(get_json(hub, "msv,sconn,mcsr,mcisvc", "-n", ns)["items"] == []
                               for ns in (tenants.a, tenants.b)), timeout=90)
        # the tenant's identity went with its last work on the cluster
        eventually(lambda: not exists(hub, "manifestwork", access_work_name(tenants.a), "-n",
                                      testbed.spokes[0].name), timeout=30)


@pytest.fixture(scope="module")
def platform(testbed: Testbed, tenants: Tenants, manager: Manager) -> str:
    """The platform admin's ModelServing (serving both tenants' namespaces) Available on
    cluster1. Written by the harness as the hub admin: no tenant may write one."""
    hub, spoke = testbed.hub, testbed.spokes[0]
    testbed.bind_clusterset(ADMIN_NS)
    hub.apply_objects([placement("p", ADMIN_NS, {tenants.label: "yes"}),
                       model_serving("kserve", ADMIN_NS, "p",
                                     servingNamespaces=[tenants.a, tenants.b])])
    eventually(lambda: spoke.kubectl("get", "servingplatform", "model-serving", "-o", "json"),
               timeout=90)
    set_platform_phase(spoke, "Available")
    return spoke.name


def _ready(hub: Any, plural: str, ns: str, name: str) -> dict[str, Any]:
    status = get_json(hub, plural, name, "-n", ns).get("status") or {}
    return next((x for x in status.get("conditions", []) if x["type"] == "Ready"), {})


def _refused(hub: Any, plural: str, ns: str, name: str, reason: str, *said: str) -> None:
    def check() -> bool:
        ready = _ready(hub, plural, ns, name)
        assert ready.get("reason") == reason, ready
        for text in said:
            assert text in ready["message"], ready["message"]
        return True

    eventually(check, timeout=60)


def test_a_tenant_may_not_target_another_tenants_or_a_system_namespace(
    testbed: Testbed, tenants: Tenants, platform: str
) -> None:
    hub, spoke = testbed.hub, testbed.spokes[0]
    a, b = tenants.a, tenants.b
    # Writing into the other tenant's hub namespace is refused by the hub's RBAC (admission).
    denied = tenants.apply_as(hub, a, intent("MultiClusterServingRuntime", "x", b, "p",
                                             targetNamespace=b, template=RUNTIME), check=False)
    assert denied.returncode != 0 and "forbidden" in denied.stderr
    # In its own namespace, aimed at the other tenant's or a system spoke namespace: refused.
    tenants.apply_as(hub, a, intent("MultiClusterServingRuntime", "other", a, "p",
                                    targetNamespace=b, template=RUNTIME))
    tenants.apply_as(hub, b, intent(
        "StorageConnection", "sys", b, "p", type="uri", uri={"uri": "https://example.com/m"},
        targetNamespaces=[b, "kube-system"]))
    _refused(hub, "mcsr", a, "other", "NamespaceNotAllowed",
             f"spec.targetNamespace: spoke namespace '{b}' is not allowed for hub namespace '{a}'")
    _refused(hub, "sconn", b, "sys", "NamespaceNotAllowed",
             "spec.targetNamespaces[1]: spoke namespace 'kube-system' is never a tenant's target")
    assert works(hub, a, "other", "MultiClusterServingRuntime") == {}
    assert works(hub, b, "sys", "StorageConnection") == {}
    assert not exists(spoke, "servingruntime", "other", "-n", b)
    assert [s for s in get_json(spoke, "sealedstorageconnections", "-A")["items"]
            if (s["spec"].get("source") or {}).get("namespace") == b] == []


def test_a_tenant_may_not_write_a_model_serving_at_all(
    testbed: Testbed, tenants: Tenants, platform: str
) -> None:
    """The platform is the platform admin's: the tenant role reads ModelServings, never
    writes one (so no tenant claims clusters first, or scales KServe to 0 for everyone)."""
    hub, spoke = testbed.hub, testbed.spokes[0]
    b = tenants.b
    for attempt in (model_serving("mine", b, "p", servingNamespaces=[b]),
                    model_serving("dev", b, "p", devFlags={
                        "images": {"kserve-controller-manager": "example.com/evil:1"}})):
        denied = tenants.apply_as(hub, b, attempt, check=False)
        assert denied.returncode != 0 and "forbidden" in denied.stderr, denied.stderr
    seen = hub.kubectl("get", "msv", "-n", ADMIN_NS, f"--as={tenants.users[b]}", check=False)
    assert seen.returncode != 0 and "forbidden" in seen.stderr  # not even another namespace's
    assert get_json(hub, "msv", "-n", b)["items"] == []
    platform_spec = get_json(spoke, "servingplatform", "model-serving")["spec"]
    assert "devFlags" not in platform_spec and platform_spec["source"]["namespace"] == ADMIN_NS


def test_a_model_serving_outside_the_admins_namespace_owns_nothing(
    testbed: Testbed, tenants: Tenants, platform: str
) -> None:
    """Written there by someone who may (here the harness), it is refused by the manager's
    default policy, and does not take the cluster from the admin's older one."""
    hub, spoke = testbed.hub, testbed.spokes[0]
    b = tenants.b
    hub.apply_objects([model_serving("claim", b, "p", servingNamespaces=[b],
                                     components={"kserve-controller-manager": {"replicas": 0}})])
    try:
        _refused(hub, "msv", b, "claim", "NamespaceNotAllowed", "may not own a cluster's stack")
        assert works(hub, b, "claim", "ModelServing") == {}
        assert get_json(spoke, "servingplatform", "model-serving")["spec"]["source"] == {
            "namespace": ADMIN_NS, "name": "kserve"}
    finally:
        hub.kubectl("delete", "msv", "claim", "-n", b, "--wait=false", check=False)


def test_dev_flags_in_any_spelling_of_an_override_never_reach_the_spoke(
    testbed: Testbed, tenants: Tenants, platform: str
) -> None:
    """The admin's own ModelServing: devFlags under their wire name in an override are refused
    for the whole intent (DevFlagsNotAllowed), under their Python name as an unknown field of
    that cluster's spec (RenderFailed naming it); the spoke's ServingPlatform keeps no
    devFlags."""
    hub, spoke = testbed.hub, testbed.spokes[0]
    flags = {"manifests": {"uri": "https://evil.example/b.tgz", "sha256": "0" * 64}}
    for key in ("devFlags", "dev_flags"):
        body = model_serving("kserve", ADMIN_NS, "p", servingNamespaces=[tenants.a, tenants.b],
                             overrides=[{"clusterNames": [spoke.name], "patch": {key: flags}}])
        hub.apply_objects([body])

        def refused(key: str = key) -> bool:
            status = get_json(hub, "msv", "kserve", "-n", ADMIN_NS).get("status") or {}
            if key == "devFlags":
                ready = next(x for x in status.get("conditions") or [] if x["type"] == "Ready")
                assert ready["reason"] == "DevFlagsNotAllowed", ready
                assert f"spec.overrides[0].patch.{key}.manifests" in ready["message"], ready
                return True
            found = next((e for e in status.get("clusters") or []
                          if e["cluster"] == spoke.name), {})
            assert found.get("reason") == "RenderFailed", found
            assert f"{key}: Extra inputs are not permitted" in found["message"], found
            return True

        eventually(refused, timeout=60)
        assert "devFlags" not in get_json(spoke, "servingplatform", "model-serving")["spec"]
    hub.apply_objects([model_serving("kserve", ADMIN_NS, "p",
                                     servingNamespaces=[tenants.a, tenants.b])])


@pytest.fixture(scope="module")
def runtime_a(testbed: Testbed, tenants: Tenants, platform: str) -> dict[str, Any]:
    """Tenant A's runtime in its own spoke namespace, applied as A's executor; its work."""
    hub, spoke = testbed.hub, testbed.spokes[0]
    a = tenants.a
    tenants.apply_as(hub, a, intent("MultiClusterServingRuntime", "mine", a, "p",
                                    targetNamespace=a, template=RUNTIME))
    eventually(lambda: spoke.kubectl("get", "servingruntime", "mine", "-n", a, "-o", "json"),
               timeout=120)
    return dict(works(hub, a, "mine", "MultiClusterServingRuntime")[platform])


def test_a_tenants_works_run_as_its_executor_with_rights_in_its_namespaces_only(
    testbed: Testbed, tenants: Tenants, runtime_a: dict[str, Any]
) -> None:
    spoke, a = testbed.spokes[0], tenants.a
    sa = tenancy.executor_name(a)
    assert runtime_a["spec"]["executor"]["subject"]["serviceAccount"] == {
        "namespace": c.AGENT_NAMESPACE, "name": sa}
    assert exists(testbed.hub, "manifestwork", access_work_name(a), "-n", spoke.name)
    who = f"--as=system:serviceaccount:{c.AGENT_NAMESPACE}:{sa}"
    can = [spoke.kubectl("auth", "can-i", "create", "servingruntimes.serving.kserve.io",
                         "-n", ns, who, check=False).stdout.strip()
           for ns in (a, tenants.b, "kube-system")]
    assert can == ["yes", "no", "no"]


def test_a_forged_work_with_a_tenant_executor_is_refused_by_the_work_agent(
    testbed: Testbed, tenants: Tenants, runtime_a: dict[str, Any]
) -> None:
    hub, spoke = testbed.hub, testbed.spokes[0]
    a, b = tenants.a, tenants.b
    # A tenant cannot write ManifestWorks at all ...
    forged = {
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": f"forged-{a}", "namespace": spoke.name},
        "spec": {
            "executor": runtime_a["spec"]["executor"],
            "workload": {"manifests": [
                {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
                 "metadata": {"name": "forged", "namespace": ns}, "spec": RUNTIME}
                for ns in (b, "kube-system")
            ]},
        },
    }
    denied = hub.kubectl("create", f"--as={tenants.users[a]}", "-f", "-",
                         input=json.dumps(forged), check=False)
    assert denied.returncode != 0 and "forbidden" in denied.stderr
    # ... and one written by whoever may (here the harness) is refused on the spoke.
    hub.apply_objects([forged])
    try:
        def refused() -> list[str]:
            status = get_json(hub, "manifestwork", f"forged-{a}", "-n", spoke.name)["status"]
            messages = [x["message"] for m in status["resourceStatus"]["manifests"]
                        for x in m["conditions"] if x["type"] == "Applied"
                        and x["status"] == "False"]
            assert len(messages) == 2, status
            return messages

        for message in eventually(refused, timeout=90):
            assert "not allowed to apply the resource serving.kserve.io servingruntimes" in message
        assert not exists(spoke, "servingruntime", "forged", "-n", b)
        assert not exists(spoke, "servingruntime", "forged", "-n", "kube-system")
    finally:
        hub.kubectl("delete", "manifestwork", f"forged-{a}", "-n", spoke.name, check=False)


ISVC = {"predictor": {"model": {"modelFormat": {"name": "sklearn"},
                                "storageUri": "s3://models/iris"}}}


def _entry(hub: Any, plural: str, ns: str, name: str, cluster: str) -> dict[str, Any]:
    status = get_json(hub, plural, name, "-n", ns).get("status") or {}
    return next((e for e in status.get("clusters") or [] if e["cluster"] == cluster), {})


def test_snake_case_spellings_are_refused_naming_the_key(
    testbed: Testbed, tenants: Tenants, runtime_a: dict[str, Any]
) -> None:
    """Tenant A tries the Python names of guarded fields: in the spec, the API server refuses
    the unknown field at admission; in an override patch (free-form), the manager refuses the
    cluster's spec naming the key, and nothing reaches the spoke."""
    hub, spoke = testbed.hub, testbed.spokes[0]
    a, b = tenants.a, tenants.b
    top = tenants.apply_as(hub, a, intent("MultiClusterInferenceService", "snake", a, "p",
                                          targetNamespace=a, target_namespace=b,
                                          template=ISVC), check=False)
    assert top.returncode != 0 and "target_namespace" in top.stderr, top.stderr
    for name, patch, key in (
        ("snake-ns", {"target_namespace": b}, "target_namespace"),
        ("snake-pod", {"template": {"predictor": {"host_network": True}}}, "host_network"),
    ):
        tenants.apply_as(hub, a, intent(
            "MultiClusterInferenceService", name, a, "p", targetNamespace=a, template=ISVC,
            overrides=[{"clusterNames": [spoke.name], "patch": patch}]))

        def refused(name: str = name, key: str = key) -> bool:
            found = _entry(hub, "mcisvc", a, name, spoke.name)
            assert found.get("reason") == "RenderFailed", found
            assert f"{key}: Extra inputs are not permitted" in found["message"], found
            return True

        eventually(refused, timeout=60)
        assert works(hub, a, name, "MultiClusterInferenceService") == {}
    assert not exists(spoke, "inferenceservice", "snake-ns", "-n", b)
    assert not exists(spoke, "inferenceservice", "snake-pod", "-n", a)


def test_a_tenants_pod_that_would_escape_is_refused_naming_the_field(
    testbed: Testbed, tenants: Tenants, runtime_a: dict[str, Any]
) -> None:
    """Host network in the template, a hostPath volume only in the cluster's override, the
    KServe controller's ServiceAccount, a privileged runtime: each refused on what would be
    sent (PodNotAllowed naming the field), none on the spoke."""
    hub, spoke = testbed.hub, testbed.spokes[0]
    a = tenants.a
    attacks = [
        ("MultiClusterInferenceService", "mcisvc", "hostnet", "inferenceservice",
         {"template": {"predictor": {**ISVC["predictor"], "hostNetwork": True}}},
         "spec.template.predictor.hostNetwork"),
        ("MultiClusterInferenceService", "mcisvc", "hostpath", "inferenceservice",
         {"template": ISVC, "overrides": [{"clusterNames": [spoke.name], "patch": {
             "template": {"predictor": {"volumes": [
                 {"name": "root", "hostPath": {"path": "/"}}]}}}}]},
         "spec.template.predictor.volumes[0].hostPath"),
        ("MultiClusterInferenceService", "mcisvc", "as-kserve", "inferenceservice",
         {"template": {"predictor": {**ISVC["predictor"],
                                     "serviceAccountName": "kserve-controller-manager"}}},
         "spec.template.predictor.serviceAccountName"),
        ("MultiClusterServingRuntime", "mcsr", "priv", "servingruntime",
         {"template": {**RUNTIME, "containers": [
             {"name": "c", "image": "img:1", "securityContext": {"privileged": True}}]}},
         "spec.template.containers[0].securityContext.privileged"),
    ]
    for kind, _plural, name, _, spec, _ in attacks:
        tenants.apply_as(hub, a, intent(kind, name, a, "p", targetNamespace=a, **spec))
    for kind, plural, name, spoke_kind, _, field in attacks:
        def refused(plural: str = plural, name: str = name, field: str = field) -> bool:
            found = _entry(hub, plural, a, name, spoke.name)
            assert found.get("reason") == "PodNotAllowed" and field in found["message"], found
            return True

        eventually(refused, timeout=60)
        assert works(hub, a, name, kind) == {}
        assert not exists(spoke, spoke_kind, name, "-n", a)


def test_an_object_a_user_made_on_the_spoke_is_never_taken_over(
    testbed: Testbed, tenants: Tenants, runtime_a: dict[str, Any]
) -> None:
    """Someone on the cluster made InferenceService ``theirs`` in tenant A's namespace with
    ``kubectl apply``; A's intent of the same name would change its storage URI. Tenant
    objects are applied without force (issue 29, item 5): the hub says Conflict naming the
    field and its manager, the object keeps the user's spec, and the intent's removal leaves
    it."""
    hub, spoke = testbed.hub, testbed.spokes[0]
    a = tenants.a
    users = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
             "metadata": {"name": "theirs", "namespace": a},
             "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"},
                                              "storageUri": "s3://theirs/model"}}}}
    spoke.kubectl("apply", "-f", "-", input=json.dumps(users))
    tenants.apply_as(hub, a, intent("MultiClusterInferenceService", "theirs", a, "p",
                                    targetNamespace=a, template=ISVC))

    def conflict() -> bool:
        found = _entry(hub, "mcisvc", a, "theirs", spoke.name)
        assert (found.get("phase"), found.get("reason")) == ("Conflict", "SpokeObjectOwned"), found
        assert ".spec.predictor.model.storageUri" in found["message"], found
        assert "kubectl" in found["message"], found
        return True

    eventually(conflict, timeout=90)
    kept = get_json(spoke, "inferenceservice", "theirs", "-n", a)
    assert kept["spec"]["predictor"]["model"]["storageUri"] == "s3://theirs/model"
    hub.kubectl("delete", "mcisvc", "theirs", "-n", a)
    # The intent's removal leaves the user's object: the work never owned it.
    eventually(lambda: works(hub, a, "theirs", "MultiClusterInferenceService") == {}, timeout=60)
    assert get_json(spoke, "inferenceservice", "theirs", "-n", a)["spec"] == kept["spec"]
