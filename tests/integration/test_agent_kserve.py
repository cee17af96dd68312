"""KServe (Standard/headless) on a testbed spoke: install, settings, drift, metrics, removal
and its guardrails (nothing the add-on did not create is taken over or deleted)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Any

import yaml

from addon_agent.bundle_render import RUNTIMES_FILE, bundle_path
from addon_agent.io.inventory import INVENTORY_CONFIGMAP
from addon_agent.pure import certs
from addon_agent.stacks import KSERVE
from addon_api import constants as c
from testbed import upstream
from testbed.fleet import Testbed
from testbed.support.agent import (
    AgentProcess,
    get,
    leftovers,
    platform,
    timed,
    wait_phase,
    wait_runtimes_reported,
)
from testbed.support.manager import (
    HUB_CRDS,
    Manager,
    get_json,
    manager_identity,
    model_serving,
)
from testbed.support.manager import placement as hub_placement
from testbed.support.waiting import eventually

NAME = "kserve"
CONTROLLER = "kserve-controller-manager"
RESOURCES = {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
SPEC = {
    "platform": "KServe",
    "components": {CONTROLLER: {"replicas": 1, "resources": RESOURCES}},
    "kserve": {"serviceClusterIPNone": True},
    "devFlags": {"images": {CONTROLLER: "example.com/kserve/kserve-controller:test"}},
}


USERS_NS = "team-guard"
USERS_RUNTIME = {
    "apiVersion": "serving.kserve.io/v1alpha1",
    "kind": "ServingRuntime",
    "metadata": {"name": "users-runtime", "namespace": USERS_NS, "labels": {"team": "users"}},
    "spec": {
        "supportedModelFormats": [{"name": "users-format", "autoSelect": True}],
        "containers": [{"name": "kserve-container", "image": "example.com/users/server:1"}],
    },
}
USERS_CLUSTER_ROLE = {  # has the name of a ClusterRole of KServe's bundle
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "kserve-proxy-role", "labels": {"team": "users"}},
    "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
}
GUARD_NS = "ml-guard"


def deployment(spoke: Any) -> Any:
    return get(spoke, "deployment", "-n", "kserve", CONTROLLER)



def test_install_to_available(spoke: Any, agent: AgentProcess) -> None:
    spoke.apply_objects([platform(NAME, SPEC)])
    status, seconds = timed(lambda: wait_phase(spoke, NAME, "Available", timeout=180))
    print(f"KServe install to Available: {seconds:.1f}s")
    assert status["stackVersion"] == KSERVE.version
    assert status["readyComponents"] == status["totalComponents"] == 1
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Available"] == "True"


def test_the_stack_namespace_enforces_restricted_pods(spoke: Any, agent: AgentProcess) -> None:
    """The controller's pod was admitted under Pod Security ``restricted`` (the Deployment is
    Available, above); an unsafe pod in the same namespace is refused by the API server."""
    ns = get(spoke, "namespace", "kserve")
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    refused = spoke.kubectl("run", "unsafe", "-n", "kserve", "--image=busybox",
                            "--privileged", "--restart=Never", check=False)
    assert refused.returncode != 0
    assert 'violates PodSecurity "restricted:latest"' in refused.stderr, refused.stderr
    assert "privileged" in refused.stderr


def test_builtin_runtimes_installed_as_rendered(
    spoke: Any, bundles: Path, agent: AgentProcess
) -> None:
    text = (bundle_path(bundles, KSERVE) / RUNTIMES_FILE).read_text()
    rendered = {d["metadata"]["name"]: d for d in yaml.safe_load_all(text) if d}
    assert {"kserve-sklearnserver", "kserve-xgbserver", "kserve-tritonserver"} <= set(rendered)
    items = json.loads(spoke.kubectl("get", "clusterservingruntimes", "-o", "json").stdout)
    live = {i["metadata"]["name"]: i for i in items["items"]}
    assert set(rendered) <= set(live)
    for name, runtime in rendered.items():
        labels = live[name]["metadata"]["labels"]
        assert labels[c.LABEL_MANAGED_BY] == c.FIELD_MANAGER, name
        assert live[name]["spec"]["supportedModelFormats"] == runtime["spec"][
            "supportedModelFormats"
        ]
    sklearn = live["kserve-sklearnserver"]["spec"]
    assert sklearn["containers"][0]["image"] == f"kserve/sklearnserver:{KSERVE.version}"
    assert {"name": "sklearn", "version": "1", "autoSelect": True, "priority": 1} in sklearn[
        "supportedModelFormats"
    ]


def test_component_settings_and_image(spoke: Any, agent: AgentProcess) -> None:
    dep = deployment(spoke)
    assert dep["spec"]["replicas"] == 1
    manager = dep["spec"]["template"]["spec"]["containers"][0]
    assert manager["image"] == "example.com/kserve/kserve-controller:test"
    assert manager["resources"]["requests"] == RESOURCES["requests"]
    assert dep["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "model-serving-addon"
    assert "--leader-elect" in manager["args"]  # controllers keep their leader election


def test_inferenceservice_config_is_headless_standard(spoke: Any, agent: AgentProcess) -> None:
    cm = get(spoke, "configmap", "-n", "kserve", "inferenceservice-config")
    assert json.loads(cm["data"]["deploy"])["defaultDeploymentMode"] == "Standard"
    assert json.loads(cm["data"]["ingress"])["disableIngressCreation"] is True
    assert json.loads(cm["data"]["service"])["serviceClusterIPNone"] is True


def test_self_signed_webhook_certificate_injected(spoke: Any, agent: AgentProcess) -> None:
    secret = get(spoke, "secret", "-n", "kserve", "kserve-webhook-server-cert")
    ca = base64.b64decode(secret["data"]["ca.crt"]).decode()
    assert "BEGIN CERTIFICATE" in base64.b64decode(secret["data"]["tls.crt"]).decode()
    hooks = get(spoke, "validatingwebhookconfiguration", "inferenceservice.serving.kserve.io")
    for hook in hooks["webhooks"]:
        assert base64.b64decode(hook["clientConfig"]["caBundle"]).decode() == ca
    mutating = get(spoke, "mutatingwebhookconfiguration", "inferenceservice.serving.kserve.io")
    assert all(h["clientConfig"]["caBundle"] for h in mutating["webhooks"])
    # cert-manager is not installed: no Certificate/Issuer applied
    assert get(spoke, "crd", "certificates.cert-manager.io") is None


def test_webhook_ca_rotated_before_expiry(spoke: Any, agent: AgentProcess) -> None:
    now = dt.datetime.now(dt.UTC)
    # a CA that expires in 10 days, i.e. inside the renewal window
    old = certs.new_ca(now - certs.CA_LIFETIME + dt.timedelta(days=10))
    ns = "open-cluster-management-agent-addon"
    spoke.apply_objects(
        [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "model-serving-agent-webhook-ca", "namespace": ns},
                "type": "kubernetes.io/tls",
                "data": {
                    "tls.crt": base64.b64encode(old.cert_pem.encode()).decode(),
                    "tls.key": base64.b64encode(old.key_pem.encode()).decode(),
                },
            }
        ]
    )

    def rotated() -> bool:
        secret = get(spoke, "secret", "-n", ns, "model-serving-agent-webhook-ca")
        ca_pem = base64.b64decode(secret["data"]["tls.crt"]).decode()
        assert ca_pem != old.cert_pem
        assert not certs.needs_renewal(ca_pem, now)
        hooks = get(spoke, "validatingwebhookconfiguration", "inferenceservice.serving.kserve.io")
        assert base64.b64decode(hooks["webhooks"][0]["clientConfig"]["caBundle"]).decode() == ca_pem
        serving = get(spoke, "secret", "-n", "kserve", "kserve-webhook-server-cert")
        leaf = base64.b64decode(serving["data"]["tls.crt"]).decode()
        ca = certs.KeyPair(ca_pem, base64.b64decode(secret["data"]["tls.key"]).decode())
        assert certs.leaf_valid(leaf, ca, ["kserve-webhook-server-service.kserve.svc"], now)
        return True

    eventually(rotated, timeout=30)


def test_drift_is_repaired(spoke: Any, agent: AgentProcess) -> None:
    spoke.kubectl(
        "set", "image", "-n", "kserve", f"deployment/{CONTROLLER}", "manager=evil/image:1"
    )
    eventually(
        lambda: (
            deployment(spoke)["spec"]["template"]["spec"]["containers"][0]["image"]
            == "example.com/kserve/kserve-controller:test"
        ),
        timeout=30,
    )
    uid = deployment(spoke)["metadata"]["uid"]
    spoke.kubectl("delete", "deployment", "-n", "kserve", CONTROLLER)
    eventually(
        lambda: (deployment(spoke) or {}).get("metadata", {}).get("uid") not in (None, uid),
        timeout=30,
    )
    wait_phase(spoke, NAME, "Available", timeout=60)


def test_autoscaling_creates_hpa_and_leaves_replicas(spoke: Any, agent: AgentProcess) -> None:
    spec = {
        **SPEC,
        "components": {CONTROLLER: {"autoscaling": {"minReplicas": 1, "maxReplicas": 3}}},
    }
    spoke.apply_objects([platform(NAME, spec)])
    hpa = eventually(lambda: get(spoke, "hpa", "-n", "kserve", CONTROLLER), timeout=60)
    assert hpa["spec"]["maxReplicas"] == 3
    assert hpa["spec"]["scaleTargetRef"]["name"] == CONTROLLER
    status = wait_phase(spoke, NAME, "Available", timeout=60)
    assert "only one is active" in status["message"]  # > 2 replicas warning
    spoke.kubectl("scale", "-n", "kserve", f"deployment/{CONTROLLER}", "--replicas=2")
    # one full resync later the agent has not reset the replicas the autoscaler owns
    eventually(lambda: deployment(spoke)["spec"]["replicas"] == 2, timeout=10)
    gen = get(spoke, "servingplatform", NAME)["metadata"]["generation"]
    eventually(lambda: get(spoke, "servingplatform", NAME)["status"]["observedGeneration"] == gen)
    assert deployment(spoke)["spec"]["replicas"] == 2


def test_metrics_endpoint(spoke: Any, agent: AgentProcess) -> None:
    def check() -> bool:
        text = agent.metrics()
        assert ('model_serving_platform_ready{platform="KServe",version="'
                f'{KSERVE.version}"}} 1.0') in text, text[:2000]
        assert f'model_serving_component_ready{{component="{CONTROLLER}"}} 1.0' in text
        assert "model_serving_inferenceservices{" in text
        assert "model_serving_agent_reconcile_duration_seconds_count" in text
        assert "model_serving_agent_reconcile_errors_total" in text
        return True

    eventually(check, timeout=30)


def test_lease_is_renewed(spoke: Any, agent: AgentProcess) -> None:
    first = get(spoke, "lease", "-n", "open-cluster-management-agent-addon", "model-serving")
    eventually(
        lambda: (
            get(spoke, "lease", "-n", "open-cluster-management-agent-addon", "model-serving")[
                "spec"
            ]["renewTime"]
            != first["spec"]["renewTime"]
        ),
        timeout=15,
    )


def test_runtimes_the_unserved_webhook_cannot_admit_are_reported(
    spoke: Any, agent: AgentProcess
) -> None:
    """A restarted agent that does not know what it applied (the inventory of an older agent
    keeps no records of its writes) applies its runtimes again: updates now, which KServe's
    validating webhook must admit. Its server (KServe's controller) does not run here: the
    runtimes are reported, the install is not stuck and the platform stays Available. (That
    the report clears once the webhook serves: tests/integration/test_e2e.py, with the real
    controller.)"""
    agent.stop()
    spoke.kubectl("patch", "configmap", INVENTORY_CONFIGMAP, "-n", c.AGENT_NAMESPACE,
                  "--type=json", "-p", '[{"op": "remove", "path": "/data/applied"}]')
    agent.start()

    status, seconds = timed(lambda: wait_runtimes_reported(spoke, NAME))
    print(f"KServe runtimes refused by the unserved webhook reported after {seconds:.1f}s")
    assert "runtimes not applied: ClusterServingRuntime kserve-" in status["message"]
    assert get(spoke, "clusterservingruntime", "kserve-sklearnserver") is not None
    assert status["readyComponents"] == status["totalComponents"] == 1
    # Once an update can be admitted (here: the webhook configuration out of the way, which
    # the agent then puts back) the next reconcile applies the runtimes and the report clears.
    # The agent puts the configuration back in the same reconcile, after the runtimes: a
    # deletion that lands between its webhook step and its next runtime step lets the runtimes
    # through, one that lands earlier is undone first; so delete again until one gets through.
    hook = "clusterservingruntime.serving.kserve.io"

    def cleared() -> dict[str, Any]:
        spoke.kubectl("delete", "validatingwebhookconfiguration", hook, check=False)
        status = wait_phase(spoke, NAME, "Available", timeout=60)
        degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
        assert degraded["reason"] != "RuntimesNotApplied", status
        assert "runtimes not applied" not in status["message"], status
        return status

    eventually(cleared, timeout=60)
    eventually(lambda: get(spoke, "validatingwebhookconfiguration", hook) is not None, timeout=30)


def test_removal_is_blocked_by_a_users_serving_runtime_until_it_is_gone(
    spoke: Any, agent: AgentProcess
) -> None:
    """A ServingRuntime the add-on did not create would go with the CRD the agent installed:
    the removal is refused, naming kind and count, and goes on by itself once it is gone."""
    spoke.kubectl("create", "namespace", USERS_NS, check=False)

    def created() -> bool:
        # KServe's webhook for ServingRuntimes has no server here (its controller does not
        # run): out of the way for a moment (the agent puts it back on its next resync).
        spoke.kubectl("delete", "validatingwebhookconfiguration",
                      "servingruntime.serving.kserve.io", "--ignore-not-found")
        spoke.apply_objects([USERS_RUNTIME])
        return True

    eventually(created, timeout=30)
    spoke.apply_objects([platform(NAME, {**SPEC, "managementState": "Removed"})])
    status = wait_phase(spoke, NAME, "RemovalBlocked", timeout=60)
    assert status["message"].startswith(
        "1 ServingRuntime not created by the add-on remain"), status
    assert f"ServingRuntime {USERS_NS}/users-runtime" in status["message"], status
    assert {x["reason"] for x in status["conditions"]} == {"ForeignObjectsPresent"}, status
    # nothing was uninstalled
    assert deployment(spoke) is not None
    assert get(spoke, "crd", "servingruntimes.serving.kserve.io") is not None
    spoke.kubectl("delete", "servingruntime", "users-runtime", "-n", USERS_NS)
    status = wait_phase(spoke, NAME, "Removed", timeout=180)
    assert {x["reason"] for x in status["conditions"]} == {"Removed"}, status
    spoke.kubectl("delete", "namespace", USERS_NS, "--wait=false")


def test_removed_uninstalls_everything(spoke: Any, agent: AgentProcess) -> None:
    spoke.apply_objects([platform(NAME, {**SPEC, "managementState": "Removed"})])
    wait_phase(spoke, NAME, "Removed", timeout=180)
    eventually(lambda: leftovers(spoke) == [], timeout=120)
    assert get(spoke, "crd", "inferenceservices.serving.kserve.io") is None
    spoke.kubectl("delete", "servingplatform", NAME, "--timeout=60s")


def test_the_agent_judges_by_the_policy_in_its_namespace_before_its_flag(
    spoke: Any, agent: AgentProcess
) -> None:
    """The namespace policy the manager delivers (ConfigMap model-serving-namespace-policy in
    the agent's namespace, issue 32) is what the agent judges a ServingPlatform's serving
    namespaces by, not its --target-namespaces (open here): refused while the ConfigMap denies
    one, judged again once it allows it, and by the flag again once it is gone. Unmanaged:
    once judged, what follows is the stack's own answer (StackNotFound on a cluster without
    KServe), never an install."""

    def policy(targets: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": c.NAMESPACE_POLICY_CONFIGMAP,
                             "namespace": c.AGENT_NAMESPACE},
                "data": {c.POLICY_KEY_TARGETS: targets}}

    def reasons() -> set[str]:
        status = (get(spoke, "servingplatform", NAME) or {}).get("status") or {}
        return {x["reason"] for x in status.get("conditions") or []}

    judged = "policy-judged"
    spec = {"platform": "KServe", "managementState": "Unmanaged",
            "source": {"namespace": "platform", "name": "kserve"},
            "servingNamespaces": [judged]}
    try:
        spoke.apply_objects([policy("platform=models")])
        spoke.apply_objects([platform(NAME, spec)])
        refused = wait_phase(spoke, NAME, "Degraded", timeout=60)
        assert {x["reason"] for x in refused["conditions"]} == {"NamespaceNotAllowed"}, refused
        assert (f"spoke namespace '{judged}' is not allowed for hub namespace 'platform'"
                in refused["message"]), refused
        spoke.apply_objects([policy(f"platform=models,{judged}")])
        eventually(lambda: reasons() - {"NamespaceNotAllowed"}, timeout=30)
        spoke.apply_objects([policy("platform=models")])
        eventually(lambda: reasons() == {"NamespaceNotAllowed"}, timeout=30)
        spoke.kubectl("delete", "configmap", c.NAMESPACE_POLICY_CONFIGMAP, "-n",
                      c.AGENT_NAMESPACE)
        eventually(lambda: reasons() - {"NamespaceNotAllowed"}, timeout=30)  # the flag: *=*
        assert get(spoke, "namespace", "kserve") is None  # Unmanaged: nothing installed
    finally:
        spoke.kubectl("delete", "servingplatform", NAME, "--timeout=60s", check=False)
        spoke.kubectl("delete", "configmap", c.NAMESPACE_POLICY_CONFIGMAP, "-n",
                      c.AGENT_NAMESPACE, "--ignore-not-found", check=False)


def test_what_is_someone_elses_is_never_taken_over_or_deleted(
    spoke: Any, agent: AgentProcess
) -> None:
    """What existed before the agent stays its owner's: a CRD someone else installed (say an
    earlier KServe) serves the stack and is kept with the objects of its kind; an object with
    the name of one of the stack's is never applied over, labelled or deleted (and the stack
    is not Available meanwhile); a namespace the agent created that holds a user's ConfigMap
    is kept when the stack is removed, and named."""
    theirs = "trainedmodels.serving.kserve.io"
    spoke.apply_files([p for p in upstream.kserve_crds() if "trainedmodels" in p.name])
    spoke.wait_crds_established()
    spoke.apply_objects([USERS_CLUSTER_ROLE])
    role = get(spoke, "clusterrole", "kserve-proxy-role")
    spoke.apply_objects([platform(NAME, {**SPEC, "servingNamespaces": [GUARD_NS]})])
    try:
        def installed_but_not_available() -> dict[str, Any]:
            status = wait_phase(spoke, NAME, "Degraded", timeout=120)
            assert status["readyComponents"] == status["totalComponents"] == 1, status
            return status

        status = eventually(installed_but_not_available, timeout=180)  # all but the ClusterRole
        assert status["message"].startswith("not taken over"), status
        assert "ClusterRole kserve-proxy-role" in status["message"], status
        assert {x["reason"] for x in status["conditions"]} == {"ForeignObjectConflict"}, status
        labels = get(spoke, "crd", theirs)["metadata"].get("labels") or {}
        assert c.LABEL_MANAGED_BY not in labels, labels
        ours = get(spoke, "crd", "inferenceservices.serving.kserve.io")["metadata"]["labels"]
        assert ours[c.LABEL_MANAGED_BY] == c.FIELD_MANAGER
        assert get(spoke, "clusterrole", "kserve-proxy-role") == role  # not even touched
        created = get(spoke, "namespace", GUARD_NS)["metadata"]["annotations"]
        assert created["modelserving.opendatahub.io/created-by-agent"] == "true"
        spoke.kubectl("create", "configmap", "users-config", "-n", GUARD_NS)

        spoke.apply_objects([platform(NAME, {**SPEC, "managementState": "Removed"})])
        status = wait_phase(spoke, NAME, "Removed", timeout=180)
        assert {x["reason"] for x in status["conditions"]} == {"RemovedWithLeftovers"}, status
        assert f"Namespace {GUARD_NS} (holds ConfigMap {GUARD_NS}/users-config)" in (
            status["message"]), status
        eventually(lambda: leftovers(spoke) == [f"Namespace /{GUARD_NS}"], timeout=120)
        assert get(spoke, "configmap", "-n", GUARD_NS, "users-config") is not None
        assert get(spoke, "crd", "inferenceservices.serving.kserve.io") is None
        assert get(spoke, "crd", theirs) is not None
        assert get(spoke, "clusterrole", "kserve-proxy-role") == role
    finally:
        spoke.kubectl("delete", "servingplatform", NAME, "--timeout=60s", check=False)
        spoke.kubectl("delete", "crd", theirs, "--timeout=60s", check=False)
        spoke.kubectl("delete", "clusterrole", "kserve-proxy-role", check=False)
        spoke.kubectl("delete", "namespace", GUARD_NS, "--timeout=60s", check=False)


ODH_NS = "odh-applications"
ODH = {"app.kubernetes.io/managed-by": "opendatahub-operator"}
ISVC_CRD = "inferenceservices.serving.kserve.io"
IMAGE = f"quay.io/opendatahub/kserve-controller:{KSERVE.version}"


def _operators_kserve() -> list[dict[str, Any]]:
    """KServe as another operator runs it: its controller and configuration in the operator's
    namespace, every object carrying the operator's managed-by label (the CRD too, below)."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ODH_NS}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": CONTROLLER, "namespace": ODH_NS, "labels": ODH},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"control-plane": CONTROLLER}},
                  "template": {"metadata": {"labels": {"control-plane": CONTROLLER}},
                               "spec": {"containers": [{"name": "manager", "image": IMAGE}]}}}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "inferenceservice-config", "namespace": ODH_NS, "labels": ODH},
         "data": {"deploy": json.dumps({"defaultDeploymentMode": "Serverless"})}},
    ]


def test_another_operators_kserve_is_refused_when_managed_and_served_with_when_unmanaged(
    spoke: Any, agent: AgentProcess,
) -> None:
    """A KServe that Open Data Hub's operator installed (its managed-by label on the CRD, the
    controller in its own namespace and the configuration): Managed is refused naming the
    operator, and nothing of it (nor anything else) is changed; Unmanaged serves with it:
    Available at the version its controller runs, serving namespaces enabled, still nothing of
    the operator's changed."""
    spoke.apply_files([p for p in upstream.kserve_crds() if "inferenceservices" in p.name])
    spoke.wait_crds_established()
    spoke.kubectl("label", "crd", ISVC_CRD, *(f"{k}={v}" for k, v in ODH.items()))
    spoke.apply_objects(_operators_kserve())
    eventually(lambda: (get(spoke, "deployment", "-n", ODH_NS, CONTROLLER).get("status") or {})
               .get("availableReplicas") == 1, timeout=60)

    def versions() -> dict[str, str]:
        return {what: get(spoke, *what.split())["metadata"]["resourceVersion"]
                for what in (f"crd {ISVC_CRD}", f"configmap -n {ODH_NS} inferenceservice-config")}

    before = versions()
    serving = "odh-models"
    try:
        spoke.apply_objects([platform(NAME, {"platform": "KServe",
                                             "servingNamespaces": [serving]})])
        status = wait_phase(spoke, NAME, "Degraded", timeout=120)
        assert {x["reason"] for x in status["conditions"]} == {"OwnedByAnotherOperator"}, status
        assert status["message"].startswith(
            "KServe on this cluster is managed by opendatahub-operator"), status
        assert "spec.managementState: Unmanaged" in status["message"]
        assert versions() == before
        assert get(spoke, "namespace", "kserve") is None  # nothing of the bundle applied
        assert get(spoke, "namespace", serving) is None

        spoke.apply_objects([platform(NAME, {"platform": "KServe",
                                             "managementState": "Unmanaged",
                                             "servingNamespaces": [serving]})])
        status = wait_phase(spoke, NAME, "Available", timeout=120)
        assert {x["reason"] for x in status["conditions"]} == {"UsingExistingStack"}, status
        assert status["stackVersion"] == KSERVE.version
        assert (status["readyComponents"], status["totalComponents"]) == (1, 1)
        assert f"installed by opendatahub-operator (Deployment {ODH_NS}/{CONTROLLER})" in (
            status["message"])
        assert get(spoke, "namespace", serving) is not None  # still the agent's to enable
        assert versions() == before
        assert get(spoke, "namespace", "kserve") is None
        controller = get(spoke, "deployment", "-n", ODH_NS, CONTROLLER)
        assert controller["metadata"]["labels"] == ODH and controller["metadata"]["generation"] == 1
    finally:
        spoke.kubectl("delete", "servingplatform", NAME, "--timeout=60s", check=False)
        spoke.kubectl("delete", "namespace", ODH_NS, serving, "--timeout=60s", check=False)
        spoke.kubectl("delete", "crd", ISVC_CRD, "--timeout=60s", check=False)


def _pvc(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}}


def test_a_dropped_namespace_kept_for_its_data_is_shown_on_the_hub_until_it_is_deleted(
    testbed: Testbed, spoke: Any, agent: AgentProcess, hub_namespace: str, tmp_path: Path,
) -> None:
    """Issue 29, item 9, through the manager, OCM's work agent and this agent: a serving
    namespace the agent created is dropped from the ModelServing's servingNamespaces while it
    holds a tenant's PVCs. The agent keeps it (marked kept), its ServingPlatform names it, and
    the hub's entry for the cluster shows it (still ready); a restarted agent still reports it
    (from the mark), with what it holds now; once the namespace is deleted the entry clears."""
    hub, ns, label = testbed.hub, hub_namespace, f"k-{uuid.uuid4().hex[:6]}"
    hub.apply_files(HUB_CRDS)
    hub.wait_crds_established()
    hub.kubectl("label", "managedcluster", spoke.name, f"{label}=yes")
    mgr = Manager(manager_identity(testbed), tmp_path / "manager.log",
                  "--no-addon-enablement").start()

    def entry() -> dict[str, Any]:
        status = get_json(hub, "modelserving", "kserve", "-n", ns).get("status") or {}
        return next((e for e in status.get("clusters") or [] if e["cluster"] == spoke.name), {})

    def ready_entry() -> dict[str, Any]:
        found = entry()
        assert found.get("ready") is True and found.get("phase") == "Available", found
        return found

    try:
        # the ModelServing's hub namespace may serve into the spoke namespace of its name
        hub.apply_objects([hub_placement("p", ns, {label: "yes"}),
                           model_serving("kserve", ns, "p", servingNamespaces=[ns])])
        eventually(ready_entry, timeout=240)
        assert get(spoke, "namespace", ns)["metadata"]["annotations"][
            "modelserving.opendatahub.io/created-by-agent"] == "true"
        spoke.apply_objects([_pvc("data", ns), _pvc("scratch", ns)])
        hub.kubectl("patch", "msv", "kserve", "-n", ns, "--type=merge",
                    "-p", json.dumps({"spec": {"servingNamespaces": []}}))

        def kept(line: str) -> dict[str, Any]:
            found = ready_entry()
            assert found.get("leftovers", "") == line, found
            return found

        eventually(lambda: kept(
            f"namespace {ns} kept: holds PersistentVolumeClaim {ns}/data (1 more)"), timeout=120)
        status = get(spoke, "servingplatform", "model-serving")["status"]
        assert status["keptNamespaces"] == [
            {"name": ns, "objects": 2, "holds": [f"PersistentVolumeClaim {ns}/data",
                                                 f"PersistentVolumeClaim {ns}/scratch"]}]
        assert status["phase"] == "Available"
        labels = get(spoke, "namespace", ns)["metadata"].get("labels") or {}
        assert labels.get("modelserving.opendatahub.io/kept-namespace") == "true", labels
        assert "modelserving.opendatahub.io/serving-namespace" not in labels, labels

        # what is kept is known from the namespace alone: a restarted agent reports it too
        agent.restart()
        spoke.kubectl("delete", "pvc", "data", "-n", ns)
        eventually(lambda: kept(f"namespace {ns} kept: holds PersistentVolumeClaim {ns}/scratch"),
                   timeout=120)

        spoke.kubectl("delete", "namespace", ns, "--wait=false")
        eventually(lambda: kept(""), timeout=120)
        assert get(spoke, "servingplatform", "model-serving")["status"]["keptNamespaces"] == []
    finally:
        hub.kubectl("delete", "msv", "kserve", "-n", ns, "--wait=false", check=False)
        eventually(lambda: get(spoke, "servingplatform", "model-serving") is None, timeout=180)
        eventually(lambda: get_json(hub, "modelserving", "-n", ns)["items"] == [], timeout=60)
        mgr.stop()
        mgr.print_tail()  # shown when the test failed
        hub.kubectl("label", "managedcluster", spoke.name, f"{label}-", check=False)
        spoke.kubectl("delete", "namespace", ns, "--wait=false", check=False)
