"""The Helm chart, rendered by the real helm binary (no cluster needed)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from addon_api import constants as c
from addon_api import sealing
from testbed.chart import CHART, KUBE_VERSION, agent_config_spec, helm, readme, render

pytestmark = pytest.mark.usefixtures("built_binaries")  # helm renders the chart


def _kinds(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(o["kind"] for o in objs)


def _agent_manifests(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    template = next(o for o in objs if o["kind"] == "AddOnTemplate")
    manifests: list[dict[str, Any]] = template["spec"]["agentSpec"]["workload"]["manifests"]
    return manifests


def test_lint_passes() -> None:
    out = helm("lint", str(CHART), "--strict")
    assert "0 chart(s) failed" in out.stdout


def test_the_chart_readme_is_generated_from_the_values() -> None:
    """charts/model-serving-addon/README.md is what helm-docs makes of values.yaml's comments
    now (``make chart-docs`` rewrites it), and every value has a description there."""
    generated = readme()
    assert generated == (CHART / "README.md").read_text(), "stale: run `make chart-docs`"
    rows = [line.split(" | ") for line in generated.splitlines()
            if line.startswith("| ") and not line.startswith(("| Key", "|---"))]
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def leaves(node: dict[str, Any], prefix: str = "") -> set[str]:
        """Every value's key; a container's resources are one value, as helm-docs shows them."""
        out: set[str] = set()
        for key, value in node.items():
            if isinstance(value, dict) and value and key != "resources":
                out |= leaves(value, f"{prefix}{key}.")
            else:
                out.add(f"{prefix}{key}")
        return out

    assert {row[0].lstrip("| ") for row in rows} == leaves(values)
    undocumented = [row[0].lstrip("| ") for row in rows if not row[-1].strip(" |")]
    assert not undocumented, f"values.yaml: no `# --` comment above {undocumented}"


def test_the_chart_refuses_a_kubernetes_older_than_its_admission_policy_needs() -> None:
    """The ValidatingAdmissionPolicy it ships is admissionregistration.k8s.io/v1 (1.30)."""
    old = helm("template", "x", str(CHART), "--kube-version", "1.29.9", check=False)
    assert old.returncode != 0 and ">=1.30.0-0" in old.stderr, old.stderr
    for version in ("1.30.0", "1.31.2-eks-7f9249a", "1.34.12"):
        helm("template", "x", str(CHART), "--kube-version", version)


def test_default_render() -> None:
    objs = render()
    kinds = _kinds(objs)
    assert kinds.count("CustomResourceDefinition") == 4  # the hub intents only
    for kind in ("Deployment", "ClusterRole", "ClusterRoleBinding", "ServiceAccount",
                 "ClusterManagementAddOn", "AddOnTemplate"):
        assert kind in kinds
    # The manager owns the add-on's AddOnDeploymentConfig (it adds its verify key): the chart
    # ships the rest of its spec in a ConfigMap, and no object of that kind.
    assert "AddOnDeploymentConfig" not in kinds
    assert agent_config_spec(objs)["agentInstallNamespace"] == c.AGENT_NAMESPACE
    assert "ServiceMonitor" not in kinds and "PrometheusRule" not in kinds
    cma = next(o for o in objs if o["kind"] == "ClusterManagementAddOn")
    assert cma["metadata"]["name"] == c.ADDON_NAME
    assert cma["spec"]["installStrategy"] == {"type": "Manual"}
    agent_kinds = _kinds(_agent_manifests(objs))
    assert agent_kinds == ["ClusterRole", "ClusterRole", "ClusterRoleBinding",
                           "ClusterRoleBinding", "CustomResourceDefinition",
                           "CustomResourceDefinition", "Deployment", "Job", "Namespace",
                           "ServiceAccount"]
    manager = next(o for o in objs if o["kind"] == "Deployment")
    pod = manager["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    args = pod["containers"][0]["args"]
    assert args[0] == "manager"
    # Replicas elect one leader through a Lease the manager may touch in its namespace only.
    assert "--leader-elect" in args and "--lease-duration=15" in args
    # A partitioned cluster's works are kept a day (docs/reliability.md).
    assert "--unavailable-grace=86400" in args
    # A cluster whose work agent does not pick up a new spec within a minute shows Stale.
    assert "--stale-after=60" in args
    assert not [a for a in args if a.startswith("--prometheus")]  # no metric gate endpoint
    assert "--gate-refresh=15" in args  # a metric gate's answer is used 15 s
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in pod["containers"][0]["env"]}
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    role = next(o for o in objs if o["kind"] == "Role")
    assert role["metadata"]["namespace"] == manager["metadata"]["namespace"]
    assert role["rules"] == [
        # the leader's Lease; sharded replicas' shard and member Leases (one list a round)
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "verbs": ["get", "list", "create", "update", "patch", "delete"]},
        # sealing: its keys Secret (created once, then only read), its ConfigMap; the
        # AddOnDeploymentConfig it owns, from the chart's ConfigMap and its verify key
        {"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["secrets"],
         "resourceNames": ["model-serving-sealing-keys"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["configmaps"],
         "resourceNames": ["model-serving-sealing"], "verbs": ["get", "update"]},
        {"apiGroups": [""], "resources": ["configmaps"],
         "resourceNames": ["model-serving-agent-config"], "verbs": ["get"]},
        {"apiGroups": ["addon.open-cluster-management.io"],
         "resources": ["addondeploymentconfigs"], "verbs": ["create"]},
        {"apiGroups": ["addon.open-cluster-management.io"],
         "resources": ["addondeploymentconfigs"], "resourceNames": ["model-serving-defaults"],
         "verbs": ["get", "update"]},
    ]
    assert "--addon-config=model-serving-defaults" in args
    assert "--addon-config-source=model-serving-agent-config" in args


def test_agent_deployment_uses_template_variables() -> None:
    dep = next(m for m in _agent_manifests(render()) if m["kind"] == "Deployment")
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "{{IMAGE}}"
    assert "--cluster-name={{CLUSTER_NAME}}" in container["args"]
    assert "--log-level={{LOG_LEVEL}}" in container["args"]
    assert dep["metadata"]["namespace"] == c.AGENT_NAMESPACE
    assert "--namespace={{INSTALL_NAMESPACE}}" in container["args"]
    assert "--seal-verify-key={{SEAL_VERIFY_KEY}}" in container["args"]  # set by the manager
    # The private key and seal ledger in a namespace of the agent's own (issue 29, item 12),
    # which the agent creates: OCM's template add-on renames every Namespace of the template
    # to the install namespace, so the template carries only that one.
    assert f"--state-namespace={c.AGENT_STATE_NAMESPACE}" in container["args"]
    namespaces = [m for m in _agent_manifests(render()) if m["kind"] == "Namespace"]
    assert [m["metadata"]["name"] for m in namespaces] == [c.AGENT_NAMESPACE]


def test_disabling_the_addon_first_runs_the_release_hook_with_the_agents_identity() -> None:
    """Issue 29, item 11: OCM's pre-delete hook, a Job of the agent's ServiceAccount running
    agent-release, so entries and finalizers go while the agent still has its rights."""
    from testbed.chart import PRE_DELETE_HOOK, agent_manifests

    manifests = _agent_manifests(render())
    job = next(m for m in manifests if m["kind"] == "Job")
    assert PRE_DELETE_HOOK in job["metadata"]["annotations"]
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "model-serving-agent"
    assert pod["containers"][0]["args"] == ["agent-release"]
    assert pod["containers"][0]["image"] == "{{IMAGE}}"
    assert pod["securityContext"]["runAsNonRoot"] is True
    # Not part of what is deployed with the agent (OCM applies hooks only on disable).
    assert "Job" not in {m["kind"] for m in agent_manifests(c.AGENT_NAMESPACE)}


def test_the_agent_reads_what_a_namespace_holds_before_deleting_it() -> None:
    """Issue 29, item 9: bound to Kubernetes' view role, plus the kinds view leaves out."""
    manifests = _agent_manifests(render())
    views = [m for m in manifests if m["kind"] == "ClusterRoleBinding"
             and m["roleRef"]["name"] == "view"]
    assert [v["subjects"][0]["name"] for v in views] == ["model-serving-agent"]
    role = next(m for m in manifests if m["kind"] == "ClusterRole"
                and m["metadata"]["name"] == "model-serving-agent")
    listable = {r for rule in role["rules"] if "list" in rule["verbs"] for r in rule["resources"]}
    assert {"podtemplates", "csistoragecapacities", "resourceclaims"} <= listable


def test_sharded_replicas_all_act_instead_of_electing_a_leader() -> None:
    manager = next(o for o in render("manager.replicas=3", "manager.shards=12")
                   if o["kind"] == "Deployment")
    args = manager["spec"]["template"]["spec"]["containers"][0]["args"]
    assert manager["spec"]["replicas"] == 3
    assert "--shards=12" in args and "--leader-elect" not in args


@pytest.mark.parametrize(
    ("sets", "expect"),
    [
        (("serviceMonitor.enabled=true",), "ServiceMonitor"),
        (("addon.installStrategy=Placements", "addon.placements[0].name=all",
          "addon.placements[0].namespace=fleet"), "Placements"),
        (("manager.addonEnablement=false",), "--no-addon-enablement"),
        (("manager.policy.allowDevFlags=true",), "--allow-dev-flags"),
        (("manager.policy.stackOwnerNamespaces={platform,ml}",),
         "--stack-owner-namespaces=platform,ml"),
        (("manager.policy.deniedNamespaces={legacy,payments}",),
         "--denied-namespaces=legacy,payments"),
        (("manager.policy.podServiceAccounts={model-runner}",),
         "--pod-service-accounts=model-runner"),
        (("manager.policy.priorityClasses={batch-low}",), "--priority-classes=batch-low"),
        (("manager.policy.sharedCredentialNamespaces={shared-models}",),
         "--shared-credential-namespaces=shared-models"),
        (("image.tag=v9.9.9",), "quay.io/opendatahub/model-serving-addon:v9.9.9"),
        (("image.tag=v9.9.9", f"image.digest=sha256:{'ab' * 32}"),
         f"quay.io/opendatahub/model-serving-addon@sha256:{'ab' * 32}"),
        (("manager.prometheus.refreshSeconds=3",), "--gate-refresh=3"),
    ],
)
def test_feature_flags(sets: tuple[str, ...], expect: str) -> None:
    objs = render(*sets)
    text = repr(objs)
    assert expect in text


@pytest.mark.parametrize(
    ("sets", "field"),
    [
        (("manager.logLevel=loud",), "logLevel"),
        (("image.digest=latest",), "digest"),
        (("manager.replicas=6",), "replicas"),
        (("manager.leaseDurationSeconds=1",), "leaseDurationSeconds"),
        (("manager.shards=-1",), "shards"),
        (("manager.unavailableGraceSeconds=-1",), "unavailableGraceSeconds"),
        (("manager.staleAfterSeconds=soon",), "staleAfterSeconds"),
        (("manager.prometheus.url=thanos:9090",), "url"),
        (("manager.prometheus.refreshSeconds=0",), "refreshSeconds"),
        (("addon.installStrategy=Sometimes",), "installStrategy"),
        (("agent.installNamespace=Not_A_Label",), "installNamespace"),
        (("unknownKey=1",), "unknownKey"),
        (("serviceMonitor.interval=soon",), "interval"),
        (("manager.policy.allowDevFlags=yes",), "allowDevFlags"),
        (("manager.policy.stackOwnerNamespaces={Not_A_Label}",), "stackOwnerNamespaces"),
    ],
)
def test_schema_rejects_bad_values(sets: tuple[str, ...], field: str) -> None:
    args = ["template", "msa", str(CHART), *KUBE_VERSION]
    for s in sets:
        args += ["--set", s]
    proc = helm(*args, check=False)
    assert proc.returncode != 0
    assert "values don't meet the specifications of the schema" in proc.stderr
    assert field in proc.stderr


def _rules(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    roles = [o for o in objs if o["kind"] in ("ClusterRole", "Role")]
    roles += [m for m in _agent_manifests(objs) if m["kind"] in ("ClusterRole", "Role")]
    # manager ClusterRole, its Secrets ClusterRole (bound per namespace) and leader-election
    # Role; the tenant ClusterRole (bound per tenant namespace by the hub admin); the stack
    # owners' ClusterRole (bound where stack ownership is allowed); the fleet viewers'
    # read-only ClusterRole and the work readers'; agent ClusterRole, work agent's aggregate
    assert len(roles) == 9
    return [r for role in roles for r in role["rules"]]


def test_the_viewer_role_reads_and_writes_nothing_and_no_secret() -> None:
    viewer = next(o for o in render() if o["kind"] == "ClusterRole"
                  and o["metadata"]["name"] == "model-serving-addon-viewer")
    assert {v for rule in viewer["rules"] for v in rule["verbs"]} == {"get", "list", "watch"}
    assert not any("secrets" in rule["resources"] for rule in viewer["rules"])
    # Nor any ManifestWork (issue 29, item 8): other systems' works may carry Secrets and RBAC
    # cannot select the add-on's; the work-reader role, bound apart, reads them.
    assert not any("manifestworks" in rule["resources"] for rule in viewer["rules"])
    reader = next(o for o in render() if o["kind"] == "ClusterRole"
                  and o["metadata"]["name"] == "model-serving-addon-work-reader")
    assert [r["resources"] for r in reader["rules"]] == [["manifestworks"],
                                                         ["customresourcedefinitions"]]
    assert {v for rule in reader["rules"] for v in rule["verbs"]} == {"get", "list", "watch"}


def test_rbac_has_no_wildcards() -> None:
    for rule in _rules(render("serviceMonitor.enabled=true")):
        for key in ("verbs", "resources", "apiGroups"):
            assert "*" not in rule.get(key, []), rule


def test_namespace_policy_reaches_manager_agent_and_execute_as() -> None:
    """The one value becomes the manager's flag and the manager's execute-as right on exactly
    the tenant executors it names (plus the work agent's own); the agents get it from the
    manager (a ConfigMap in their namespace), not from an AddOnDeploymentConfig variable."""
    objs = render("manager.policy.targetNamespaces.team-a={team-a,models}",
                  "manager.policy.targetNamespaces.open={*}", "manager.secretNamespaces={team-c}")
    policy = "open=*;team-a=team-a,models"
    deploy = next(o for o in objs if o["kind"] == "Deployment")
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--target-namespaces={policy}" in args
    variables = agent_config_spec(objs)["customizedVariables"]
    assert not [v for v in variables if v["name"] == "TARGET_NAMESPACES"], variables
    agent = next(m for m in _agent_manifests(objs) if m["kind"] == "Deployment")
    assert not any(a.startswith("--target-namespaces") for a in
                   agent["spec"]["template"]["spec"]["containers"][0]["args"])
    manager = next(o for o in objs if o["kind"] == "ClusterRole"
                   and o["metadata"]["name"] == "model-serving-addon-manager")
    (rule,) = [r for r in manager["rules"] if "execute-as" in r["verbs"]]
    sa = f"system:serviceaccount:{c.AGENT_NAMESPACE}:model-serving-tenant-"
    assert rule["verbs"] == ["execute-as"] and rule["resourceNames"] == [
        "system:serviceaccount::klusterlet-work-sa", f"{sa}team-a", f"{sa}team-c"]
    default = render()
    deploy = next(o for o in default if o["kind"] == "Deployment")
    assert not any(a.startswith("--target-namespaces") for a in
                   deploy["spec"]["template"]["spec"]["containers"][0]["args"])


def _grants_secrets(role: dict[str, Any]) -> bool:
    """Whether the role reads Secrets beyond named ones (the manager's own sealing keys)."""
    return any("" in r.get("apiGroups", []) and "secrets" in r.get("resources", [])
               and {"get", "list", "watch"} & set(r.get("verbs", []))
               and not r.get("resourceNames")
               for r in role.get("rules") or [])


def test_the_manager_reads_secrets_only_in_the_namespaces_listed() -> None:
    objs = render("manager.secretNamespaces={model-serving-demo,team-a}")
    roles = {(o["kind"], o["metadata"]["name"]): o for o in objs
             if o["kind"] in ("ClusterRole", "Role")}
    # No cluster-wide binding reaches a role that grants Secrets.
    for binding in (o for o in objs if o["kind"] == "ClusterRoleBinding"):
        ref = binding["roleRef"]
        assert not _grants_secrets(roles[(ref["kind"], ref["name"])]), binding
    bindings = [o for o in objs if o["kind"] == "RoleBinding"
                and _grants_secrets(roles[(o["roleRef"]["kind"], o["roleRef"]["name"])])]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["model-serving-demo", "team-a"]
    manager_sa = next(o for o in objs if o["kind"] == "ServiceAccount")["metadata"]
    for b in bindings:
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": manager_sa["name"],
                                  "namespace": manager_sa["namespace"]}]
        role = roles[(b["roleRef"]["kind"], b["roleRef"]["name"])]
        assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"],
                                  "verbs": ["get", "list", "watch"]}]
    # By default, no namespace: the manager reads no Secret at all.
    assert not [o for o in render() if o["kind"] == "RoleBinding"
                and o["roleRef"]["name"].endswith("-secrets")]


def test_secret_namespaces_must_be_namespace_names() -> None:
    proc = helm("template", "msa", str(CHART), *KUBE_VERSION,
                "--set", "manager.secretNamespaces={Team_A}", check=False)
    assert proc.returncode != 0 and "secretNamespaces" in proc.stderr


def test_the_work_agent_gets_exactly_the_kinds_the_manager_renders() -> None:
    role = next(
        m for m in _agent_manifests(render())
        if m["metadata"]["name"] == "open-cluster-management:model-serving:work"
    )
    assert role["metadata"]["labels"] == {"open-cluster-management.io/aggregate-to-work": "true"}
    granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"]
               for r in rule["resources"]}
    assert granted == {
        (c.GROUP, "servingplatforms"), (c.GROUP, "sealedstorageconnections"),
        ("serving.kserve.io", "servingruntimes"), ("serving.kserve.io", "inferenceservices"),
        ("route.openshift.io", "routes"), ("route.openshift.io", "routes/custom-host"),
        ("multicluster.x-k8s.io", "serviceexports"),
    }
    assert {v for rule in role["rules"] for v in rule["verbs"]} == {
        "get", "list", "watch", "create", "patch", "update", "delete"
    }
    # a Route's custom host is only created or updated with the Route
    assert [r["verbs"] for r in role["rules"] if r["resources"] == ["routes/custom-host"]] == [
        ["create", "update"]]


def test_disabling_the_addon_orphans_namespace_and_crds() -> None:
    orphan = "addon.open-cluster-management.io/deletion-orphan"
    for m in _agent_manifests(render()):
        annotated = orphan in m["metadata"].get("annotations", {})
        assert annotated == (m["kind"] in ("Namespace", "CustomResourceDefinition")), m["kind"]


def test_rendered_args_parse_with_the_real_command_lines() -> None:
    from addon_agent.main import parse as parse_agent
    from addon_manager.shell.main import parse_args as parse_manager

    objs = render("manager.logLevel=debug", "manager.addonEnablement=false",
                  "manager.unavailableGraceSeconds=3600", "manager.staleAfterSeconds=300",
                  "manager.prometheus.url=https://thanos.example:8443",
                  "manager.prometheus.tokenFile=/var/run/secrets/kubernetes.io/serviceaccount/token")
    manager = next(o for o in objs if o["kind"] == "Deployment")
    args = manager["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "manager"
    parsed = parse_manager(args[1:])
    assert parsed.log_level == "DEBUG" and parsed.no_addon_enablement
    assert parsed.leader_elect and parsed.lease_duration == 15
    assert parsed.unavailable_grace == 3600 and parsed.stale_after == 300
    assert parsed.prometheus_url == "https://thanos.example:8443"
    assert str(parsed.prometheus_token_file).endswith("serviceaccount/token")
    assert parsed.prometheus_ca_file is None

    variables = {v["name"]: v["value"]
                 for v in agent_config_spec(objs)["customizedVariables"]}
    verify = sealing.verify_key_of(sealing.generate_signing_key())
    variables |= {"CLUSTER_NAME": "cluster1", "INSTALL_NAMESPACE": c.AGENT_NAMESPACE,
                  "SEAL_VERIFY_KEY": verify}  # the manager writes this one into the config
    dep = next(m for m in _agent_manifests(objs) if m["kind"] == "Deployment")
    agent_args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert agent_args[0] == "agent"
    resolved = list(agent_args[1:])
    for name, value in variables.items():
        resolved = [a.replace("{{" + name + "}}", value) for a in resolved]
    assert not any("{{" in a for a in resolved), resolved
    config = parse_agent(resolved)
    assert config.namespace == c.AGENT_NAMESPACE
    assert config.seal_verify_keys == (verify,) and config.cluster_name == "cluster1"


def test_default_policy_refuses_dev_flags_and_keeps_the_platform_the_admins() -> None:
    """By default devFlags are refused, only the release's namespace owns stacks, the tenant
    role cannot write ModelServings and the manager enables the add-on nowhere."""
    from addon_manager.shell import main

    objs = render()
    dep = next(o for o in objs if o["kind"] == "Deployment"
               and o["spec"]["template"]["spec"]["containers"][0]["args"][0] == "manager")
    argv = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--allow-dev-flags" not in argv and "--no-addon-enablement" in argv
    admin = main.policy_from_args(main.parse_args([*argv[1:], "--namespace=release-ns"]))
    assert admin.stack_owner_namespaces == frozenset({"release-ns"})
    assert not admin.allow_dev_flags
    roles = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ClusterRole"}
    tenant = roles["model-serving-addon-tenant"]["rules"]
    writes = {r for rule in tenant for r in rule["resources"]
              if "create" in rule["verbs"] and rule["apiGroups"] == ["modelserving.opendatahub.io"]}
    assert "modelservings" not in writes and "multiclusterinferenceservices" in writes
    owner = roles["model-serving-addon-stack-owner"]["rules"]
    assert any("modelservings" in r["resources"] and "create" in r["verbs"] for r in owner)


def test_modelmesh_is_warned_about_at_admission_with_the_apis_message() -> None:
    from addon_api.platform import MODELMESH_DEPRECATED

    objs = render()
    policy = next(o for o in objs if o["kind"] == "ValidatingAdmissionPolicy")
    binding = next(o for o in objs if o["kind"] == "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"],
                               "validationActions": ["Warn"]}  # warns, refuses nothing
    (rule,) = policy["spec"]["validations"]
    assert rule["message"] == MODELMESH_DEPRECATED
    assert policy["spec"]["failurePolicy"] == "Ignore"


def test_the_manager_and_agent_pods_pass_pod_security_restricted() -> None:
    from addon_agent.pure import pod_security

    objs = render()
    pods = {o["metadata"]["name"]: o["spec"]["template"]["spec"] for o in objs
            if o["kind"] == "Deployment"}
    pods |= {f"agent/{m['metadata']['name']}": m["spec"]["template"]["spec"]
             for m in _agent_manifests(objs) if m["kind"] == "Deployment"}
    assert len(pods) == 2, sorted(pods)
    assert {name: pod_security.violations(pod) for name, pod in pods.items()} == {
        name: [] for name in pods}


def test_the_admins_pod_and_credential_rules_reach_the_managers_policy() -> None:
    """The chart's manager.policy lists become the manager's Policy, parsed by the manager."""
    from addon_manager.shell import main

    objs = render("manager.policy.deniedNamespaces={legacy}",
                  "manager.policy.podServiceAccounts={model-runner}",
                  "manager.policy.priorityClasses={batch-low}",
                  "manager.policy.sharedCredentialNamespaces={shared-models,lab}")
    dep = next(o for o in objs if o["kind"] == "Deployment"
               and o["spec"]["template"]["spec"]["containers"][0]["args"][0] == "manager")
    argv = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    admin = main.policy_from_args(main.parse_args([*argv[1:], "--namespace=release-ns"]))
    assert admin.namespaces.denied == frozenset({"legacy"})
    assert admin.pods.service_accounts == frozenset({"model-runner"})
    assert admin.pods.priority_classes == frozenset({"batch-low"})
    assert admin.shared_credential_namespaces == frozenset({"shared-models", "lab"})
    with pytest.raises(AssertionError):  # not a namespace name: helm's schema check refuses it
        render("manager.policy.sharedCredentialNamespaces={Shared_Models}")


def test_the_manager_may_patch_exactly_the_hub_crds_and_create_none() -> None:
    """It applies its own schema to the hub CRDs as it starts (Helm never upgrades crds/)."""
    from addon_manager.shell import crds

    role = next(o for o in render() if o["kind"] == "ClusterRole"
                and o["metadata"]["name"] == "model-serving-addon-manager")
    on_crds = [r for r in role["rules"] if "customresourcedefinitions" in r["resources"]]
    writes = [r for r in on_crds if set(r["verbs"]) - {"get", "list", "watch"}]
    assert [r["verbs"] for r in writes] == [["patch"]], on_crds
    assert set(writes[0]["resourceNames"]) == {o["metadata"]["name"]
                                               for o in crds.desired("0")}


def test_acm_observability_never_owns_acms_admin_configmaps_unless_told() -> None:
    """ACM reads one admin allowlist and one admin rules ConfigMap: the chart ships its own
    for the admin to merge, owns ACM's only with observability.ownAcmConfigMaps; the
    PrometheusRule is behind its own value; the manager's ServiceMonitor comes with ACM
    observability (the hub's panels and alerts on the manager need it)."""
    admin = {"observability-metrics-custom-allowlist", "thanos-ruler-custom-rules"}

    def names(*sets: str) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for o in render(*sets):
            out.setdefault(o["kind"], set()).add(o["metadata"]["name"])
        return out

    on = names("observability.enabled=true")
    assert not on["ConfigMap"] & admin, on["ConfigMap"]
    assert {"model-serving-metrics-allowlist", "model-serving-alert-rules",
            "model-serving-dashboard"} <= on["ConfigMap"]
    assert "PrometheusRule" not in on and on["ServiceMonitor"] == {"model-serving-addon-manager"}
    owned = names("observability.enabled=true", "observability.ownAcmConfigMaps=true",
                  "observability.prometheusRule=true")
    assert admin <= owned["ConfigMap"] and owned["PrometheusRule"] == {"model-serving"}


def test_helm_test_runs_check_as_a_viewer_in_a_restricted_pod() -> None:
    """`helm test`: a Pod running `model-serving-addon check` with a ServiceAccount bound to
    the read-only viewer role (test hooks only: nothing of it exists until `helm test`)."""
    from addon_agent.pure import pod_security
    from model_serving_addon.cli import full_parser

    hooks = [o for o in render("imagePullSecrets[0].name=pull")
             if (o["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test"]
    by_kind = {o["kind"]: o for o in hooks}
    assert sorted(by_kind) == ["ClusterRoleBinding", "Pod", "ServiceAccount"]
    pod, account = by_kind["Pod"]["spec"], by_kind["ServiceAccount"]
    assert pod_security.violations(pod) == []
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert account["imagePullSecrets"] == [{"name": "pull"}]
    binding = by_kind["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == "model-serving-addon-viewer"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": "model-serving-system"}]
    (container,) = pod["containers"]
    assert container["args"][0] == "check"
    full_parser().parse_args(container["args"])  # the real command line accepts them


def test_uninstall_runs_the_guard_first_as_a_viewer_in_a_restricted_pod() -> None:
    """`helm uninstall`: a pre-delete hook Job runs `model-serving-addon uninstall-guard`
    once (no retry: a refusal fails the uninstall) as a ServiceAccount bound to the read-only
    viewer role, which Helm removes only after its pre-delete hooks; value
    uninstallGuard.enabled=false drops all of it."""
    from addon_agent.pure import pod_security
    from model_serving_addon.cli import full_parser
    from testbed.dataplane import podspec

    hooks = [o for o in render("imagePullSecrets[0].name=pull")
             if (o["metadata"].get("annotations") or {}).get("helm.sh/hook") == "pre-delete"]
    by_kind = {o["kind"]: o for o in hooks}
    assert sorted(by_kind) == ["ClusterRoleBinding", "Job", "ServiceAccount"]
    job, account = by_kind["Job"], by_kind["ServiceAccount"]
    # RBAC first (lower weight); the failed Job stays for its log until the next attempt.
    assert [o["metadata"]["annotations"].get("helm.sh/hook-weight", "0")
            for o in (account, by_kind["ClusterRoleBinding"], job)] == ["-1", "-1", "0"]
    assert job["metadata"]["annotations"]["helm.sh/hook-delete-policy"] == (
        "before-hook-creation,hook-succeeded")
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod_security.violations(pod) == []
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert account["imagePullSecrets"] == [{"name": "pull"}]
    binding = by_kind["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == "model-serving-addon-viewer"
    (container,) = pod["containers"]
    assert container["args"] == ["uninstall-guard"]
    full_parser().parse_args(container["args"])  # the real command line accepts them
    # the testbed runs exactly this pod as a process (its kubelet on the hub)
    assert podspec.runner_for(container["image"], container["args"]) is not None
    assert not [o for o in render("uninstallGuard.enabled=false")
                if "uninstall-guard" in o["metadata"]["name"]]


def test_the_console_is_off_by_default_and_cannot_act_as_itself() -> None:
    """console.enabled: the console behind a proxy (--proxy), its pod without a ServiceAccount
    token and its ServiceAccount bound to nothing, the hub's CA from kube-root-ca.crt."""
    assert not [o for o in render() if o["metadata"]["name"].endswith("-console")]
    objs = render("console.enabled=true")
    sa = next(o for o in objs if o["kind"] == "ServiceAccount"
              and o["metadata"]["name"] == "model-serving-console")
    assert sa["automountServiceAccountToken"] is False
    deploy = next(o for o in objs if o["kind"] == "Deployment"
                  and o["metadata"]["name"] == "model-serving-console")
    pod = deploy["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    assert container["args"] == ["console", "--proxy", "--listen=0.0.0.0:8080",
                                 "--hub-ca=/etc/model-serving-console/hub/ca.crt"]
    assert pod["volumes"] == [{"name": "hub-ca", "configMap": {"name": "kube-root-ca.crt"}}]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    bound = [o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
             and any(s.get("name") == "model-serving-console"
                     for s in o.get("subjects") or [])]
    assert bound == [], "the console's ServiceAccount is bound to no role"
    service = next(o for o in objs if o["kind"] == "Service"
                   and o["metadata"]["name"] == "model-serving-console")
    assert service["spec"]["ports"] == [{"name": "http", "port": 8080, "targetPort": "http"}]
