"""The add-on's OLM bundle, made from the real chart and checked by operator-framework's validators.

``operator-verify`` is github.com/operator-framework/api's command line over its validation
library, the one ``operator-sdk bundle validate`` runs (operator-sdk itself is not served by the
module proxy here); it runs the default bundle validators (CSV, CRDs, bundle) and the optional
OperatorHub and bundle-object ones. What the bundle may carry besides its CSV is
operator-registry's list, read from its source in the Go module cache. No fleet: OLM does not run
on the testbed (its catalog needs an image registry), so what OLM would install is compared with
what the chart installs, whose rights every testbed test runs the manager with.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from addon_api import constants as c
from testbed import chart, olm, versions
from testbed.fleet import Testbed
from testbed.processes import Process, free_port
from testbed.support import docpage
from testbed.support.manager import chart_deployment_command, get_json
from testbed.support.waiting import eventually

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def made(built_binaries: Callable[[str], Path],
         tmp_path_factory: pytest.TempPathFactory) -> tuple[olm.Bundle, Path, list[dict[str, Any]]]:
    """The bundle of the chart's default values as ``make olm-bundle`` makes it (the manager
    registers the add-on), written out; and the chart's render."""
    rendered = chart.render(*olm.OLM_VALUES, namespace=olm.INSTALL_NAMESPACE)
    bundle = olm.registered_by_manager(olm.make_bundle(
        rendered, olm.chart_facts(chart.CHART, rendered),
        examples=olm.example_intents(REPO / "examples")))
    out = tmp_path_factory.mktemp("olm")
    olm.write(bundle, out)
    return bundle, out, rendered


ACCEPTED_WARNINGS = {
    "csv.Spec.Icon not specified": "no icon has been drawn for the add-on",
    'The "operatorhub" validator is deprecated': "operator-verify's only OperatorHub option "
                                                 "runs that validator; its checks still run",
}
"""Warnings the bundle is known to draw, by a phrase of each, and why they stand; any other
warning fails the test."""


def test_operator_verify_finds_no_error_and_only_known_warnings(
        made: tuple[olm.Bundle, Path, list[dict[str, Any]]]) -> None:
    _, out, _ = made
    found = olm.verify(out / "bundle")
    assert found["error"] == []
    unexplained = [w for w in found["warning"] if not any(p in w for p in ACCEPTED_WARNINGS)]
    assert unexplained == []


def test_operator_verify_reports_a_csv_that_owns_a_crd_the_bundle_lacks(
        made: tuple[olm.Bundle, Path, list[dict[str, Any]]], tmp_path: Path) -> None:
    bundle, _, _ = made
    owned = bundle.csv["spec"]["customresourcedefinitions"]["owned"]
    broken = olm.Bundle(
        {**bundle.csv, "spec": {**bundle.csv["spec"], "customresourcedefinitions": {
            "owned": [*owned, {**owned[0], "name": "gadgets.example.test", "kind": "Gadget"}]}}},
        bundle.manifests, bundle.annotations)
    olm.write(broken, tmp_path)
    errors = olm.verify(tmp_path / "bundle")["error"]
    assert any("Gadget" in e for e in errors), errors


def _chart_rules(rendered: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    role = next(o for o in rendered if o["kind"] == kind and o["metadata"]["name"] == name)
    rules: list[dict[str, Any]] = role["rules"]
    return rules


def registration_rules(template: str) -> list[dict[str, Any]]:
    """What the manager may do beyond the chart's rights, to register the add-on from the
    bundle: create the two kinds, read and update its own ClusterManagementAddOn and
    ``template``."""
    group = "addon.open-cluster-management.io"
    return [
        {"apiGroups": [group], "resources": ["clustermanagementaddons", "addontemplates"],
         "verbs": ["create"]},
        {"apiGroups": [group], "resources": ["clustermanagementaddons"],
         "resourceNames": ["model-serving"], "verbs": ["get", "update"]},
        {"apiGroups": [group], "resources": ["addontemplates"], "resourceNames": [template],
         "verbs": ["get", "update"]},
    ]


def test_the_csv_grants_the_manager_the_charts_rights_and_the_registrations(
        made: tuple[olm.Bundle, Path, list[dict[str, Any]]]) -> None:
    bundle, _, rendered = made
    spec = bundle.csv["spec"]["install"]["spec"]
    [deployment] = spec["deployments"]
    chart_deployment = next(o for o in rendered if o["kind"] == "Deployment")
    chart_args = chart_deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == [*chart_args,
                                 f"--registration-source={olm.REGISTRATION_CONFIGMAP}"]
    assert {**deployment["spec"], "template": None} == {**chart_deployment["spec"],
                                                        "template": None}
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    assert account == chart.MANAGER_SERVICE_ACCOUNT
    template = next(o["metadata"]["name"] for o in rendered if o["kind"] == "AddOnTemplate")
    assert spec["clusterPermissions"] == [
        {"serviceAccountName": account,
         "rules": [*_chart_rules(rendered, "ClusterRole", chart.MANAGER_SERVICE_ACCOUNT),
                   *registration_rules(template)]}]
    assert spec["permissions"] == [
        {"serviceAccountName": account,
         "rules": [*_chart_rules(rendered, "Role", chart.MANAGER_SERVICE_ACCOUNT),
                   {"apiGroups": [""], "resources": ["configmaps"],
                    "resourceNames": [olm.REGISTRATION_CONFIGMAP], "verbs": ["get"]}]}]


def test_the_bundle_owns_the_hub_crds_and_carries_the_roles_admins_bind(
        made: tuple[olm.Bundle, Path, list[dict[str, Any]]]) -> None:
    bundle, _, rendered = made
    crds = {o["metadata"]["name"] for o in rendered if o["kind"] == "CustomResourceDefinition"}
    assert {o["name"] for o in bundle.csv["spec"]["customresourcedefinitions"]["owned"]} == crds
    assert len(crds) == 4
    carried = {(o["kind"], o["metadata"]["name"]) for o in bundle.manifests}
    for role in ("model-serving-addon-tenant", "model-serving-addon-viewer",
                 "model-serving-addon-stack-owner", "model-serving-addon-manager-secrets"):
        assert ("ClusterRole", role) in carried
    assert ("ConfigMap", "model-serving-agent-config") in carried


def test_the_registration_travels_in_a_configmap_and_the_admission_policies_apart(
        made: tuple[olm.Bundle, Path, list[dict[str, Any]]]) -> None:
    bundle, out, rendered = made
    assert sorted(x.obj["kind"] for x in bundle.hub_objects) == [
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    written = [o for o in yaml.safe_load_all((out / "hub-objects.yaml").read_text()) if o]
    assert written == [x.obj for x in bundle.hub_objects]
    configmap = next(o for o in bundle.manifests
                     if o["metadata"]["name"] == olm.REGISTRATION_CONFIGMAP)
    moved = [o for o in yaml.safe_load_all(configmap["data"][olm.REGISTRATION_KEY]) if o]
    chart_objects = [o for o in rendered if o["kind"] in olm.REGISTRATION_KINDS]
    assert [(o["kind"], o["metadata"]["name"], o["spec"]) for o in moved] == [
        (o["kind"], o["metadata"]["name"], o["spec"]) for o in chart_objects]


def test_bundle_kinds_are_operator_registrys_supported_resources(
        go_modules: Callable[[str, str], Path]) -> None:
    source = go_modules("github.com/operator-framework/operator-registry",
                        versions.OPERATOR_REGISTRY) / "pkg/lib/bundle/supported_resources.go"
    text = source.read_text()
    constants = dict(re.findall(r"^\s*(\w+)\s*=\s*\"(\w+)\"", text, re.M))
    table = text.split("supportedResources = map[string]Namespaced{", 1)[1].split("}", 1)[0]
    keys = re.findall(r"^\s*(\w+):", table, re.M)
    assert keys, "operator-registry's supportedResources table was not found"
    assert {constants[k] for k in keys} == olm.BUNDLE_KINDS


PAGE = REPO / "docs" / "olm.md"
NOT_HERE = {
    "podman": "the bundle image is for an OLM catalog, and the testbed runs no OLM (podman is "
              "not part of make test either: make image-test runs it)",
    "operator-sdk": "operator-sdk is not served by this machine's Go module proxy, and the "
                    "testbed runs no OLM (its catalog needs an image registry)",
    "kubectl": "hub-objects.yaml goes to a hub where OLM installed the operator, which the "
               "testbed cannot run",
    "model-serving-addon": "its check is of a hub where OLM installed the operator",
}
"""Programs of docs/olm.md this test does not run, and why; it fails on any other it cannot."""


def test_the_olm_page_makes_and_validates_the_bundle(built_binaries: Callable[[str], Path],
                                                      tmp_path: Path) -> None:
    """docs/olm.md's commands in page order: ``make olm-bundle`` runs (into a temporary
    directory), the install commands are skipped by name (:data:`NOT_HERE`)."""
    ran, skipped = [], set()
    for step in docpage.steps(PAGE.read_text()):
        program = step.argv[0]
        if program in NOT_HERE:
            skipped.add(program)
            continue
        assert step.argv == ("make", "olm-bundle"), (
            f"docs/olm.md line {step.line}: {step.text!r}: the docs test cannot run it")
        proc = subprocess.run(["make", "-C", str(REPO), "olm-bundle", f"OLM_OUT={tmp_path}"],
                              capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "operator-verify: 0 errors, 2 warnings" in proc.stdout
        ran.append(step.text)
    assert ran == ["make olm-bundle"]
    assert skipped == set(NOT_HERE)
    assert (tmp_path / "bundle" / "metadata" / "annotations.yaml").exists()
    assert (tmp_path / "hub-objects.yaml").exists()


CMA_V1ALPHA1 = "clustermanagementaddons.v1alpha1.addon.open-cluster-management.io"
"""The version the chart and the manager write (v1beta1 names the defaults otherwise)."""


def test_an_olm_install_runs_the_manager_which_registers_the_addon(
        testbed: Testbed, made: tuple[olm.Bundle, Path, list[dict[str, Any]]],
        tmp_path: Path) -> None:
    """The bundle installed as OLM would (no OLM here: :func:`olm.olm_objects` says what it
    creates) into a namespace that is not the chart's; the manager run as the CSV's Deployment
    says, with a token of the ServiceAccount that has only the CSV's rights.

    The manager creates the ClusterManagementAddOn and AddOnTemplate from the bundle's
    ConfigMap, pointing the default AddOnDeploymentConfig at its own namespace, then that
    AddOnDeploymentConfig (with its verify key, owned by the ClusterManagementAddOn); OCM's
    add-on manager resolves both defaults. A drifted template is put back.
    """
    bundle = made[0]
    hub, ns = testbed.hub, f"olm-{uuid.uuid4().hex[:6]}"
    created = olm.olm_objects(bundle, ns)
    testbed.ensure_hub_controller("addon-manager")
    hub.apply_objects([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                       *created])
    hub.wait_crds_established()
    kubeconfig, args = chart_deployment_command(hub, ns, tmp_path / "manager.kubeconfig")
    assert f"--registration-source={olm.REGISTRATION_CONFIGMAP}" in args
    cli = str(Path(sys.executable).with_name("model-serving-addon"))

    def manager() -> Process:
        return Process("olm-manager", [cli, *args, f"--kubeconfig={kubeconfig}",
                                       f"--metrics-port={free_port()}", f"--namespace={ns}"],
                       tmp_path).start()

    proc = manager()
    chart_template = next(o for o in made[2] if o["kind"] == "AddOnTemplate")
    try:
        def registered() -> bool:
            proc.check()
            cma = get_json(hub, CMA_V1ALPHA1, c.ADDON_NAME)
            configs = {x["resource"]: x["defaultConfig"] for x in cma["spec"]["supportedConfigs"]}
            assert configs["addondeploymentconfigs"]["namespace"] == ns
            resolved = {x["resource"] for x in (cma.get("status") or {}).get(
                "defaultconfigReferences") or [] if (x.get("desiredConfig") or {}).get("specHash")}
            adc = get_json(hub, "addondeploymentconfig", f"{c.ADDON_NAME}-defaults", "-n", ns)
            owners = [o["uid"] for o in adc["metadata"].get("ownerReferences") or []]
            variables = {v["name"] for v in adc["spec"].get("customizedVariables") or []}
            return (owners == [cma["metadata"]["uid"]] and "SEAL_VERIFY_KEY" in variables
                    and resolved == {"addontemplates", "addondeploymentconfigs"})

        eventually(registered, timeout=90)
        template = get_json(hub, "addontemplate", chart_template["metadata"]["name"])
        assert template["spec"] == chart_template["spec"]
        assert "registration not written" not in proc.log_path.read_text()
        # A template changed behind its back is put back when the manager starts (and about
        # once a minute while it runs, with the AddOnDeploymentConfig).
        proc.stop()
        hub.kubectl("patch", "addontemplate", chart_template["metadata"]["name"], "--type=merge",
                    "-p", '{"spec":{"agentSpec":{"workload":{"manifests":[]}}}}')
        proc = manager()
        eventually(lambda: get_json(hub, "addontemplate", chart_template["metadata"]["name"])[
            "spec"] == chart_template["spec"], timeout=60)
    finally:
        proc.stop()
        for kind, name in (("clustermanagementaddon", c.ADDON_NAME),
                           ("addontemplate", chart_template["metadata"]["name"])):
            hub.kubectl("delete", kind, name, "--ignore-not-found")
        for obj in created:
            if obj["kind"] in ("ClusterRole", "ClusterRoleBinding") and obj["metadata"][
                    "name"].startswith(bundle.csv["metadata"]["name"]):
                hub.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"],
                            "--ignore-not-found")
        hub.kubectl("delete", "namespace", ns, "--wait=false")
