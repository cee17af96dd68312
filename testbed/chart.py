"""The add-on's Helm chart as the testbed uses it: rendered by the real helm binary.

What the chart renders is what the testbed runs: the manager's ServiceAccount and RBAC on
the hub, and the AddOnTemplate's agent ServiceAccount, RBAC and CRDs on the spokes.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from testbed import documents, versions
from testbed.build import binary

CHART = Path(__file__).resolve().parent.parent / "charts" / "model-serving-addon"
RELEASE = "msa"
AGENT_SERVICE_ACCOUNT = "model-serving-agent"
MANAGER_SERVICE_ACCOUNT = "model-serving-addon-manager"
KUBE_VERSION = ("--kube-version", versions.KUBERNETES)
"""``helm template`` renders for the testbed's Kubernetes: without it, helm assumes v1.20, which
the chart's ``kubeVersion`` refuses."""


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run helm; raise with its stderr when ``check`` and it fails."""
    proc = subprocess.run([str(binary("helm")), *args], capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{proc.stderr}")
    return proc


def render(*sets: str, namespace: str = "model-serving-system") -> list[dict[str, Any]]:
    """``helm template`` with ``--set`` values; the rendered objects (CRDs included).

    New objects on each call (callers rewrite them); helm runs once per process for the same
    values, and the output is parsed once (:mod:`testbed.documents`).
    """
    return [d for d in documents.load_all(_rendered(sets, namespace)) if d]


@functools.lru_cache(maxsize=64)
def _rendered(sets: tuple[str, ...], namespace: str) -> str:
    """What ``helm template`` prints for these values (the chart does not change in a run)."""
    args = ["template", RELEASE, str(CHART), "-n", namespace, "--include-crds", *KUBE_VERSION]
    for s in sets:
        args += ["--set", s]
    return helm(*args).stdout


def agent_config_spec(objs: list[dict[str, Any]]) -> dict[str, Any]:
    """The spec the manager writes into the add-on's default AddOnDeploymentConfig.

    It is the chart's ``<name>-agent-config`` ConfigMap; the manager adds its verify key.
    """
    config_map = next(o for o in objs if o["kind"] == "ConfigMap"
                      and o["metadata"]["name"].endswith("-agent-config"))
    spec: dict[str, Any] = yaml.safe_load(config_map["data"]["spec.yaml"])
    return spec


PRE_DELETE_HOOK = "addon.open-cluster-management.io/addon-pre-delete"
"""OCM's annotation of a hook manifest: applied only when the add-on is being disabled."""


def agent_manifests(install_namespace: str, *sets: str) -> list[dict[str, Any]]:
    """The AddOnTemplate's agent manifests as OCM deploys them into ``install_namespace``.

    Not the pre-delete hook (:data:`PRE_DELETE_HOOK`): OCM applies it only when the add-on is
    disabled.

    OCM's template add-on rewrites the namespace of namespaced manifests, the Namespace
    object and ServiceAccount subjects of bindings to the install namespace; the same
    rewrite happens here.
    """
    template = next(o for o in render(*sets) if o["kind"] == "AddOnTemplate")
    manifests: list[dict[str, Any]] = [
        m for m in template["spec"]["agentSpec"]["workload"]["manifests"]
        if PRE_DELETE_HOOK not in ((m.get("metadata") or {}).get("annotations") or {})]
    for m in manifests:
        meta = m["metadata"]
        if m["kind"] == "Namespace":
            meta["name"] = install_namespace
        elif "namespace" in meta:
            meta["namespace"] = install_namespace
        for subject in m.get("subjects") or []:
            if subject.get("kind") == "ServiceAccount":
                subject["namespace"] = install_namespace
    return manifests


def readme(write: bool = False) -> str:
    """The chart's README as helm-docs makes it (``values.yaml``, ``README.md.gotmpl``).

    Written to the chart's ``README.md`` when ``write``.
    """
    args = [str(binary("helm-docs")), "--chart-search-root", str(CHART.parent),
            "--chart-to-generate", str(CHART), "--sort-values-order", "file",
            "--skip-version-footer", "--log-level", "warning"]
    if not write:
        args.append("--dry-run")
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0 or (not write and not proc.stdout.strip()):
        raise AssertionError(f"helm-docs failed:\n{proc.stderr}")
    return proc.stdout if not write else (CHART / "README.md").read_text()


def main(argv: list[str]) -> int:
    """``python -m testbed.chart docs``: regenerate the chart's README (``make chart-docs``)."""
    if argv != ["docs"]:
        print("usage: python -m testbed.chart docs", file=sys.stderr)
        return 2
    readme(write=True)
    print(f"wrote {CHART / 'README.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
