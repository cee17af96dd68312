"""Production identities for every long-running testbed component.

On a real fleet OCM's operators install the agents' and controllers' ServiceAccounts and
RBAC from the ``manifests/`` tree of the ``open-cluster-management.io/ocm`` module; the
testbed renders the same files from the Go module cache (:mod:`testbed.gotemplate`) with
the values a default-mode klusterlet and cluster-manager use, applies them as the
harness (admin), and hands each component a kubeconfig with a ServiceAccount token
(TokenRequest) for exactly that identity. Only the harness itself keeps admin.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from testbed import documents, gotemplate, upstream, versions
from testbed.cluster import Cluster

KLUSTERLET = "klusterlet"
"""Name of the Klusterlet (OCM's default), the prefix of its RBAC objects."""
KLUSTERLET_NAMESPACE = "open-cluster-management-agent"
REGISTRATION_SA = f"{KLUSTERLET}-registration-sa"
WORK_SA = f"{KLUSTERLET}-work-sa"
CLUSTER_MANAGER = "cluster-manager"
HUB_NAMESPACE = "open-cluster-management-hub"
HUB_CONTROLLERS = {
    "registration": "registration-controller-sa",
    "placement": "placement-controller-sa",
    "addon-manager": "addon-manager-controller-sa",
    "work": "work-controller-sa",
}
"""Hub controller -> its ServiceAccount in :data:`HUB_NAMESPACE` (OCM's names)."""
MANAGER_NAMESPACE = "model-serving-manager"
"""Where tests that run the manager without installing the chart give it its identity
(not the chart's usual release namespace, so a test that ``helm install``s the chart on the
same hub does not collide with these objects)."""
TOKEN_DURATION = "168h"
"""Lifetime of the tokens the testbed issues (the testbed CA lives as long)."""

_RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
# Conditions of OCM's templates, decided as a default-mode install without extras.
_CONDITIONS = {
    "gt (len .Labels) 0": False,
    'and .ManagedClusterRoleArn (eq .RegistrationDriver.AuthType "awsirsa")': False,
    ".ManagedClusterIdentityCreatorRole": False,
    ".ClusterImporterEnabled": False,
    ".ClusterProfileEnabled": False,
    ".GRPCAuthEnabled": False,
}


def _ocm_manifests() -> Path:
    return upstream.module_dir("open-cluster-management.io/ocm", versions.OCM) / "manifests"


def _render_rbac(files: Iterable[Path], values: dict[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(files):
        text = gotemplate.render(path.read_text(), values, _CONDITIONS)
        for doc in documents.load_all(text):
            if doc and doc.get("kind") in _RBAC_KINDS:
                meta = doc["metadata"]
                if not meta.get("labels"):
                    meta.pop("labels", None)
                # The operators' apply reads a key ending in "-" as "remove this annotation".
                annotations = {
                    k: v for k, v in (meta.get("annotations") or {}).items()
                    if not k.endswith("-")
                }
                meta.pop("annotations", None)
                if annotations:
                    meta["annotations"] = annotations
                doc.pop("imagePullSecrets", None)  # nothing is pulled here
                out.append(doc)
    return out


def klusterlet_rbac() -> list[dict[str, Any]]:
    """ServiceAccounts and RBAC of a default-mode klusterlet, from OCM's own manifests.

    Default mode puts the "managed" and "management" sets on the same cluster, with the
    agent namespace equal to the klusterlet namespace. The aggregate ClusterRole that the
    work agent's aggregate binding names is created by the klusterlet operator in code
    (an aggregation rule over ``open-cluster-management.io/aggregate-to-work: "true"``);
    it is added here the same way.
    """
    root = _ocm_manifests() / "klusterlet"
    values = {
        ".KlusterletName": KLUSTERLET,
        ".KlusterletNamespace": KLUSTERLET_NAMESPACE,
        ".AgentNamespace": KLUSTERLET_NAMESPACE,
        ".RegistrationServiceAccount": REGISTRATION_SA,
        ".WorkServiceAccount": WORK_SA,
    }
    files = [
        path
        for pattern in ("managed/klusterlet-*.yaml", "management/klusterlet-*.yaml")
        for path in root.glob(pattern)
        if "role" in path.name or "serviceaccount" in path.name
    ]
    objects = _render_rbac(files, values)
    objects.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"open-cluster-management:{KLUSTERLET}-work:aggregate"},
            "aggregationRule": {
                "clusterRoleSelectors": [
                    {"matchLabels": {"open-cluster-management.io/aggregate-to-work": "true"}}
                ]
            },
            "rules": [],
        }
    )
    return objects


def cluster_manager_rbac() -> list[dict[str, Any]]:
    """ServiceAccounts, ClusterRoles and bindings of OCM's hub controllers."""
    root = _ocm_manifests() / "cluster-manager" / "hub"
    values = {
        ".ClusterManagerName": CLUSTER_MANAGER,
        ".ClusterManagerNamespace": HUB_NAMESPACE,
    }
    files = [
        root / component / name
        for component in HUB_CONTROLLERS
        for name in ("serviceaccount.yaml", "clusterrole.yaml", "clusterrolebinding.yaml")
    ]
    return _render_rbac(files, values)


def token_kubeconfig(cluster: Cluster, namespace: str, account: str, path: Path) -> Path:
    """Write a kubeconfig that reaches ``cluster`` as ServiceAccount ``namespace/account``.

    The token comes from the TokenRequest API (``kubectl create token``), as a projected
    token of a pod running as that ServiceAccount would.
    """
    token = cluster.create_token(account, namespace, TOKEN_DURATION)
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    name = f"{namespace}:{account}"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": admin["clusters"],
                "users": [{"name": name, "user": {"token": token}}],
                "contexts": [
                    {"name": name, "context": {"cluster": admin["clusters"][0]["name"],
                                               "user": name}}
                ],
                "current-context": name,
            },
            sort_keys=False,
        )
    )
    path.chmod(0o600)
    return path


def _review(kubeconfig: Path, path: str, review: dict[str, Any]) -> dict[str, Any]:
    """Create the self-review ``review`` at ``path`` as the identity of ``kubeconfig``.

    The request ``kubectl auth whoami`` or ``kubectl create -f -`` sends with that
    kubeconfig's client certificate or token, from this process (a kubectl process costs the
    machine about 0.15 CPU-seconds).
    """
    from kubernetes import config

    from testbed.reading import Reader

    api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    try:
        status, body = Reader(api).request(path, 60, method="POST", body=review,
                                           content_type="application/json")
    finally:
        api.close()
    if status >= 400:
        message = body.get("message") if isinstance(body, dict) else body
        raise RuntimeError(f"{review['kind']} as {kubeconfig} failed ({status}): {message}")
    answer: dict[str, Any] = body
    return answer


def who_am_i(kubeconfig: Path) -> dict[str, Any]:
    """The API server's answer to a SelfSubjectReview made with ``kubeconfig``."""
    answer = _review(kubeconfig, "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                     {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    info: dict[str, Any] = answer["status"]["userInfo"]
    return info


def wildcard_rules(kubeconfig: Path, namespace: str) -> list[dict[str, Any]]:
    """Resource rules the identity holds in ``namespace`` that use ``*`` anywhere.

    From a SelfSubjectRulesReview, which covers the cluster-wide rules too.
    """
    answer = _review(kubeconfig, "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                     {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                      "spec": {"namespace": namespace}})
    rules = answer["status"].get("resourceRules") or []
    return [
        r for r in rules
        if any("*" in r.get(k, []) for k in ("verbs", "apiGroups", "resources"))
    ]


def addon_agent_kubeconfig(spoke: Cluster, install_namespace: str, *sets: str) -> Path:
    """A kubeconfig for the add-on agent's ServiceAccount on ``spoke``, with the chart's RBAC.

    Applies what the chart's AddOnTemplate deploys (Namespace, ServiceAccount, ClusterRoles,
    binding, the add-on's spoke CRDs; not the Deployment: the agent runs as a testbed
    process) as OCM's work agent would, then issues a token for that ServiceAccount. Tests
    that go through OCM's add-on manager instead get the same objects from the work agent
    and need only :func:`token_kubeconfig`.
    """
    from testbed.chart import AGENT_SERVICE_ACCOUNT, agent_manifests

    objects = [m for m in agent_manifests(install_namespace, *sets) if m["kind"] != "Deployment"]
    spoke.apply_objects(objects)
    spoke.wait_crds_established()
    return token_kubeconfig(
        spoke, install_namespace, AGENT_SERVICE_ACCOUNT,
        spoke.directory / f"agent-{install_namespace}.kubeconfig",
    )


def grant_manager_secrets(
    hub: Cluster, secret_namespace: str, namespace: str = MANAGER_NAMESPACE
) -> None:
    """Let the manager read the Secrets of ``secret_namespace``.

    As the chart does for a namespace listed in ``manager.secretNamespaces``: its RoleBinding.
    """
    from testbed.chart import MANAGER_SERVICE_ACCOUNT, render

    bindings = [
        o
        for o in render(f"manager.secretNamespaces={{{secret_namespace}}}", namespace=namespace)
        if o["kind"] == "RoleBinding" and o["metadata"].get("namespace") == secret_namespace
    ]
    if len(bindings) != 1 or bindings[0]["roleRef"]["name"] != f"{MANAGER_SERVICE_ACCOUNT}-secrets":
        raise RuntimeError(f"the chart's Secret grant changed shape: {bindings}")
    hub.apply_objects(bindings)


def manager_kubeconfig(hub: Cluster, namespace: str = MANAGER_NAMESPACE) -> Path:
    """A hub kubeconfig for the chart's manager ServiceAccount, with exactly the chart's RBAC.

    Applies the ServiceAccount, ClusterRoles, Role and bindings that ``helm template``
    renders (the rest of the chart is not needed to run the manager as a process). It may
    read no Secret until :func:`grant_manager_secrets` grants a namespace.
    """
    from testbed.chart import MANAGER_SERVICE_ACCOUNT, render

    rbac = [
        o
        for o in render(namespace=namespace)
        if o["kind"] in _RBAC_KINDS
        and o["metadata"]["name"] in (MANAGER_SERVICE_ACCOUNT, f"{MANAGER_SERVICE_ACCOUNT}-secrets")
    ]
    if len(rbac) != 6:
        raise RuntimeError(f"the chart's manager RBAC changed shape: {rbac}")
    hub.apply_objects(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, *rbac]
    )
    return token_kubeconfig(
        hub, namespace, MANAGER_SERVICE_ACCOUNT, hub.directory / "manager.kubeconfig"
    )
