"""The OLM bundle made from rendered chart objects (testbed/olm.py), on small hand-made renders.

The real chart's bundle, checked by operator-framework's validators, is in
tests/integration/test_olm_bundle.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from testbed import olm

NS = "ops"
CHART = olm.Chart(version="1.2.3", image="example.test/op:1.2.3",
                  description="An operator. It does things.", keywords=("a", "b"),
                  min_kube_version="1.30.0")
MANAGED_BY = {"app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": "op-1.2.3",
              "app.kubernetes.io/instance": "rel", "app.kubernetes.io/name": "op"}


def obj(kind: str, name: str, namespace: str | None = None, **rest: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(MANAGED_BY)}
    if namespace:
        meta["namespace"] = namespace
    api = {"Deployment": "apps/v1", "ClusterRole": "rbac.authorization.k8s.io/v1",
           "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
           "Role": "rbac.authorization.k8s.io/v1",
           "RoleBinding": "rbac.authorization.k8s.io/v1"}.get(kind, "v1")
    return {"apiVersion": api, "kind": kind, "metadata": meta, **rest}


def binding(kind: str, name: str, role_kind: str, role: str, namespace: str | None = None,
            account: str = "op") -> dict[str, Any]:
    return obj(kind, name, namespace,
               roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
               subjects=[{"kind": "ServiceAccount", "name": account, "namespace": NS}])


RULE_CLUSTER = {"apiGroups": ["x.test"], "resources": ["things"], "verbs": ["get", "list"]}
RULE_NS = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}
RULE_SECRETS = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgetsets.x.test"},
    "spec": {"group": "x.test", "names": {"kind": "WidgetSet", "plural": "widgetsets"},
             "scope": "Namespaced",
             "versions": [{"name": "v1alpha1", "served": True, "storage": False},
                          {"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {
                               "type": "object",
                               "description": "A set of widgets.\nMore prose."}}}]},
}


def rendered() -> list[dict[str, Any]]:
    """An operator's render: its Deployment, ServiceAccount, rights, a CRD, and the rest."""
    return [
        obj("ServiceAccount", "op", NS),
        obj("Deployment", "op", NS, spec={
            "replicas": 1, "selector": {"matchLabels": {"app": "op"}},
            "template": {"metadata": {"labels": {"app": "op"}},
                         "spec": {"serviceAccountName": "op",
                                  "containers": [{"name": "op", "image": CHART.image,
                                                  "args": ["manager", "--x=1"]}]}}}),
        obj("ClusterRole", "op", rules=[RULE_CLUSTER]),
        binding("ClusterRoleBinding", "op", "ClusterRole", "op"),
        obj("Role", "op", NS, rules=[RULE_NS]),
        binding("RoleBinding", "op", "Role", "op", NS),
        obj("ClusterRole", "op-secrets", rules=[RULE_SECRETS]),
        binding("RoleBinding", "op-secrets", "ClusterRole", "op-secrets", "team-a"),
        obj("ClusterRole", "op-tenant", rules=[RULE_CLUSTER]),
        obj("ConfigMap", "op-config", NS, data={"a": "b"}),
        obj("ConfigMap", "op-dashboard", "monitoring", data={"a": "b"}),
        obj("Service", "op-metrics", NS, spec={"ports": [{"port": 8080}]}),
        {"apiVersion": "addon.open-cluster-management.io/v1alpha1",
         "kind": "ClusterManagementAddOn", "metadata": {"name": "op"}, "spec": {}},
        CRD,
    ]


def bundle_of(objs: list[dict[str, Any]] | None = None) -> olm.Bundle:
    return olm.make_bundle(rendered() if objs is None else objs, CHART, namespace=NS,
                           examples=[{"apiVersion": "x.test/v1", "kind": "WidgetSet",
                                      "metadata": {"name": "example"}}])


def names(objs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in objs}


def test_the_deployment_and_its_rights_become_the_csv_install_strategy() -> None:
    strategy = bundle_of().csv["spec"]["install"]
    assert strategy["strategy"] == "deployment"
    [deployment] = strategy["spec"]["deployments"]
    assert deployment["name"] == "op"
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "op"
    # No Helm release labels; the chart's version stays.
    assert deployment["label"] == {"app.kubernetes.io/name": "op", "helm.sh/chart": "op-1.2.3"}
    assert strategy["spec"]["clusterPermissions"] == [
        {"serviceAccountName": "op", "rules": [RULE_CLUSTER]}]
    assert strategy["spec"]["permissions"] == [{"serviceAccountName": "op", "rules": [RULE_NS]}]


def test_olm_makes_the_service_account_and_bindings_so_the_bundle_carries_none() -> None:
    carried = names(bundle_of().manifests)
    for gone in [("ServiceAccount", "op"), ("ClusterRole", "op"), ("ClusterRoleBinding", "op"),
                 ("Role", "op"), ("RoleBinding", "op"), ("Deployment", "op")]:
        assert gone not in carried, gone


def test_other_objects_of_bundle_kinds_are_manifests_without_a_namespace() -> None:
    manifests = {(o["kind"], o["metadata"]["name"]): o for o in bundle_of().manifests}
    assert set(manifests) == {("CustomResourceDefinition", "widgetsets.x.test"),
                              ("ClusterRole", "op-secrets"), ("ClusterRole", "op-tenant"),
                              ("ConfigMap", "op-config"), ("Service", "op-metrics")}
    assert "namespace" not in manifests[("ConfigMap", "op-config")]["metadata"]
    assert manifests[("ConfigMap", "op-config")]["metadata"]["labels"] == {
        "app.kubernetes.io/name": "op", "helm.sh/chart": "op-1.2.3"}


def test_what_olm_cannot_install_is_returned_with_the_reason() -> None:
    left = {(x.obj["kind"], x.obj["metadata"]["name"]): x.reason for x in bundle_of().hub_objects}
    assert set(left) == {("ClusterManagementAddOn", "op"), ("ConfigMap", "op-dashboard"),
                         ("RoleBinding", "op-secrets")}
    assert "not a kind OLM installs" in left[("ClusterManagementAddOn", "op")]
    assert "namespace monitoring" in left[("ConfigMap", "op-dashboard")]
    assert "namespace team-a" in left[("RoleBinding", "op-secrets")]
    text = olm.hub_objects_text(bundle_of().hub_objects)
    assert [o["kind"] for o in yaml.safe_load_all(text) if o] == [
        "RoleBinding", "ConfigMap", "ClusterManagementAddOn"]
    assert "# ClusterManagementAddOn is not a kind OLM installs" in text


def test_every_rendered_object_is_accounted_for() -> None:
    bundle = bundle_of()
    strategy = bundle.csv["spec"]["install"]["spec"]
    in_csv = {("Deployment", d["name"]) for d in strategy["deployments"]}
    absorbed = {("ServiceAccount", "op"), ("ClusterRole", "op"), ("ClusterRoleBinding", "op"),
                ("Role", "op"), ("RoleBinding", "op")}
    out = names(bundle.manifests) | names([x.obj for x in bundle.hub_objects]) | in_csv | absorbed
    assert names(rendered()) == out


def test_a_role_also_bound_elsewhere_stays_a_manifest() -> None:
    objs = [*rendered(), binding("ClusterRoleBinding", "someone-else", "ClusterRole", "op",
                                 account="other")]
    bundle = bundle_of(objs)
    assert ("ClusterRole", "op") in names(bundle.manifests)
    assert ("ClusterRoleBinding", "someone-else") in names(bundle.manifests)
    assert bundle.csv["spec"]["install"]["spec"]["clusterPermissions"][0]["rules"] == [
        RULE_CLUSTER]


def test_owned_crds_name_their_storage_version_and_schema_description() -> None:
    bundle = bundle_of()
    assert bundle.csv["spec"]["customresourcedefinitions"]["owned"] == [{
        "name": "widgetsets.x.test", "version": "v1", "kind": "WidgetSet",
        "displayName": "Widget Set", "description": "A set of widgets."}]
    assert "required" not in bundle.csv["spec"]["customresourcedefinitions"]


def test_csv_metadata() -> None:
    csv = bundle_of().csv
    assert csv["metadata"]["name"] == f"{olm.PACKAGE}.v1.2.3"
    notes = csv["metadata"]["annotations"]
    assert notes["containerImage"] == CHART.image
    assert notes["operatorframework.io/suggested-namespace"] == NS
    assert notes["description"] == "An operator"
    assert [e["kind"] for e in yaml.safe_load(notes["alm-examples"])] == ["WidgetSet"]
    spec = csv["spec"]
    assert spec["description"].startswith("An operator.\n\nFrom this bundle OLM installs")
    assert "hub-objects.yaml" in spec["description"]
    assert spec["version"] == "1.2.3"
    assert spec["minKubeVersion"] == "1.30.0"
    assert spec["keywords"] == ["a", "b"]
    # OwnNamespace only: AllNamespaces would turn the namespaced rules into cluster-wide ones.
    assert [m["type"] for m in spec["installModes"] if m["supported"]] == ["OwnNamespace"]


def test_a_helm_hook_is_refused_by_name() -> None:
    hook = obj("Job", "guard", NS)
    hook["metadata"]["annotations"] = {"helm.sh/hook": "pre-delete"}
    with pytest.raises(ValueError, match="Job guard in ops"):
        bundle_of([*rendered(), hook])


def test_helm_test_objects_are_not_part_of_the_install() -> None:
    check = obj("Pod", "check", NS)
    check["metadata"]["annotations"] = {"helm.sh/hook": "test"}
    assert names(bundle_of([*rendered(), check]).manifests) == names(bundle_of().manifests)
    assert ("Pod", "check") not in names([x.obj for x in bundle_of().hub_objects])


def test_a_binding_of_the_operator_and_someone_else_is_refused() -> None:
    mixed = binding("ClusterRoleBinding", "mixed", "ClusterRole", "op-tenant")
    mixed["subjects"].append({"kind": "User", "name": "alice"})
    with pytest.raises(ValueError, match="ClusterRoleBinding mixed binds"):
        bundle_of([*rendered(), mixed])


def test_a_binding_to_a_role_the_render_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="Role missing, which the chart does not render"):
        bundle_of([*rendered(), binding("RoleBinding", "x", "Role", "missing", NS)])


def test_bundle_files_and_metadata() -> None:
    files = bundle_of().files()
    assert set(files) == {
        f"manifests/{olm.PACKAGE}.clusterserviceversion.yaml",
        "manifests/widgetsets.x.test.yaml", "manifests/op-secrets_clusterrole.yaml",
        "manifests/op-tenant_clusterrole.yaml", "manifests/op-config_configmap.yaml",
        "manifests/op-metrics_service.yaml", "metadata/annotations.yaml", "bundle.Dockerfile"}
    annotations = yaml.safe_load(files["metadata/annotations.yaml"])["annotations"]
    assert annotations["operators.operatorframework.io.bundle.mediatype.v1"] == "registry+v1"
    assert annotations["operators.operatorframework.io.bundle.package.v1"] == olm.PACKAGE
    assert annotations["operators.operatorframework.io.bundle.channel.default.v1"] == olm.CHANNEL
    dockerfile = files["bundle.Dockerfile"]
    label = "LABEL operators.operatorframework.io.bundle.package.v1=model-serving-addon"
    assert label in dockerfile
    assert dockerfile.rstrip().endswith("COPY metadata /metadata/")


def test_write_replaces_the_bundle_and_writes_the_hub_objects(tmp_path: Any) -> None:
    stale = tmp_path / "bundle" / "manifests" / "old_configmap.yaml"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    written = olm.write(bundle_of(), tmp_path)
    assert not stale.exists()
    assert tmp_path / "hub-objects.yaml" in written
    assert (tmp_path / "bundle" / "metadata" / "annotations.yaml").exists()


def test_findings_read_operator_verify_log_levels() -> None:
    log = (
        'time="2026-12-07T01:00:00Z" level=warning msg="Warning: Value : (op.v1) csv.Spec.Icon '
        'not specified"\n'
        'time="2026-12-07T01:00:00Z" level=error msg="Error: Value op: \\"quoted\\" bad"\n'
        'time="2026-12-07T01:00:00Z" level=info msg=loaded\n'
        "time=x level=warn msg=short\n"
    )
    assert olm.findings(log) == {
        "error": ['Error: Value op: "quoted" bad'],
        "warning": ["Warning: Value : (op.v1) csv.Spec.Icon not specified", "short"],
    }


def test_the_manager_registers_the_addon_from_a_configmap_of_the_bundle() -> None:
    template = {"apiVersion": "addon.open-cluster-management.io/v1alpha1",
                "kind": "AddOnTemplate", "metadata": {"name": "op-1.2.3"},
                "spec": {"addonName": "op"}}
    plain = bundle_of([*rendered(), template])
    bundle = olm.registered_by_manager(plain)
    [configmap] = [o for o in bundle.manifests
                   if o["metadata"]["name"] == olm.REGISTRATION_CONFIGMAP]
    moved = list(yaml.safe_load_all(configmap["data"][olm.REGISTRATION_KEY]))
    assert [o["kind"] for o in moved if o] == ["ClusterManagementAddOn", "AddOnTemplate"]
    assert {x.obj["kind"] for x in bundle.hub_objects} == {"ConfigMap", "RoleBinding"}
    strategy = bundle.csv["spec"]["install"]["spec"]
    args = strategy["deployments"][0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["manager", "--x=1", f"--registration-source={olm.REGISTRATION_CONFIGMAP}"]
    cluster_rules = strategy["clusterPermissions"][0]["rules"]
    assert cluster_rules[0] == RULE_CLUSTER
    assert {"apiGroups": [olm.ADDON_GROUP], "resources": ["addontemplates"],
            "resourceNames": ["op-1.2.3"], "verbs": ["get", "update"]} in cluster_rules
    assert {"apiGroups": [olm.ADDON_GROUP], "resources": ["clustermanagementaddons"],
            "resourceNames": ["op"], "verbs": ["get", "update"]} in cluster_rules
    assert strategy["permissions"][0]["rules"] == [RULE_NS, {
        "apiGroups": [""], "resources": ["configmaps"],
        "resourceNames": [olm.REGISTRATION_CONFIGMAP], "verbs": ["get"]}]
    # The bundle it came from is left as it was.
    assert plain.csv["spec"]["install"]["spec"]["permissions"][0]["rules"] == [RULE_NS]


def test_registering_needs_a_cluster_management_addon() -> None:
    objs = [o for o in rendered() if o["kind"] != "ClusterManagementAddOn"]
    with pytest.raises(ValueError, match="no ClusterManagementAddOn"):
        olm.registered_by_manager(bundle_of(objs))


def test_what_olm_creates_for_an_own_namespace_install() -> None:
    created = olm.olm_objects(bundle_of(), "elsewhere")
    by = {(o["kind"], o["metadata"]["name"]): o for o in created}
    account = by[("ServiceAccount", "op")]
    assert account["metadata"]["namespace"] == "elsewhere"
    generated = f"{olm.PACKAGE}.v1.2.3-op"
    role = by[("Role", generated)]
    assert (role["metadata"]["namespace"], role["rules"]) == ("elsewhere", [RULE_NS])
    assert by[("ClusterRole", generated)]["rules"] == [RULE_CLUSTER]
    binding = by[("ClusterRoleBinding", generated)]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "op",
                                    "namespace": "elsewhere"}]
    assert by[("ConfigMap", "op-config")]["metadata"]["namespace"] == "elsewhere"
    assert "namespace" not in by[("ClusterRole", "op-tenant")]["metadata"]
    assert by[("Deployment", "op")]["metadata"]["namespace"] == "elsewhere"
