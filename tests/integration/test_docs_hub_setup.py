"""docs/hub-setup.md run as a hub admin reads it, top to bottom, on a fleet of one cluster.

Every command of the page's ``sh`` blocks runs in page order with the hub admin's kubeconfig
(``kubectl``, ``helm``; paths relative to the repository, as the page assumes), and its
``ManagedClusterAddOn`` YAML is applied; the page ends with a model Ready on the cluster. A
command this machine cannot run is skipped by name, with the reason, and the test fails on
any other skip: ``clusteradm`` is not installed here, and the page gives the YAML it would
create as the alternative (applied). What the testbed adds, because it has no kubelet for
these pods: the manager runs as the chart's Deployment says (its arguments, a token of its
ServiceAccount), the agent as OCM rendered it from the AddOnTemplate (its arguments, a token
of its ServiceAccount), and KServe's controller once the agent installed the stack.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from addon_api import constants as c
from addon_api import tenancy
from testbed import build, chart, demo, identities
from testbed.fleet import Testbed
from testbed.processes import Process, free_port
from testbed.support import docpage
from testbed.support.manager import chart_deployment_command
from testbed.support.waiting import on_fleet

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "hub-setup.md"
NOT_HERE = {
    "clusteradm": "clusteradm is not installed on this machine; the page's ManagedClusterAddOn "
                  "YAML (its alternative) is applied instead",
}
"""Programs of the page this test does not run, and why (anything else it runs)."""
RELEASE_NAMESPACE = "model-serving-system"
TENANT = "ml-fleet"


@pytest.fixture(scope="module")
def bed(built_binaries: Callable[[str], Any]) -> Iterator[Testbed]:
    """A hub and one managed cluster, nothing installed."""
    testbed = Testbed(spokes=1)
    try:
        testbed.start()
        yield testbed
    finally:
        testbed.cleanup()


def _absolute(arg: str) -> str:
    """A path the page gives relative to the repository, made absolute (else unchanged)."""
    return str(REPO / arg) if "/" in arg and (REPO / arg).exists() else arg


def _run(bed: Testbed, step: docpage.Step) -> str:
    program, *args = step.argv
    args = [_absolute(a) for a in args]
    if program == "kubectl":
        return bed.hub.kubectl(*args).stdout
    if program == "helm":
        return chart.helm(*args, f"--kubeconfig={bed.hub.kubeconfig}").stdout
    raise AssertionError(f"line {step.line}: {step.text!r}: the docs test cannot run {program}")


def _start_manager(bed: Testbed) -> None:
    """The manager as the chart's Deployment runs it (its args, its ServiceAccount's token)."""
    kubeconfig, args = chart_deployment_command(bed.hub, RELEASE_NAMESPACE,
                                                bed.hub.directory / "manager.kubeconfig")
    cli = str(Path(sys.executable).with_name("model-serving-addon"))
    proc = Process("manager", [cli, *args, f"--kubeconfig={kubeconfig}",
                               f"--metrics-port={free_port()}", f"--namespace={RELEASE_NAMESPACE}"],
                   bed.log_dir).start()
    bed.processes.append(proc)


def _start_agent(bed: Testbed) -> list[str]:
    """The agent as OCM rendered the AddOnTemplate for the cluster (its args, its
    ServiceAccount's token), once its ServiceAccount is on the cluster; its arguments."""
    spoke = bed.spokes[0]
    works = json.loads(bed.hub.kubectl("get", "manifestworks", "-n", spoke.name, "-l",
                                       f"open-cluster-management.io/addon-name={c.ADDON_NAME}",
                                       "-o", "json").stdout)["items"]
    deployments = [m for w in works for m in w["spec"]["workload"]["manifests"]
                   if m["kind"] == "Deployment"]
    if not deployments:
        return []
    (deployment,) = deployments
    pod = deployment["spec"]["template"]["spec"]
    namespace = deployment["metadata"]["namespace"]
    if spoke.kubectl("get", "serviceaccount", pod["serviceAccountName"], "-n", namespace,
                     check=False).returncode != 0:
        return []
    (container,) = pod["containers"]
    if not any(a.startswith("--seal-verify-key=") and len(a) > 20 for a in container["args"]):
        return []  # rendered before the manager published its key: OCM renders it again
    spoke.wait_crds_established()
    kubeconfig = identities.token_kubeconfig(spoke, namespace, pod["serviceAccountName"],
                                             spoke.directory / "agent.kubeconfig")
    # The image's bundles and metrics port are its own: the local ones here.
    args = [a for a in container["args"]
            if not a.startswith(("--bundle-dir", "--metrics-port"))]
    cli = str(Path(sys.executable).with_name("model-serving-addon"))
    kserve = bed.kserve_controller(spoke)
    proc = Process(f"{spoke.name}-agent", [
        cli, *args, f"--kubeconfig={kubeconfig}", f"--bundle-dir={demo.bundle_dir()}",
        f"--metrics-port={free_port()}", "--metrics-address=127.0.0.1"], bed.log_dir,
        env={**build.agent_runtime_env(), **kserve.agent_env()}).start()
    bed.processes.append(proc)
    return args


def test_the_hub_setup_page_ends_with_a_model_ready(bed: Testbed) -> None:
    steps = docpage.steps(PAGE.read_text())
    skipped: list[str] = []
    ran: list[str] = []
    agent_args: list[str] = []
    kserve_step = demo.start_kserve_when_stack_ready(bed)
    for step in steps:
        if step.objects:
            # Step 2's ManagedClusterAddOn (for cluster1: the testbed's one cluster).
            assert step.heading.startswith("2."), (step.line, step.heading)
            bed.hub.apply_objects(list(step.objects))
            ran.append(f"yaml: {', '.join(o['kind'] for o in step.objects)}")
            agent_args = on_fleet(bed, kserve_step, lambda: _start_agent(bed), timeout=180)
            continue
        program = step.argv[0]
        if program in NOT_HERE:
            skipped.append(f"line {step.line}: {step.text} ({NOT_HERE[program]})")
            continue
        out = _run(bed, step)
        ran.append(step.text)
        if program == "helm" and step.argv[1] == "install":
            # What the chart's Deployment would run; OCM's add-on manager is the hub's.
            bed.hub.wait_crds_established()
            bed.ensure_hub_controller("addon-manager")
            _start_manager(bed)
        if "placementdecisions" in step.argv:
            print(out)
    print("ran:\n  " + "\n  ".join(ran))
    print("skipped:\n  " + "\n  ".join(skipped))
    assert [s.split(":")[1].split()[0] for s in skipped] == ["clusteradm"], skipped
    assert any(t.startswith("helm install") for t in ran) and any(
        "inferenceservice.yaml" in t for t in ran), ran
    # The agent gets the page's namespace policy from the manager, not from its arguments.
    assert not [a for a in agent_args if a.startswith("--target-namespaces")], agent_args

    def ready() -> dict[str, Any] | None:
        got = json.loads(bed.hub.kubectl("get", "mcisvc", "-n", TENANT, "-o", "json").stdout)
        entries = [e for i in got["items"] for e in (i.get("status") or {}).get("clusters") or []]
        return got if entries and all(e.get("ready") is True for e in entries) else None

    models = on_fleet(bed, kserve_step, ready, timeout=300)
    namespace = next(a.partition("=")[2] for a in agent_args if a.startswith("--namespace="))
    delivered = json.loads(bed.spokes[0].kubectl(
        "get", "configmap", c.NAMESPACE_POLICY_CONFIGMAP, "-n", namespace, "-o", "json").stdout)
    assert tenancy.from_configmap(delivered["data"]).targets(TENANT) == {"models"}, delivered
    assert [i["metadata"]["name"] for i in models["items"]] == ["sklearn-iris"]
    # The page's last command shows it: every intent with READY as ready/desired.
    table = bed.hub.kubectl("-n", TENANT, "get", "mlfleet").stdout
    print(table)
    line = next(x for x in table.splitlines() if "sklearn-iris" in x)
    assert "1/1" in line.split(), table
