"""What the cluster shows that the agent's decisions read (I/O, reads only).

Every function here reads the cluster and
hands what it found to a pure module (:mod:`addon_agent.pure.planning`,
:mod:`addon_agent.pure.ownership`, :mod:`addon_agent.pure.removal`, :mod:`addon_agent.pure.status`);
nothing here writes.
"""

from __future__ import annotations

from typing import Any

from addon_agent import labels as lb
from addon_agent.io.crd_cache import CrdCache
from addon_agent.io.inventory import Ref
from addon_agent.io.kube import Kube
from addon_agent.pure import ownership, removal, status
from addon_agent.pure.planning import ClusterFacts, Plan
from addon_agent.stacks import Stack

Obj = dict[str, Any]


class Observer:
    """Reads of the cluster for one agent (CRDs through the shared :class:`CrdCache`)."""

    def __init__(self, kube: Kube, crds: CrdCache) -> None:
        self.kube = kube
        self.crds = crds

    def facts(self) -> ClusterFacts:
        """What is installed on the cluster that changes the plan."""
        return ClusterFacts(
            cert_manager=self.crd_established("certificates.cert-manager.io"),
            prometheus_operator=self.crd_established("servicemonitors.monitoring.coreos.com"),
            service_ca=self.crd_established("servicecas.operator.openshift.io"),
            assigns_users=self.crd_established(
                "securitycontextconstraints.security.openshift.io"),
        )

    def crd_established(self, name: str) -> bool:
        """Whether the CRD ``name`` is Established.

        A GET of the CRD, not discovery: the discovery cache may lag behind CRD changes.
        """
        return status.condition_true(self.crds.get(name), "Established")

    def find_installation(self, stack: Stack) -> ownership.Installation:
        """What of ``stack`` the cluster runs, whoever installed it.

        Its key CRD, its controller Deployments in any namespace and their namespace's
        configuration ConfigMap (see :mod:`addon_agent.pure.ownership`). The CRD is read as
        it is now (whose it is decides), through the cache: a metadata read each resync, the
        whole CRD (a megabyte for KServe's InferenceService) only once it changed.
        """
        crd = self.crds.get(ownership.KEY_CRDS[stack.platform], cached=False)
        deployments = self.kube.list("apps/v1", "Deployment",
                                     field_selector=f"metadata.name={stack.controller}")
        configs = [cm for ns in sorted({d["metadata"].get("namespace") for d in deployments})
                   if (cm := self.kube.get("v1", "ConfigMap", ownership.CONFIGS[stack.platform],
                                           ns)) is not None]
        return ownership.installation(stack, [crd] if crd else [], deployments, configs)

    def controllers(self, the_plan: Plan) -> dict[str, Obj | None]:
        """The plan's Deployments as the cluster shows them now, by name (None: missing)."""
        return {name: self.kube.get("apps/v1", "Deployment", name, ns)
                for ns, name in the_plan.controllers()}

    def crds_of(self, the_plan: Plan) -> dict[str, Obj | None]:
        """The plan's CRDs as the cluster shows them (through the cache), by name."""
        return {n: self.crds.get(n) for n in the_plan.crd_names()}

    def components(self, controllers: list[tuple[str, str]]) -> dict[str, bool]:
        """Whether each of the ``(namespace, name)`` Deployments is available (metrics)."""
        return {
            n: status.deployment_available(self.kube.get("apps/v1", "Deployment", n, ns))
            for ns, n in controllers
        }

    def stack_instances(self, refs: list[Ref]) -> list[removal.Instance]:
        """Objects of every kind the stack's CRDs serve, marked as in the inventory or not.

        The kinds are those of the inventory's CRDs (the bundle's, as installed) and
        InferenceService (whoever installed its CRD); each object says whether its CRD is the
        agent's, i.e. whether the uninstall deletes it.
        """
        own = {(r.kind, r.namespace, r.name) for r in refs}
        names = {r.name for r in refs if r.kind == "CustomResourceDefinition"}
        out: list[removal.Instance] = []
        for name in sorted(names | {removal.ISVC_CRD}):
            crd = self.crds.get(name, cached=False)
            if crd is None:
                continue
            spec = crd.get("spec") or {}
            served = [v for v in spec.get("versions") or [] if v.get("served")]
            if not served:
                continue
            version = next((v for v in served if v.get("storage")), served[0])["name"]
            api, kind = f"{spec['group']}/{version}", spec["names"]["kind"]
            if not self.kube.served(api, kind):
                continue
            ours = lb.is_ours(crd) and name in names
            for obj in self.kube.list(api, kind):
                meta = obj.get("metadata") or {}
                key = (kind, meta.get("namespace") or "", meta.get("name"))
                out.append(removal.instance_of(obj, name, own=key in own, crd_ours=ours))
        return out

    def namespaces_to_delete(self, refs: list[Ref]) -> list[str]:
        """Namespaces of the inventory that an uninstall deletes (they are the agent's)."""
        out = []
        for ref in refs:
            if ref.kind == "Namespace":
                ns = self.kube.get("v1", "Namespace", ref.name)
                if ns is not None and lb.is_ours(ns):
                    out.append(ref.name)
        return out
