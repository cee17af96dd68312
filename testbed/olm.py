"""The add-on as an OLM bundle, made from what its Helm chart renders (issue 32, item 9).

OLM installs an operator from a bundle: a ClusterServiceVersion (CSV) that holds the
operator's Deployments and the rights of their ServiceAccounts, the CRDs it owns, and
manifests of the few other kinds OLM knows how to install (:data:`BUNDLE_KINDS`). The chart
renders more than that: the add-on's registration (ClusterManagementAddOn, AddOnTemplate),
admission policies, objects in namespaces other than the install namespace. Those cannot travel
in a bundle; :func:`make_bundle` returns them apart (``hub_objects``, each with the reason), for
the hub admin to apply once OLM has installed the operator (docs/olm.md), so nothing the chart
installs is dropped without a word.

Everything here but :func:`main` is pure: the rendered objects in, the bundle's files out.
``python -m testbed.olm --out DIR`` renders the chart with the testbed's helm and writes the
bundle (``make olm-bundle``), which ``operator-verify`` (operator-framework's validators, the
library ``operator-sdk bundle validate`` runs) then checks.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PACKAGE = "model-serving-addon"
"""The OLM package name (the bundle's ``package`` annotation and the CSV's name prefix)."""

CHANNEL = "alpha"
"""The bundle's only channel, also the default: nothing has been released yet (CHANGELOG.md)."""

INSTALL_NAMESPACE = "model-serving-system"
"""The namespace the chart's docs install into; the CSV suggests it to OperatorHub."""

BUNDLE_KINDS = frozenset({
    "ClusterServiceVersion", "CustomResourceDefinition", "Secret", "ClusterRole",
    "ClusterRoleBinding", "ConfigMap", "ServiceAccount", "Service", "Role", "RoleBinding",
    "PrometheusRule", "ServiceMonitor", "PodDisruptionBudget", "PriorityClass",
    "VerticalPodAutoscaler", "ConsoleYAMLSample", "ConsoleQuickStart", "ConsoleCLIDownload",
    "ConsoleLink", "ConsolePlugin", "NetworkPolicy",
})
"""The kinds a bundle may carry: operator-registry's ``supportedResources``
(``pkg/lib/bundle/supported_resources.go``; a test compares this set with that file)."""

DESCRIPTION = """\
From this bundle OLM installs the hub manager (its Deployment and rights), the four hub CRDs,
the agents' settings (ConfigMap `model-serving-agent-config`) and the roles a hub admin binds
for tenants, viewers and stack owners.

The add-on's registration with OCM (ClusterManagementAddOn `model-serving` and its
AddOnTemplate) and its admission policies are kinds OLM does not install from a bundle: apply
them once the operator is installed, from `hub-objects.yaml` made with this bundle
(docs/olm.md). Then enable the add-on on clusters and create ModelServings, as after a Helm
install (docs/hub-setup.md)."""
"""The CSV's long description after the chart's: what OLM installs and what the admin applies."""

HELM_LABELS = ("app.kubernetes.io/managed-by", "app.kubernetes.io/instance")
"""Labels that name the Helm release, dropped: an object OLM installs is not Helm's. The
``helm.sh/chart`` label stays: it says which chart version the object comes from, which
``model-serving-addon check`` and ``version`` read from the ClusterManagementAddOn."""

HELM_TEST_HOOKS = ("test", "test-success")
"""``helm.sh/hook`` values of ``helm test``'s objects, which ``helm install`` does not create
either (the chart's check pod: run ``model-serving-addon check`` instead)."""

ANNOTATIONS_PREFIX = "operators.operatorframework.io.bundle"


@dataclass(frozen=True)
class LeftOut:
    """A rendered object a bundle cannot carry, and why."""

    obj: dict[str, Any]
    reason: str


@dataclass(frozen=True)
class Bundle:
    """A bundle's content, and what the chart renders that OLM cannot install.

    The CSV, the other manifests and the metadata annotations make the bundle;
    :attr:`hub_objects` are the rest.
    """

    csv: dict[str, Any]
    manifests: list[dict[str, Any]]
    annotations: dict[str, str]
    hub_objects: list[LeftOut] = field(default_factory=list)

    def files(self) -> dict[str, str]:
        """Relative path -> text of every file of the bundle directory, in a stable order.

        The files are ``manifests/*``, ``metadata/annotations.yaml`` and ``bundle.Dockerfile``.
        """
        out = {f"manifests/{PACKAGE}.clusterserviceversion.yaml": _dump(self.csv)}
        for obj in self.manifests:
            out[f"manifests/{manifest_file_name(obj)}"] = _dump(obj)
        out["metadata/annotations.yaml"] = _dump({"annotations": self.annotations})
        out["bundle.Dockerfile"] = dockerfile(self.annotations)
        return out


def manifest_file_name(obj: dict[str, Any]) -> str:
    """File name of a manifest in ``manifests/``.

    It is ``<name>_<kind>.yaml`` in lower case, and a CRD's own name for a CRD.
    """
    name = obj["metadata"]["name"]
    if obj["kind"] == "CustomResourceDefinition":
        return f"{name}.yaml"
    return f"{name}_{obj['kind'].lower()}.yaml"


def dockerfile(annotations: dict[str, str]) -> str:
    """The bundle image's Dockerfile: its annotations as labels, the two directories copied."""
    labels = "".join(f"LABEL {k}={v}\n" for k, v in annotations.items())
    return f"FROM scratch\n\n{labels}\nCOPY manifests /manifests/\nCOPY metadata /metadata/\n"


def bundle_annotations() -> dict[str, str]:
    """``metadata/annotations.yaml``: a registry+v1 bundle of :data:`PACKAGE` on :data:`CHANNEL`."""
    return {
        f"{ANNOTATIONS_PREFIX}.mediatype.v1": "registry+v1",
        f"{ANNOTATIONS_PREFIX}.manifests.v1": "manifests/",
        f"{ANNOTATIONS_PREFIX}.metadata.v1": "metadata/",
        f"{ANNOTATIONS_PREFIX}.package.v1": PACKAGE,
        f"{ANNOTATIONS_PREFIX}.channels.v1": CHANNEL,
        f"{ANNOTATIONS_PREFIX}.channel.default.v1": CHANNEL,
    }


@dataclass(frozen=True)
class Chart:
    """What the CSV says of the operator beyond the rendered objects.

    The facts come from Chart.yaml and the chart's values.
    """

    version: str
    image: str
    description: str
    keywords: tuple[str, ...] = ()
    min_kube_version: str = ""


def make_bundle(
    rendered: Iterable[dict[str, Any]],
    chart: Chart,
    *,
    namespace: str = INSTALL_NAMESPACE,
    examples: Sequence[dict[str, Any]] = (),
) -> Bundle:
    """The bundle of what ``helm template -n <namespace>`` rendered (CRDs included).

    The Deployments in ``namespace`` become the CSV's install strategy; the rules bound to
    their ServiceAccounts (ClusterRoleBindings: ``clusterPermissions``; RoleBindings in
    ``namespace``: ``permissions``) become their rights, and OLM makes the ServiceAccounts
    and bindings itself. The CRDs are owned. Every other object of a kind in
    :data:`BUNDLE_KINDS`, cluster-scoped or in ``namespace``, is a manifest; the rest is
    ``hub_objects``. ``examples`` go to the CSV's ``alm-examples``.

    ``helm test``'s objects (hook ``test``) are not part of an install and are left out. Raises
    ValueError for any other Helm hook (a chart lifecycle step OLM has no place for: render
    without it).
    """
    objs = [_unhelm(o) for o in rendered
            if o and _annotations(o).get("helm.sh/hook") not in HELM_TEST_HOOKS]
    hooks = [_ref(o) for o in objs if "helm.sh/hook" in _annotations(o)]
    if hooks:
        raise ValueError(f"Helm hooks have no OLM equivalent; render without them: {hooks}")
    deployments = [o for o in objs if o["kind"] == "Deployment" and _ns(o) == namespace]
    accounts = {_pod_spec(d).get("serviceAccountName", "default") for d in deployments}
    used: set[int] = set()
    cluster_rules: dict[str, list[dict[str, Any]]] = {}
    ns_rules: dict[str, list[dict[str, Any]]] = {}
    left: list[LeftOut] = []
    for binding in (o for o in objs if o["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        bound = [s["name"] for s in binding.get("subjects") or []
                 if s.get("kind") == "ServiceAccount" and s.get("namespace") == namespace
                 and s["name"] in accounts]
        if not bound:
            continue
        if len(bound) != len(binding.get("subjects") or []):
            raise ValueError(f"{_ref(binding)} binds an operator's ServiceAccount and other "
                             "subjects: the CSV cannot say that")
        if binding["kind"] == "RoleBinding" and _ns(binding) != namespace:
            left.append(LeftOut(binding, f"grants the operator's ServiceAccount rights in "
                                         f"namespace {_ns(binding)}, outside the install "
                                         "namespace (a CSV grants rights only there)"))
            used.add(id(binding))
            continue
        role = _role(objs, binding, namespace)
        target = cluster_rules if binding["kind"] == "ClusterRoleBinding" else ns_rules
        for account in bound:
            target.setdefault(account, []).extend(copy.deepcopy(role.get("rules") or []))
        used.update({id(binding), id(role)})
    still_bound = {(b["roleRef"]["kind"], b["roleRef"]["name"]) for b in objs
                   if b["kind"] in ("ClusterRoleBinding", "RoleBinding") and id(b) not in used}
    manifests: list[dict[str, Any]] = []
    crds: list[dict[str, Any]] = []
    for obj in objs:
        kind = obj["kind"]
        if obj in deployments:
            continue
        if (kind == "ServiceAccount" and _ns(obj) == namespace
                and obj["metadata"]["name"] in accounts):
            continue  # OLM creates the ServiceAccounts the CSV's Deployments name
        if id(obj) in used and (kind, obj["metadata"]["name"]) not in still_bound:
            continue
        if kind == "CustomResourceDefinition":
            crds.append(obj)
        elif kind not in BUNDLE_KINDS:
            left.append(LeftOut(obj, f"{kind} is not a kind OLM installs from a bundle"))
        elif _ns(obj) not in (None, namespace):
            left.append(LeftOut(obj, f"in namespace {_ns(obj)}: a bundle's namespaced "
                                     "objects go to the install namespace"))
        else:
            manifests.append(_without_namespace(obj))
    csv = _csv(chart, namespace, deployments, cluster_rules, ns_rules, crds, examples)
    return Bundle(csv, [*crds, *manifests], bundle_annotations(), left)


def _csv(
    chart: Chart,
    namespace: str,
    deployments: list[dict[str, Any]],
    cluster_rules: dict[str, list[dict[str, Any]]],
    ns_rules: dict[str, list[dict[str, Any]]],
    crds: list[dict[str, Any]],
    examples: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": f"{PACKAGE}.v{chart.version}",
        "annotations": {
            "alm-examples": json.dumps(list(examples), separators=(",", ":")),
            "capabilities": "Basic Install",
            "categories": "AI/Machine Learning",
            "containerImage": chart.image,
            "description": _first_sentence(chart.description),
            "operatorframework.io/suggested-namespace": namespace,
        },
        "labels": {"operatorframework.io/arch.amd64": "supported",
                   "operatorframework.io/os.linux": "supported"},
    }
    spec: dict[str, Any] = {
        "displayName": "Model Serving Add-on",
        "description": f"{_first_sentence(chart.description)}.\n\n{DESCRIPTION}",
        "version": chart.version,
        "maturity": CHANNEL,
        "provider": {"name": "Open Data Hub"},
        "keywords": list(chart.keywords),
        # OwnNamespace only: with AllNamespaces OLM would grant the namespaced rules below in
        # every namespace. The manager follows intents everywhere through its cluster rules.
        "installModes": [
            {"type": "OwnNamespace", "supported": True},
            {"type": "SingleNamespace", "supported": False},
            {"type": "MultiNamespace", "supported": False},
            {"type": "AllNamespaces", "supported": False},
        ],
        "customresourcedefinitions": {"owned": [_owned(crd) for crd in crds]},
        "install": {
            "strategy": "deployment",
            "spec": {
                "deployments": [_deployment_spec(d) for d in deployments],
                "clusterPermissions": [{"serviceAccountName": sa, "rules": rules}
                                       for sa, rules in sorted(cluster_rules.items())],
                "permissions": [{"serviceAccountName": sa, "rules": rules}
                                for sa, rules in sorted(ns_rules.items())],
            },
        },
    }
    if chart.min_kube_version:
        spec["minKubeVersion"] = chart.min_kube_version
    return {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": metadata, "spec": spec}


def _first_sentence(text: str) -> str:
    return text.split(". ")[0].rstrip(".")


def _owned(crd: dict[str, Any]) -> dict[str, Any]:
    """The CSV's entry for an owned CRD: its storage version, kind and schema's description."""
    names = crd["spec"]["names"]
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    description = ((version.get("schema") or {}).get("openAPIV3Schema") or {}).get(
        "description", "")
    return {"name": crd["metadata"]["name"], "version": version["name"], "kind": names["kind"],
            "displayName": re.sub(r"(?<=[a-z])(?=[A-Z])", " ", names["kind"]),
            "description": description.split("\n")[0]}


def _deployment_spec(deployment: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": deployment["metadata"]["name"],
                           "spec": copy.deepcopy(deployment["spec"])}
    labels = deployment["metadata"].get("labels")
    if labels:
        out["label"] = dict(labels)
    return out


def _role(objs: list[dict[str, Any]], binding: dict[str, Any], namespace: str) -> dict[str, Any]:
    ref = binding["roleRef"]
    for obj in objs:
        if obj["kind"] == ref["kind"] and obj["metadata"]["name"] == ref["name"] and (
                ref["kind"] == "ClusterRole" or _ns(obj) == namespace):
            return obj
    raise ValueError(f"{_ref(binding)} refers to {ref['kind']} {ref['name']}, which the "
                     "chart does not render")


def _unhelm(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    labels = (out.get("metadata") or {}).get("labels")
    if labels:
        for key in HELM_LABELS:
            labels.pop(key, None)
    return out


def _without_namespace(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].pop("namespace", None)
    return out


def _pod_spec(deployment: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


def _annotations(obj: dict[str, Any]) -> dict[str, Any]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def _ns(obj: dict[str, Any]) -> str | None:
    namespace = (obj.get("metadata") or {}).get("namespace")
    return str(namespace) if namespace else None


def _ref(obj: dict[str, Any]) -> str:
    where = f" in {_ns(obj)}" if _ns(obj) else ""
    return f"{obj['kind']} {obj['metadata']['name']}{where}"


def _dump(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False, width=100)


REGISTRATION_CONFIGMAP = "model-serving-registration"
"""The bundle's ConfigMap of the add-on's registration, which the manager applies
(``--registration-source``, :mod:`addon_manager.shell.addonregistration`)."""
REGISTRATION_KEY = "registration.yaml"
REGISTRATION_KINDS = ("ClusterManagementAddOn", "AddOnTemplate")
ADDON_GROUP = "addon.open-cluster-management.io"


def registered_by_manager(bundle: Bundle) -> Bundle:
    """The bundle with the add-on's registration applied by its manager. Pure.

    A bundle cannot carry the ClusterManagementAddOn and AddOnTemplate the chart renders, so
    they move from ``hub_objects`` into ConfigMap :data:`REGISTRATION_CONFIGMAP` (key
    ``registration.yaml``); the manager's container gets ``--registration-source`` naming it,
    and its ServiceAccount the rights to read it and to create and update exactly those
    objects (create cannot be limited by name). The rest of ``hub_objects`` stays.
    """
    moved = [x.obj for x in bundle.hub_objects if x.obj["kind"] in REGISTRATION_KINDS]
    if [o["kind"] for o in moved].count("ClusterManagementAddOn") != 1:
        raise ValueError("the render has no ClusterManagementAddOn (or several) to register")
    text = "".join(f"---\n{_dump(o)}" for o in moved)
    configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": REGISTRATION_CONFIGMAP},
                 "data": {REGISTRATION_KEY: text}}
    csv = copy.deepcopy(bundle.csv)
    install = csv["spec"]["install"]["spec"]
    manager = next(d for d in install["deployments"]
                   if _pod_spec(d)["containers"][0].get("args", [None])[0] == "manager")
    _pod_spec(manager)["containers"][0]["args"].append(
        f"--registration-source={REGISTRATION_CONFIGMAP}")
    account = _pod_spec(manager).get("serviceAccountName", "default")

    def names(kind: str) -> list[str]:
        return sorted(o["metadata"]["name"] for o in moved if o["kind"] == kind)

    cluster_rules = [
        {"apiGroups": [ADDON_GROUP], "resources": ["clustermanagementaddons", "addontemplates"],
         "verbs": ["create"]},
        {"apiGroups": [ADDON_GROUP], "resources": ["clustermanagementaddons"],
         "resourceNames": names("ClusterManagementAddOn"), "verbs": ["get", "update"]},
        {"apiGroups": [ADDON_GROUP], "resources": ["addontemplates"],
         "resourceNames": names("AddOnTemplate"), "verbs": ["get", "update"]},
    ]
    ns_rules = [{"apiGroups": [""], "resources": ["configmaps"],
                 "resourceNames": [REGISTRATION_CONFIGMAP], "verbs": ["get"]}]
    for key, rules in (("clusterPermissions", cluster_rules), ("permissions", ns_rules)):
        entry = next((e for e in install[key] if e["serviceAccountName"] == account), None)
        if entry is None:
            install[key].append({"serviceAccountName": account, "rules": rules})
        else:
            entry["rules"].extend(rules)
    left = [x for x in bundle.hub_objects if x.obj["kind"] not in REGISTRATION_KINDS]
    return Bundle(csv, [*bundle.manifests, configmap], bundle.annotations, left)


NAMESPACED_BUNDLE_KINDS = frozenset({"Secret", "ConfigMap", "ServiceAccount", "Service", "Role",
                                     "RoleBinding", "PrometheusRule", "ServiceMonitor",
                                     "PodDisruptionBudget", "NetworkPolicy"})
"""The namespaced kinds of :data:`BUNDLE_KINDS`, which OLM creates in the install namespace."""


def olm_objects(bundle: Bundle, namespace: str) -> list[dict[str, Any]]:
    """What OLM creates on the cluster from ``bundle`` installed into ``namespace``. Pure.

    For the testbed, which runs no OLM: the CRDs; the other manifests (the namespaced ones in
    ``namespace``); for each ServiceAccount of the CSV, the ServiceAccount, a ClusterRole and
    ClusterRoleBinding of its ``clusterPermissions`` and a Role and RoleBinding in
    ``namespace`` of its ``permissions`` (OLM's own names differ); and the CSV's Deployments.
    An ``OwnNamespace`` install: the OperatorGroup targets ``namespace`` only.
    """
    csv_name = bundle.csv["metadata"]["name"]
    install = bundle.csv["spec"]["install"]["spec"]
    out: list[dict[str, Any]] = []
    for obj in bundle.manifests:
        placed = copy.deepcopy(obj)
        if obj["kind"] in NAMESPACED_BUNDLE_KINDS:
            placed["metadata"]["namespace"] = namespace
        out.append(placed)
    accounts = sorted({e["serviceAccountName"] for key in ("clusterPermissions", "permissions")
                       for e in install.get(key) or []})
    rbac = "rbac.authorization.k8s.io/v1"
    for account in accounts:
        out.append({"apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": account, "namespace": namespace}})
        subject = [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
        for key, role, bind in (("clusterPermissions", "ClusterRole", "ClusterRoleBinding"),
                                ("permissions", "Role", "RoleBinding")):
            for entry in install.get(key) or []:
                if entry["serviceAccountName"] != account:
                    continue
                meta: dict[str, Any] = {"name": f"{csv_name}-{account}"}
                if role == "Role":
                    meta["namespace"] = namespace
                out.append({"apiVersion": rbac, "kind": role, "metadata": dict(meta),
                            "rules": copy.deepcopy(entry["rules"])})
                out.append({"apiVersion": rbac, "kind": bind, "metadata": dict(meta),
                            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role,
                                        "name": meta["name"]},
                            "subjects": subject})
    for deployment in install["deployments"]:
        out.append({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": deployment["name"], "namespace": namespace,
                                 "labels": dict(deployment.get("label") or {})},
                    "spec": copy.deepcopy(deployment["spec"])})
    return out


def hub_objects_text(left: Sequence[LeftOut]) -> str:
    """What OLM cannot install, as one YAML stream for ``kubectl apply -f``.

    Each object comes under a comment that says why it is not in the bundle.
    """
    return "".join(f"# {item.reason}\n---\n{_dump(item.obj)}" for item in left)


def write(bundle: Bundle, out: Path) -> list[Path]:
    """Write the bundle and the objects OLM cannot install; return the files written.

    The bundle goes to ``out/bundle``, which is replaced whole, and the other objects go to
    ``out/hub-objects.yaml``.
    """
    root = out / "bundle"
    if root.exists():
        for old in sorted(root.rglob("*"), reverse=True):
            old.unlink() if old.is_file() else old.rmdir()
    written = []
    for relative, text in bundle.files().items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    hub = out / "hub-objects.yaml"
    hub.write_text(hub_objects_text(bundle.hub_objects))
    return [*written, hub]


OLM_VALUES = ("uninstallGuard.enabled=false",)
"""Values the bundle is rendered with: the uninstall guard is a Helm pre-delete hook."""


def chart_facts(chart_dir: Path, rendered: Sequence[dict[str, Any]]) -> Chart:
    """The CSV's facts from Chart.yaml and the manager Deployment's image."""
    meta = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
    manager = next(o for o in rendered if o and o["kind"] == "Deployment")
    image = _pod_spec(manager)["containers"][0]["image"]
    floor = re.match(r"\s*>=\s*v?(\d+\.\d+\.\d+)", str(meta.get("kubeVersion", "")))
    return Chart(version=str(meta["appVersion"]), image=str(image),
                 description=" ".join(str(meta["description"]).split()),
                 keywords=tuple(meta.get("keywords") or ()),
                 min_kube_version=floor.group(1) if floor else "")


def example_intents(examples_dir: Path) -> list[dict[str, Any]]:
    """The CSV's ``alm-examples``: the add-on's own kinds from ``examples/``.

    They come without their namespaces, and without the examples' Secrets and Placements.
    """
    out = []
    for path in sorted(examples_dir.glob("*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            if obj and str(obj.get("apiVersion", "")).startswith("modelserving.opendatahub.io/"):
                out.append(_without_namespace(obj))
    return out


LOG_LINE = re.compile(r'level=(?P<level>\w+) msg=(?:"(?P<msg>(?:[^"\\]|\\.)*)"|(?P<bare>\S+))')
"""A line of operator-verify's log (logrus' text format)."""


def findings(log: str) -> dict[str, list[str]]:
    """operator-verify's findings by level (``error``, ``warning``) from its log text.

    It exits 0 whatever it finds (it only logs), so the log is the verdict.
    """
    out: dict[str, list[str]] = {"error": [], "warning": []}
    for match in LOG_LINE.finditer(log):
        level = "warning" if match["level"] == "warn" else match["level"]
        if level in out:
            quoted = match["msg"]
            out[level].append(match["bare"] if quoted is None else quoted.replace('\\"', '"'))
    return out


VERIFY_FLAGS = ("--operatorhub_validate", "--object_validate")
"""operator-verify's optional validators run besides the default bundle validators (CSV, CRD,
bundle): OperatorHub's metadata checks and the bundle objects' (PodDisruptionBudget,
PriorityClass, RBAC on them)."""


def verify(bundle_dir: Path) -> dict[str, list[str]]:
    """Run operator-verify on a bundle directory; its findings (:func:`findings`).

    Raises RuntimeError with its output when it cannot load the bundle (exit status 1).
    """
    import subprocess

    from testbed.build import binary

    proc = subprocess.run([str(binary("operator-verify")), "manifests", str(bundle_dir),
                           *VERIFY_FLAGS], capture_output=True, text=True, timeout=120,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"operator-verify could not load {bundle_dir}:\n"
                           f"{proc.stdout}{proc.stderr}")
    return findings(proc.stdout + proc.stderr)


def main(argv: Sequence[str]) -> int:
    """``python -m testbed.olm --out DIR`` (``make olm-bundle``): write the chart's bundle.

    The chart is rendered by the testbed's helm; the hub objects are written beside the bundle.
    """
    from testbed import chart

    parser = argparse.ArgumentParser(prog="python -m testbed.olm")
    parser.add_argument("--out", type=Path, required=True, help="directory to write into")
    parser.add_argument("--set", action="append", default=[], dest="sets",
                        help="a chart value, as helm --set takes it (repeatable)")
    parser.add_argument("--verify", action="store_true",
                        help="then run operator-verify on it; exit 1 on any error it reports")
    args = parser.parse_args(list(argv))
    rendered = chart.render(*OLM_VALUES, *args.sets, namespace=INSTALL_NAMESPACE)
    bundle = registered_by_manager(make_bundle(
        rendered, chart_facts(chart.CHART, rendered),
        examples=example_intents(chart.CHART.parent.parent / "examples")))
    for path in write(bundle, args.out):
        print(path)
    if not args.verify:
        return 0
    found = verify(args.out / "bundle")
    for level in ("error", "warning"):
        for message in found[level]:
            print(f"operator-verify {level}: {message}")
    print(f"operator-verify: {len(found['error'])} errors, {len(found['warning'])} warnings")
    return 1 if found["error"] else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
