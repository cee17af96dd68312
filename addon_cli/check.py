"""``check``: whether the hub is ready for the add-on and the add-on works (pure: no I/O).

Each check judges what the command read (or the error reading it) into one line: OK, WARN or
FAIL, what was seen, and what to do. A read the user may not make is UNKNOWN, never a
failure: a viewer sees what a viewer may.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from addon_api import constants as c

State = Literal["OK", "WARN", "FAIL", "UNKNOWN"]

MIN_KUBERNETES = (1, 30)
"""The chart's ``kubeVersion`` (its ValidatingAdmissionPolicy is admissionregistration v1)."""

OCM_APIS: Mapping[str, Sequence[str]] = {
    "cluster.open-cluster-management.io/v1": ("managedclusters",),
    "cluster.open-cluster-management.io/v1beta1": ("placements", "placementdecisions"),
    "cluster.open-cluster-management.io/v1beta2": ("managedclustersetbindings",),
    "work.open-cluster-management.io/v1": ("manifestworks",),
    "addon.open-cluster-management.io/v1alpha1": (
        "clustermanagementaddons", "managedclusteraddons", "addontemplates",
        "addondeploymentconfigs"),
}
"""The OCM resources the add-on uses, by API group version."""

HUB_KINDS = ("modelservings", "storageconnections", "multiclusterservingruntimes",
             "multiclusterinferenceservices")


@dataclass(frozen=True)
class Check:
    """One line of ``check``."""

    name: str
    state: State
    seen: str
    todo: str = ""


class Unreadable(Exception):
    """A read ``check`` could not make (refused, missing, unreachable): its message."""


def kubernetes(git_version: str) -> Check:
    """The hub's Kubernetes version against the chart's minimum."""
    found = re.match(r"v?(\d+)\.(\d+)", git_version)
    if not found:
        return Check("hub Kubernetes version", "UNKNOWN", f"version {git_version!r}")
    have = (int(found.group(1)), int(found.group(2)))
    need = ".".join(map(str, MIN_KUBERNETES))
    if have < MIN_KUBERNETES:
        return Check("hub Kubernetes version", "FAIL", f"{git_version}, older than {need}",
                     f"the chart needs Kubernetes {need} or newer (its admission policy)")
    return Check("hub Kubernetes version", "OK", git_version)


def apis(served: Mapping[str, Iterable[str] | Unreadable]) -> list[Check]:
    """The OCM APIs and the add-on's own, from discovery (group version -> resources)."""
    out = []
    wanted = {**OCM_APIS, f"{c.GROUP}/{c.VERSION}": HUB_KINDS}
    for group_version, names in wanted.items():
        got = served.get(group_version)
        own = group_version.startswith(c.GROUP)
        label = "the add-on's hub CRDs" if own else f"OCM API {group_version}"
        if isinstance(got, Unreadable) or got is None:
            todo = ("install the chart (helm install): it installs the CRDs" if own else
                    "install OCM's hub (clusteradm init, or ACM) before the add-on")
            out.append(Check(label, "FAIL", f"not served ({got or 'absent'})", todo))
            continue
        missing = sorted(set(names) - set(got))
        if missing:
            out.append(Check(label, "FAIL", "missing " + ", ".join(missing),
                             "upgrade OCM: the add-on uses these resources" if not own else
                             "re-apply the chart's CRDs (docs/operations.md)"))
        else:
            out.append(Check(label, "OK", ", ".join(names)))
    return out


def executor(schema: Mapping[str, Any] | Unreadable) -> Check:
    """Whether the hub's ManifestWorks have ``spec.executor`` (tenants' works run as them)."""
    name = "ManifestWork executor"
    if isinstance(schema, Unreadable):
        return Check(name, "UNKNOWN", str(schema),
                     "bind model-serving-addon-work-reader to read the ManifestWork schema")
    spec = ((schema.get("properties") or {}).get("spec") or {}).get("properties") or {}
    if "executor" not in spec:
        return Check(name, "FAIL", "the ManifestWork schema has no spec.executor",
                     "upgrade OCM: tenants' works are applied as their own identity through it")
    return Check(name, "OK", "spec.executor served")


def registration(cma: Mapping[str, Any] | Unreadable) -> Check:
    """The add-on's ClusterManagementAddOn: the chart is installed, and which version."""
    name = f"add-on registration (ClusterManagementAddOn {c.ADDON_NAME})"
    if isinstance(cma, Unreadable):
        missing = "not found" in str(cma)
        return Check(name, "FAIL" if missing else "UNKNOWN", str(cma),
                     "install the chart (docs/hub-setup.md)" if missing else "")
    labels = (cma.get("metadata") or {}).get("labels") or {}
    return Check(name, "OK", f"chart {labels.get('helm.sh/chart', 'unknown')}")


def manager(intents: Sequence[Mapping[str, Any]] | Unreadable) -> Check:
    """Whether the manager keeps up: every intent's current generation seen."""
    name = "manager keeps up with the intents"
    if isinstance(intents, Unreadable):
        return Check(name, "UNKNOWN", str(intents))
    behind = [f"{(i.get('metadata') or {}).get('namespace')}/"
              f"{(i.get('metadata') or {}).get('name')}" for i in intents
              if (i.get("status") or {}).get("observedGeneration")
              != (i.get("metadata") or {}).get("generation")]
    if not intents:
        return Check(name, "OK", "no intents yet")
    if behind:
        shown = ", ".join(sorted(behind)[:5]) + (" ..." if len(behind) > 5 else "")
        return Check(name, "WARN", f"{len(behind)} of {len(intents)} not seen yet: {shown}",
                     "if it stays, the manager is not running or not leading: kubectl -n "
                     "RELEASE_NAMESPACE logs deployment/model-serving-addon-manager")
    return Check(name, "OK", f"{len(intents)} intent(s), each current generation seen")


def clusters(addons: Sequence[Mapping[str, Any]] | Unreadable) -> Check:
    """The add-on's health on each cluster where it is enabled."""
    name = "add-on on the clusters"
    if isinstance(addons, Unreadable):
        return Check(name, "UNKNOWN", str(addons))
    if not addons:
        return Check(name, "WARN", "enabled on no cluster",
                     "enable it (docs/hub-setup.md, step 2), or create a ModelServing")
    down = []
    for addon in addons:
        conds = (addon.get("status") or {}).get("conditions") or []
        available: Mapping[str, Any] = next(
            (x for x in conds if x.get("type") == "Available"), {})
        if available.get("status") != "True":
            down.append(f"{(addon.get('metadata') or {}).get('namespace')} "
                        f"({available.get('reason') or 'no Available condition'})")
    if down:
        return Check(name, "FAIL", f"not available on {len(down)} of {len(addons)}: "
                     + ", ".join(sorted(down)),
                     "see the cluster's agent: model-serving-addon clusters, and the "
                     "agent's pod in its install namespace")
    return Check(name, "OK", f"available on {len(addons)} cluster(s)")


def failed(checks: Iterable[Check]) -> bool:
    """Whether any check failed (``check`` exits 1)."""
    return any(x.state == "FAIL" for x in checks)
