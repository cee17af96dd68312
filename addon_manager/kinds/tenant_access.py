"""A tenant's access work, and tenant works applied as the tenant's executor identity.

The spoke half of the namespace policy.

Works carrying a tenant's objects (StorageConnection, MultiClusterServingRuntime and
MultiClusterInferenceService works) name an executor in ``spec.executor``: ServiceAccount
``model-serving-tenant-<hub namespace>`` in the cluster's agent namespace. OCM's work agent
checks, with a SubjectAccessReview per manifest (get, create, update, patch and delete), that
the executor may write each object before it applies it, and refuses the manifest otherwise.

The executor and its rights come from one more work per (tenant, cluster), rendered here from
the policy and applied with the work agent's own identity: the ServiceAccount, and in each
spoke namespace the tenant may target a Role for exactly the kinds its works carry
(ServingRuntimes, InferenceServices) with its RoleBinding; in the agent namespace a Role for
SealedStorageConnections (whose targets the agent checks again, see
:mod:`addon_agent.pure.tenancy`). A forged work that names the executor and targets any other
namespace is refused by the work agent itself.

Pure, like every kind module: its render, gate (:func:`access_waits`), what its fact keeps
(:func:`details`, the namespaces granted) and its spec in the registry.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from addon_api import constants as c
from addon_api import tenancy
from addon_api.hashing import short_hash
from addon_api.reasons import ClusterReason
from addon_manager.facts import canonical, naming
from addon_manager.facts.records import WorkDetails, WorkFact
from addon_manager.kinds import render
from addon_manager.kinds.base import HelperSpec, Wait

ACCESS_KIND = tenancy.ACCESS_KIND
"""Owner kind label of the per-(tenant, cluster) work holding the executor and its RBAC."""
ACCESS_NAME = "access"
"""Owner name label of that work (the owner namespace label is the tenant's hub namespace)."""
WAITING_FOR_ACCESS = ClusterReason.WAITING_FOR_TENANT_ACCESS
"""Wait reason: the tenant's executor and RBAC are not applied on the cluster yet."""
EXECUTOR_VERBS = ["get", "create", "update", "patch", "delete"]
"""What OCM's work agent asks a SubjectAccessReview for, per manifest of a work it owns."""
TENANT_RULES = [
    {"apiGroups": ["serving.kserve.io"], "resources": ["servingruntimes", "inferenceservices"],
     "verbs": EXECUTOR_VERBS},
    {"apiGroups": ["route.openshift.io"], "resources": ["routes"], "verbs": EXECUTOR_VERBS},
    {"apiGroups": ["route.openshift.io"], "resources": ["routes/custom-host"],
     "verbs": ["create", "update"]},
    {"apiGroups": ["multicluster.x-k8s.io"], "resources": ["serviceexports"],
     "verbs": EXECUTOR_VERBS},
]
"""The executor's rights in each spoke namespace its tenant may target."""
SEALED_RULES = [
    {"apiGroups": [c.GROUP], "resources": ["sealedstorageconnections"], "verbs": EXECUTOR_VERBS},
]
"""The executor's rights in the agent namespace (sealed connections live there)."""


def access_work_name(hub_namespace: str) -> str:
    """Name of the access work of tenant ``hub_namespace`` in a cluster namespace."""
    return naming.bounded(f"model-serving-tenant-{hub_namespace}",
                          short_hash("tenant", hub_namespace, length=naming.NAME_HASH))


def executor(agent_namespace: str, name: str) -> dict[str, Any]:
    """A ManifestWork ``spec.executor`` naming ServiceAccount ``agent_namespace/name``."""
    return {"subject": {"type": "ServiceAccount",
                        "serviceAccount": {"namespace": agent_namespace, "name": name}}}


def with_executor(work: render.RenderedWork, agent_namespace: str, name: str
                  ) -> render.RenderedWork:
    """``work`` applied as ServiceAccount ``agent_namespace/name``, its render hash updated.

    Keyed as :func:`addon_manager.kinds.render.manifest_work` keys it: a work carrying sealed
    data keeps an HMAC render-hash under the manager's hash key.
    """
    body = copy.deepcopy(work.body)
    body["spec"]["executor"] = executor(agent_namespace, name)
    body["metadata"]["annotations"] = {}
    key = work.seal_inputs.hash_key if work.seal_inputs is not None else b""
    digest = canonical.keyed_canonical_hash(key, body) if key else canonical.canonical_hash(body)
    body["metadata"]["annotations"][c.ANNOTATION_RENDER_HASH] = digest
    return replace(work, body=body, render_hash=digest)


def _rbac(kind: str, name: str, namespace: str, labels: dict[str, str],
          **rest: Any) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
            "metadata": {"name": name, "namespace": namespace, "labels": labels}, **rest}


def access_manifests(
    hub_namespace: str, agent_namespace: str, targets: frozenset[str]
) -> list[dict[str, Any]]:
    """The executor ServiceAccount and its Roles and RoleBindings (targets sorted)."""
    sa = tenancy.executor_name(hub_namespace)
    labels = render.owner_labels(ACCESS_KIND, hub_namespace, ACCESS_NAME)
    subject = [{"kind": "ServiceAccount", "name": sa, "namespace": agent_namespace}]
    out: list[dict[str, Any]] = [{
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": sa, "namespace": agent_namespace, "labels": labels},
    }]
    for namespace, rules in [(agent_namespace, SEALED_RULES),
                             *((t, TENANT_RULES) for t in sorted(targets))]:
        out.append(_rbac("Role", sa, namespace, labels, rules=rules))
        out.append(_rbac("RoleBinding", sa, namespace, labels, subjects=subject, roleRef={
            "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa}))
    return out


def render_access(
    hub_namespace: str, cluster: str, agent_namespace: str, targets: frozenset[str],
    denied: frozenset[str] = frozenset(),
) -> render.RenderedWork:
    """The access work of a tenant for one cluster (applied as the work agent itself).

    ``targets`` are the spoke namespaces the policy allows the tenant, always-denied ones
    left out (they get no RoleBinding even if an admin lists them).
    """
    allowed = frozenset(t for t in targets
                        if not tenancy.always_denied(t, agent_namespace, denied))
    return render.manifest_work(  # the common shape of a work
        ACCESS_KIND, hub_namespace, ACCESS_NAME, cluster,
        access_manifests(hub_namespace, agent_namespace, allowed), [],
        work_name=access_work_name(hub_namespace),
    )


def access_waits(
    hub_namespace: str, want: render.RenderedWork, have: WorkFact | None,
    needed: frozenset[str],
) -> list[Wait]:
    """What a tenant work waits for on one cluster: its executor granted where it writes.

    That is the access work applied in its current form, with the executor's RoleBinding
    applied in every namespace of ``needed`` (where the tenant work puts objects).

    OCM's work agent checks the executor's rights (SubjectAccessReview) before it applies a
    tenant work and, when refused, retries only a minute later: a work sent before its grant
    is in place sits refused for that minute. A grant in a namespace that does not exist on
    the cluster is never applied: the tenant work waits, and the message says where.
    """
    current = _current(have, want)
    missing = sorted(needed - have.granted) if current and have is not None else sorted(needed)
    if current and not missing:
        return []
    where = (f" in namespace {', '.join(missing)} (it must exist on the cluster)"
             if current and missing else "")
    return [Wait(WAITING_FOR_ACCESS,
                 f"tenant identity {tenancy.executor_name(hub_namespace)} granted{where}")]


GRANT_RETRY_SECONDS = 15.0
"""How often a tenant work waiting for a grant that failed to apply asks the work agent to try
the access work again (see :func:`grant_retry_due`)."""
LABEL_GRANT_RETRY = f"{c.GROUP}/grant-retry"
"""Label of an access work changed to make OCM's work agent apply it again at once."""


def grant_retry_due(have: WorkFact | None, want: render.RenderedWork,
                    needed: frozenset[str]) -> bool:
    """Whether the work agent should be asked to apply the access work again.

    That is: the work is current, the work agent reports it failed, and a grant the tenant
    work needs is among what failed.

    OCM's work agent retries a failing work with exponential backoff (up to minutes), so a
    namespace created on the cluster after the grant first failed (a stack that creates its
    serving namespaces, an admin who creates one) would wait that long. A change of the work's
    labels makes the work agent process it at once and resets that backoff.
    """
    return (_current(have, want) and have is not None and have.applied == "False"
            and bool(needed - have.granted))


def _current(have: WorkFact | None, want: render.RenderedWork) -> bool:
    """Whether the access work on the cluster is the one wanted and the work agent has seen it."""
    return (have is not None and have.render_hash == want.render_hash and not have.deleting
            and not have.unobserved)


def with_retry_label(work: render.RenderedWork, stamp: str) -> render.RenderedWork:
    """``work`` with :data:`LABEL_GRANT_RETRY` set to ``stamp`` (its render hash unchanged)."""
    body = copy.deepcopy(work.body)
    body["metadata"].setdefault("labels", {})[LABEL_GRANT_RETRY] = stamp
    return replace(work, body=body)


def work_namespaces(work: render.RenderedWork) -> frozenset[str]:
    """The spoke namespaces a work puts objects in."""
    manifests = (work.body.get("spec") or {}).get("workload", {}).get("manifests") or []
    return frozenset(str(m["metadata"]["namespace"]) for m in manifests
                     if (m.get("metadata") or {}).get("namespace"))


def unused_access(access: list[WorkFact], tenant_works: list[WorkFact],
                  exclude: tuple[str, str, str] | None = None) -> list[WorkFact]:
    """Access works of a tenant on clusters where no other tenant work of it remains."""
    used = {w.cluster for w in tenant_works if w.owner != exclude and not w.deleting}
    return [w for w in access if w.cluster not in used and not w.deleting]


def granted_namespaces(status: Mapping[str, Any]) -> frozenset[str]:
    """Namespaces of the RoleBindings a work's manifests report as applied (Applied True)."""
    out = set()
    for manifest in (status.get("resourceStatus") or {}).get("manifests") or []:
        meta = manifest.get("resourceMeta") or {}
        conds = {str(x.get("type")): x for x in manifest.get("conditions") or []}
        if (meta.get("kind") == "RoleBinding" and meta.get("namespace")
                and conds.get("Applied", {}).get("status") == "True"):
            out.add(str(meta["namespace"]))
    return frozenset(out)


def details(work: Mapping[str, Any]) -> WorkDetails:
    """What an access work's fact keeps: where its RoleBindings are applied."""
    return WorkDetails(granted=granted_namespaces(work.get("status") or {}))


SPEC = HelperSpec(ACCESS_KIND, details, read_by=lambda spec: spec.tenant)
"""The registry's entry: what a tenant applies reads its access works."""
