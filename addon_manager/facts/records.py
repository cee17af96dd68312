"""What the manager knows about ManifestWorks, ManagedClusters and add-ons, as records.

A :class:`WorkFact` is small and immutable, read from a work's labels, spec and status; the
work informer's store (:mod:`addon_manager.shell.informers`) holds one per work the add-on
owns, so nothing in the hot path lists ManifestWorks. :class:`ClusterFact` and
:class:`AddonFact` are kept the same way for ManagedClusters and the add-on's
ManagedClusterAddOns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from addon_api import constants as c
from addon_api.reasons import ClusterReason

FeedbackValue = str | int | bool
CLUSTER_AVAILABLE = "ManagedClusterConditionAvailable"


@dataclass(frozen=True)
class WorkFact:
    """One ManifestWork the add-on owns, as last seen."""

    name: str
    cluster: str
    """Cluster namespace of the work (the ManagedCluster's name)."""
    kind: str
    """Owner kind (label): a hub kind, or a helper work's (agent identity, tenant access)."""
    intent_namespace: str
    intent_name: str
    render_hash: str
    deleting: bool = False
    applied: str = "Unknown"
    """Status of the work's Applied condition (True, False or Unknown)."""
    available: str = "Unknown"
    """Status of the work's Available condition."""
    reason: str = ""
    """Reason of the first condition that is not True (or of Applied)."""
    message: str = ""
    feedback: tuple[tuple[str, FeedbackValue], ...] = ()
    """Status feedback values of the manifests, by rule name (first manifest wins)."""
    generation: int | None = None
    """metadata.generation of the work (bumped by the API server on every spec change)."""
    observed_generation: int | None = None
    """Lowest observedGeneration of the work's Applied/Available conditions (None when they
    carry none: nothing to compare, the report counts as current)."""
    reported: bool = False
    """Whether the work agent has written any condition on the work."""
    spec_time: datetime | None = None
    """When the manager last changed the work (its managedFields entry), else its creation."""
    identity_source: str = ""
    """For an identity work: ``namespace/name`` of the ConfigMap it reads when it has exactly
    the shape the manager renders (one ConfigMap, ReadOnly, the identity feedback rules and
    nothing else); "" otherwise, and for every other work."""
    granted: frozenset[str] = frozenset()
    """For a tenant's access work: the spoke namespaces whose RoleBinding the work agent
    reports applied (the executor may act there); empty for every other work."""
    objects: frozenset[str] = frozenset()
    """What a tenant work claims on its cluster (:func:`claimed_objects`): its spoke objects
    as ``resource/namespace/name``, and ``storage-config/<namespace>`` for each namespace a
    StorageConnection writes credentials into."""
    revision: int | None = None
    """The intent revision the work renders (progressive rollouts; None: not marked)."""
    resource_version: int = field(default=0, compare=False)
    """metadata.resourceVersion as a number (0: unknown). Not part of equality: a write that
    changes nothing the manager reads is no change. The store uses it to never take an older
    view of a work over a newer one (see :meth:`addon_manager.shell.informers.WorkStore.put`)."""

    @property
    def unobserved(self) -> bool:
        """Whether the work agent has not yet picked up the current spec of the work."""
        if self.generation is None:
            return False
        if not self.reported:
            return True
        return self.observed_generation is not None and self.observed_generation < self.generation

    @property
    def owner(self) -> tuple[str, str, str]:
        """(kind, namespace, name) of the owning intent."""
        return self.kind, self.intent_namespace, self.intent_name

    def value(self, name: str) -> FeedbackValue | None:
        """The fed-back value named ``name``, if any."""
        for key, val in self.feedback:
            if key == name:
                return val
        return None


def parse_time(value: object) -> datetime | None:
    """An API timestamp (RFC 3339, ``Z``) as an aware datetime; None when absent or invalid."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _spec_time(meta: Mapping[str, Any]) -> datetime | None:
    times = [
        parse_time(entry.get("time"))
        for entry in meta.get("managedFields") or []
        if entry.get("manager") == c.FIELD_MANAGER and entry.get("subresource", "") == ""
    ]
    found = [t for t in times if t is not None]
    return max(found) if found else parse_time(meta.get("creationTimestamp"))


def owner_of(labels: Mapping[str, str]) -> tuple[str, str, str] | None:
    """(kind, namespace, name) from a ManifestWork's owner labels, or None if not ours."""
    if labels.get(c.LABEL_MANAGED_BY) != c.FIELD_MANAGER:
        return None
    kind = labels.get(c.LABEL_INTENT_KIND)
    ns = labels.get(c.LABEL_INTENT_NAMESPACE)
    name = labels.get(c.LABEL_INTENT_NAME)
    if not kind or ns is None or name is None:
        return None
    return kind, ns, name


def _field_value(raw: Mapping[str, Any]) -> FeedbackValue | None:
    kind = raw.get("type")
    if kind == "String":
        return str(raw.get("string", ""))
    if kind == "Integer":
        return int(raw.get("integer", 0))
    if kind == "Boolean":
        return bool(raw.get("boolean", False))
    return None


_FORBIDDEN = re.compile(
    r'User "(?P<user>[^"]+)" cannot (?P<verb>\w+) resource "(?P<resource>[^"]+)"'
    r' in API group "(?P<group>[^"]*)"'
)


WAITING_FOR_SPOKE = ClusterReason.WAITING_FOR_SPOKE
"""A manifest refused for a reason that passes as the cluster finishes setting up."""
_NO_KIND = re.compile(
    r"doesn't have a resource type|no matches for kind|could not find the requested resource",
    re.IGNORECASE)
"""How the spoke says it serves no such kind at all."""
_SSA_CONFLICT = re.compile(
    r'conflicts? with "(?P<manager>[^"]+)"(?: with subresource "[^"]*")?(?: using [^:\s]+)?:'
    r'\s*(?:- )?(?P<field>\S+)'
)
"""The spoke API server's refusal of a server-side apply without force: another field
manager owns a field the work would change (``Apply failed with N conflict(s): ...``)."""
_ESTABLISHING = re.compile(
    r"failed calling webhook .*(connection refused|no endpoints available|i/o timeout"
    r"|context deadline exceeded|service \S+ not found)"
    r"|no matches for kind|could not find the requested resource",
    re.IGNORECASE | re.DOTALL,
)


def manifest_failure(
    cluster: str, status: Mapping[str, Any]
) -> tuple[ClusterReason, str] | None:
    """Reason and message for the first manifest the work agent could not apply.

    OCM's work-level condition only says "Failed to apply manifest work"; the manifest's own
    Applied condition carries the spoke API server's error. A Forbidden error becomes
    ``ApplyForbidden`` naming the cluster, the verb, the resource and the object, so a
    missing RBAC rule on the spoke is visible on the hub; any other refusal is
    ``ApplyFailed`` with the spoke's message (which names the offending field). A refusal
    that the cluster's own setup will end (the stack's admission webhook not serving yet, the
    kind's CRD not established yet) is ``WaitingForSpoke``: still being established, not
    failed. A model's Route on a cluster without the Route API is ``NoRouteApi`` (not
    exposed there; the model counts by its own state); one the Route API refused is
    ``RouteNotCreated``. A model's ServiceExport (spec.endpoint.serviceExport) that was not
    applied, for whatever reason, is ``NoServiceExportApi`` (no MCS API there) or
    ``ServiceExportNotCreated``: the model counts by its own state either way.
    """
    for manifest in (status.get("resourceStatus") or {}).get("manifests") or []:
        conds = {str(x.get("type")): x for x in manifest.get("conditions") or []}
        applied = conds.get("Applied")
        if applied is None or applied.get("status") != "False":
            continue
        meta = manifest.get("resourceMeta") or {}
        where = "/".join(p for p in (meta.get("namespace"), meta.get("name")) if p)
        what = f"{meta.get('kind', 'object')} {where}".strip()
        error = str(applied.get("message", ""))
        if meta.get("kind") == "ServiceExport" and meta.get("group") == "multicluster.x-k8s.io":
            # Whatever stops the export, the model serves: it counts by its own state.
            if _NO_KIND.search(error):
                return ClusterReason.NO_SERVICE_EXPORT_API, (
                    f"not exported: cluster {cluster} has no Multi-Cluster Services API "
                    "(multicluster.x-k8s.io ServiceExport); the model serves inside the cluster "
                    "and through the fleet endpoint's other routers")
            return ClusterReason.SERVICE_EXPORT_NOT_CREATED, (
                f"not exported: cluster {cluster}: {what} was not created (the model serves "
                f"inside the cluster): {error}")
        forbidden = _FORBIDDEN.search(error)
        if forbidden is not None:
            group = forbidden["group"]
            resource = forbidden["resource"] + (f".{group}" if group else "")
            return ClusterReason.APPLY_FORBIDDEN, (
                f"cluster {cluster}: {forbidden['user']} may not {forbidden['verb']} "
                f"{resource} ({what}); grant it on the managed cluster (see "
                f"docs/troubleshooting.md#applyforbidden): {error}"
            )
        if meta.get("kind") == "Route" and meta.get("group") == "route.openshift.io":
            if _NO_KIND.search(error):
                return ClusterReason.NO_ROUTE_API, (
                    f"not exposed: cluster {cluster} has no Route API (route.openshift.io); "
                    "the model serves inside the cluster only")
            return ClusterReason.ROUTE_NOT_CREATED, (
                f"cluster {cluster}: {what} was not created, the model is not reachable from "
                f"outside the cluster (it serves inside it): {error}")
        owned = _SSA_CONFLICT.search(error)
        if owned is not None:
            return ClusterReason.SPOKE_OBJECT_OWNED, (
                f"cluster {cluster}: {what} exists there and {owned['field']} is owned by "
                f"{owned['manager']!r}, not by the add-on: not overwritten (delete it on the "
                f"cluster, or rename the intent): {error}"
            )
        if _ESTABLISHING.search(error):
            return WAITING_FOR_SPOKE, (
                f"cluster {cluster}: {what} not applied yet, the cluster is still setting up "
                f"what admits it (the work agent retries): {error}"
            )
        return ClusterReason.APPLY_FAILED, f"cluster {cluster}: {what} was refused: {error}"
    return None


@dataclass(frozen=True)
class WorkDetails:
    """What a work's fact keeps of the ManifestWork beyond what every work has.

    Each kind says what (its ``details``, :func:`addon_manager.kinds.registry.work_details`);
    a kind that keeps nothing has all of them empty.
    """

    identity_source: str = ""
    """See :attr:`WorkFact.identity_source`."""
    granted: frozenset[str] = frozenset()
    """See :attr:`WorkFact.granted`."""
    objects: frozenset[str] = frozenset()
    """See :attr:`WorkFact.objects`."""


Details = Callable[[str, Mapping[str, Any]], WorkDetails]
"""(owner kind, the whole ManifestWork) -> what that kind's fact keeps of it."""


def parse_work(work: Mapping[str, Any], details: Details) -> WorkFact | None:
    """A :class:`WorkFact` for a ManifestWork the add-on owns; None for anyone else's.

    ``details`` reads what the work's kind keeps beyond the common facts (the kind registry's
    :func:`~addon_manager.kinds.registry.work_details`).
    """
    meta = work.get("metadata") or {}
    owner = owner_of(meta.get("labels") or {})
    if owner is None:
        return None
    extra = details(owner[0], work)
    status = work.get("status") or {}
    conds = {str(x.get("type")): x for x in status.get("conditions") or []}
    applied = conds.get("Applied", {})
    available = conds.get("Available", {})
    problem = next(
        (conds[t] for t in ("Applied", "Available") if conds.get(t, {}).get("status") != "True"
         and t in conds),
        None,
    )
    if problem is None and conds.get("Degraded", {}).get("status") == "True":
        problem = conds["Degraded"]
    not_true = problem if problem is not None else applied
    reason = str(not_true.get("reason", ""))
    message = str(not_true.get("message", ""))
    if applied.get("status") == "False":
        failure = manifest_failure(str(meta.get("namespace", "")), status)
        if failure is not None:
            reason, message = str(failure[0]), failure[1]  # a plain str, as read
    observed = [
        seen
        for seen in (conds.get(t, {}).get("observedGeneration") for t in ("Applied", "Available"))
        if isinstance(seen, int)
    ]
    generation = meta.get("generation")
    feedback: dict[str, FeedbackValue] = {}
    for manifest in (status.get("resourceStatus") or {}).get("manifests") or []:
        for item in (manifest.get("statusFeedback") or {}).get("values") or []:
            value = _field_value(item.get("fieldValue") or {})
            if value is not None and item.get("name") not in feedback:
                feedback[str(item["name"])] = value
    return WorkFact(
        name=str(meta.get("name", "")),
        cluster=str(meta.get("namespace", "")),
        kind=owner[0],
        intent_namespace=owner[1],
        intent_name=owner[2],
        render_hash=str((meta.get("annotations") or {}).get(c.ANNOTATION_RENDER_HASH, "")),
        deleting=bool(meta.get("deletionTimestamp")),
        applied=str(applied.get("status", "Unknown")),
        available=str(available.get("status", "Unknown")),
        reason=reason,
        message=message[:1024],
        feedback=tuple(sorted(feedback.items())),
        generation=generation if isinstance(generation, int) else None,
        observed_generation=min(observed) if observed else None,
        reported=bool(conds),
        spec_time=_spec_time(meta),
        identity_source=extra.identity_source,
        granted=extra.granted,
        revision=_revision((meta.get("annotations") or {}).get(c.ANNOTATION_REVISION)),
        objects=extra.objects,
        resource_version=resource_version(meta),
    )


def claimed_objects(spec: Mapping[str, Any]) -> frozenset[str]:
    """What a work's spec claims on its cluster (see :attr:`WorkFact.objects`).

    The objects its manifest configs name, and for a sealed connection the ``storage-config``
    Secret of each of its target namespaces (the agent writes the entry there).
    """
    out = set()
    for config in spec.get("manifestConfigs") or []:
        ident = config.get("resourceIdentifier") or {}
        out.add(f"{ident.get('resource')}/{ident.get('namespace', '')}/{ident.get('name')}")
    for manifest in (spec.get("workload") or {}).get("manifests") or []:
        if manifest.get("kind") == c.KIND_SEALED_STORAGE_CONNECTION:
            for ns in (manifest.get("spec") or {}).get("targetNamespaces") or []:
                out.add(f"storage-config/{ns}")
    return frozenset(out)


def resource_version(meta: Mapping[str, Any]) -> int:
    """An object's ``metadata.resourceVersion`` as a number; 0 when absent or not a number.

    The API server's versions are etcd revisions (decimal numbers, growing with every write);
    one object's versions only grow, which is all that is compared.
    """
    value = meta.get("resourceVersion")
    return int(value) if isinstance(value, str) and value.isdigit() else 0


def _revision(value: object) -> int | None:
    """A revision annotation's number (None when absent or not a positive number)."""
    if isinstance(value, str) and value.isdigit() and int(value) > 0:
        return int(value)
    return None


@dataclass(frozen=True)
class ClusterFact:
    """One ManagedCluster as last seen: labels and the hub's view of its availability."""

    labels: tuple[tuple[str, str], ...] = ()
    available: str = ""
    """Status of ManagedClusterConditionAvailable ("" when the cluster has none yet)."""
    since: datetime | None = None
    """lastTransitionTime of that condition."""
    message: str = ""
    name: str = ""
    """The ManagedCluster's name (its cluster namespace on the hub)."""
    cordoned: str | None = None
    """The value of its :data:`~addon_api.constants.ENDPOINT_CORDON_TAINT` taint when it has
    one (its models' fleet endpoints send it no traffic), else None."""


def parse_cluster(cluster: Mapping[str, Any]) -> ClusterFact:
    """A :class:`ClusterFact` for a ManagedCluster."""
    meta = cluster.get("metadata") or {}
    conds = (cluster.get("status") or {}).get("conditions") or []
    cond: Mapping[str, Any] = next(
        (x for x in conds if x.get("type") == CLUSTER_AVAILABLE), {}
    )
    return ClusterFact(
        labels=tuple(sorted((str(k), str(v)) for k, v in (meta.get("labels") or {}).items())),
        available=str(cond.get("status", "")),
        since=parse_time(cond.get("lastTransitionTime")),
        message=str(cond.get("message", ""))[:256],
        name=str(meta.get("name", "")),
        cordoned=next((str(t.get("value") or "")[:256]
                       for t in (cluster.get("spec") or {}).get("taints") or []
                       if t.get("key") == c.ENDPOINT_CORDON_TAINT), None),
    )


@dataclass(frozen=True)
class AddonFact:
    """The add-on's ManagedClusterAddOn on one cluster: where the agent runs there."""

    cluster: str
    namespace: str
    """The agent's install namespace (see :func:`agent_namespace`)."""
    available: bool | None = None
    """OCM's ``Available`` condition of the add-on (its agent's lease is renewed); None
    while OCM has not said."""


def parse_addon(addon: Mapping[str, Any]) -> AddonFact | None:
    """An :class:`AddonFact` for the add-on's ManagedClusterAddOn; None for other add-ons'."""
    meta = addon.get("metadata") or {}
    if meta.get("name") != c.ADDON_NAME:
        return None
    available = None
    for cond in (addon.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Available" and cond.get("status") in ("True", "False"):
            available = cond["status"] == "True"
    return AddonFact(str(meta.get("namespace", "")), agent_namespace(addon), available)


def agent_namespace(addon: Mapping[str, Any] | None) -> str:
    """The namespace the agent runs in on a cluster, from its ManagedClusterAddOn.

    OCM's addon manager writes the effective install namespace to ``status.namespace`` (the
    AddOnDeploymentConfig's ``agentInstallNamespace``, else the namespace of the
    AddOnTemplate's Deployment); ``spec.installNamespace`` is deprecated but still honoured.
    The klusterlet resolves it the same way: status, then spec, then the OCM default, which
    is also the answer when the cluster has no ManagedClusterAddOn (``addon`` None).
    """
    if not addon:
        return c.AGENT_NAMESPACE
    status = addon.get("status") or {}
    spec = addon.get("spec") or {}
    for value in (status.get("namespace"), spec.get("installNamespace")):
        if isinstance(value, str) and value:
            return value
    return c.AGENT_NAMESPACE
