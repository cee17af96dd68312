"""Every long-running component talks to its API server as its production identity.

Each component's kubeconfig is asked "who am I" (SelfSubjectReview) and "what may I do"
(SelfSubjectRulesReview); none may be in ``system:masters`` or hold a rule with ``*``. The
processes the testbed runs are checked to use exactly those kubeconfigs, so a component
quietly falling back to the admin kubeconfig fails here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from addon_api import constants as c
from testbed import identities
from testbed.cluster import Cluster
from testbed.fleet import AGENT_NAMESPACE, HUB_NAMESPACE, Testbed
from testbed.support.manager import manager_identity
from testbed.support.waiting import eventually

EXPECTED_USERS = {
    ("hub", "registration"): f"system:serviceaccount:{HUB_NAMESPACE}:registration-controller-sa",
    ("hub", "placement"): f"system:serviceaccount:{HUB_NAMESPACE}:placement-controller-sa",
    ("hub", "addon-manager"): f"system:serviceaccount:{HUB_NAMESPACE}:addon-manager-controller-sa",
    ("hub", "work"): f"system:serviceaccount:{HUB_NAMESPACE}:work-controller-sa",
    ("hub", "kube-controller-manager"): "system:kube-controller-manager",
    ("spoke", "kube-controller-manager"): "system:kube-controller-manager",
    ("spoke", "kube-scheduler"): "system:kube-scheduler",
    ("spoke", "registration-agent"):
        f"system:serviceaccount:{AGENT_NAMESPACE}:{identities.REGISTRATION_SA}",
    ("spoke", "work-agent"): f"system:serviceaccount:{AGENT_NAMESPACE}:{identities.WORK_SA}",
}


CONTROL_PLANE = {"system:kube-controller-manager", "system:kube-scheduler"}
"""Kubernetes' own components: their bootstrap roles read every kind (``*`` list/watch for
the garbage collector and quota), by upstream design; they are only checked not to be
``system:masters``."""


def _assert_least_privilege(kubeconfig: Path, user: str, namespaces: tuple[str, ...]) -> None:
    info = identities.who_am_i(kubeconfig)
    assert info["username"] == user, info
    assert "system:masters" not in info.get("groups", []), info
    if user in CONTROL_PLANE:
        return
    for ns in namespaces:
        assert identities.wildcard_rules(kubeconfig, ns) == [], (user, ns)


def _components(testbed: Testbed) -> list[tuple[Cluster, str, str]]:
    out = [(testbed.hub, "hub", name) for name in testbed.hub.identities]
    out += [(s, "spoke", name) for s in testbed.spokes for name in s.identities]
    return out


def test_ocm_and_control_plane_components_are_not_admin(testbed: Testbed) -> None:
    testbed.ensure_hub_controller("addon-manager")
    seen = set()
    for cluster, role, name in _components(testbed):
        user = EXPECTED_USERS.get((role, name))
        if user is None:
            continue  # the add-on's own identities: the next test
        seen.add((role, name))
        _assert_least_privilege(
            cluster.identities[name], user, ("default", "kube-system", AGENT_NAMESPACE)
        )
    assert seen == set(EXPECTED_USERS)


def test_running_processes_use_their_own_kubeconfigs(testbed: Testbed) -> None:
    testbed.ensure_hub_controller("addon-manager")
    for cluster, _, name in _components(testbed):
        proc = cluster.processes.get(name)
        if proc is None:
            continue
        own = str(cluster.identities[name])
        uses = f"--kubeconfig={own}" in proc.argv or (proc.env or {}).get("KUBECONFIG") == own
        assert uses, (name, proc.argv, proc.env)
        assert str(cluster.kubeconfig) not in " ".join(proc.argv), (name, proc.argv)
    for spoke in testbed.spokes:
        for name in ("registration-agent", "work-agent", "kube-controller-manager"):
            assert name in spoke.processes, name


@pytest.mark.parametrize("namespace", [c.AGENT_NAMESPACE, "model-serving-agent"])
def test_the_addon_agent_runs_as_the_templates_service_account(
    testbed: Testbed, namespace: str
) -> None:
    spoke = testbed.spokes[0]
    try:
        kubeconfig = identities.addon_agent_kubeconfig(spoke, namespace)
        _assert_least_privilege(
            kubeconfig, f"system:serviceaccount:{namespace}:model-serving-agent",
            ("default", "kserve", namespace),
        )
    finally:  # the binding is cluster-scoped: give it back to the default namespace
        identities.addon_agent_kubeconfig(spoke, c.AGENT_NAMESPACE)


def test_the_manager_runs_as_the_charts_service_account(testbed: Testbed) -> None:
    _assert_least_privilege(
        manager_identity(testbed),
        f"system:serviceaccount:{identities.MANAGER_NAMESPACE}:model-serving-addon-manager",
        ("default", identities.MANAGER_NAMESPACE, "cluster1"),
    )


def test_the_manager_reads_secrets_only_in_namespaces_a_hub_admin_granted(
    testbed: Testbed,
) -> None:
    hub = testbed.hub
    kubeconfig = manager_identity(testbed)

    def can(verb: str, *where: str) -> str:
        out = subprocess.run(
            ["kubectl", f"--kubeconfig={kubeconfig}", "auth", "can-i", verb, "secrets", *where],
            capture_output=True, text=True, timeout=60,
        )
        return out.stdout.strip()

    for verb in ("get", "list", "watch"):
        assert can(verb, "-A") == "no"
        assert can(verb, "-n", "open-cluster-management-hub") == "no"
    ns = "grant-secrets-test"
    hub.apply_objects([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}])
    try:
        assert can("list", "-n", ns) == "no"
        identities.grant_manager_secrets(hub, ns)
        for verb in ("get", "list", "watch"):
            eventually(lambda v=verb: can(v, "-n", ns) == "yes", timeout=30)  # type: ignore[misc]
        assert can("delete", "-n", ns) == "no" and can("list", "-A") == "no"
    finally:
        hub.kubectl("delete", "namespace", ns, "--wait=false", check=False)
