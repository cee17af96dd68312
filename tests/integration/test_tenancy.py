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
from addon_manager.tenancy import access_work_name
from testbed.chart import render
from testbed.fleet import Testbed
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


@pytest.fixture(scope="module")
def manager(testbed: Testbed, tenants: Tenants,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Manager]:
    """One manager with the default namespace policy (an empty --target-namespaces)."""
    hub = testbed.hub
    with running_manager(testbed, tmp_path_factory.mktemp("manager"), "--target-namespaces=",
                         "--no-addon-enablement") as mgr:
        yield mgr
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
    """Tenant A's ModelServing (serving namespace A) Available on cluster1."""
    hub, spoke = testbed.hub, testbed.spokes[0]
    tenants.apply_as(hub, tenants.a, model_serving("kserve", tenants.a, "p",
                                                   servingNamespaces=[tenants.a]))
    eventually(lambda: spoke.kubectl("get", "servingplatform", "model-serving"), timeout=90)
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


def test_dev_flags_and_an_unverified_manifests_uri_through_impersonation(
    testbed: Testbed, tenants: Tenants, platform: str
) -> None:
    hub, spoke = testbed.hub, testbed.spokes[0]
    b = tenants.b
    tenants.apply_as(hub, b, model_serving(
        "dev", b, "p", servingNamespaces=[b],
        devFlags={"images": {"kserve-controller-manager": "example.com/evil:1"}}))
    _refused(hub, "msv", b, "dev", "DevFlagsNotAllowed", "spec.devFlags.images")
    unverified = tenants.apply_as(hub, b, model_serving(
        "bundle", b, "p", devFlags={"manifests": {"uri": "https://example.com/b.tgz"}}),
        check=False)
    assert unverified.returncode != 0 and "sha256" in unverified.stderr, unverified.stderr
    assert works(hub, b, "dev", "ModelServing") == {}
    platform_spec = get_json(spoke, "servingplatform", "model-serving")["spec"]
    assert "devFlags" not in platform_spec and platform_spec["source"]["namespace"] == tenants.a


@pytest.fixture(scope="module")
def runtime_a(testbed: Testbed, tenants: Tenants, platform: str) -> dict[str, Any]:
    """Tenant A's runtime in its own spoke namespace, applied as A's executor; its work."""
    hub, spoke = testbed.hub, testbed.spokes[0]
    a = tenants.a
    tenants.apply_as(hub, a, intent("MultiClusterServingRuntime", "mine", a, "p",
                                    targetNamespace=a, template=RUNTIME))
    eventually(lambda: spoke.kubectl("get", "servingruntime", "mine", "-n", a), timeout=120)
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
