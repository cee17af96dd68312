"""A model's serving set: which of its clusters its fleet endpoint sends traffic to (pure).

The hub already knows, per cluster, whether the model is Ready (on a real data plane: its
server answered), whether that report is current, which rollout revision it serves and where
it answers. :func:`serving_set` turns that into ``status.endpoint`` of a
MultiClusterInferenceService: the members (weight and URL, in the policy's order) and every
selected cluster left out, with the reason. Routers read it (``model-serving-addon endpoint``).

A cluster is left out when, in this order: its report is stale (Stale; a partitioned cluster
also leaves its Placement, and its entry says why), the Placement no longer selects it
(NotSelected), ``spec.endpoint.clusterSelector`` does not match its labels (OutsideSelector),
it carries the cordon taint (Cordoned), the model is not Ready there
(NotReady), a rollout keeps traffic off the revision it serves (RevisionRolledBack: the
rollout rolled back and it is not on the stable revision yet; RevisionHalted: it serves the
revision whose step failed; OtherRevision: neither the stable nor the target revision), it
reports no URL (NoURL), or a Spread weight of 0 (ZeroWeight). A member whose work the work
agent has not picked up yet (WorkUpdating) keeps its place until it reports: the model there
serves what it served. With spec.endpoint.spillover, a member whose model's metric is out of
bounds on the hub's Prometheus takes no traffic while another member can take it
(MetricOutOfBounds); when every member is out of bounds, all keep serving.

With spec.endpoint.serviceExport, the model's work on each member that takes traffic carries
a Multi-Cluster Services ServiceExport of its predictor Service, following the set as
published (:func:`addon_manager.engine.plan.serving_members`).

While a progressive rollout moves clusters step by step, clusters on the stable and on the
target revision both serve: with Spread weights the new revision's share of the traffic grows
with each step (a canary across clusters), and a rollback takes it away at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any

from addon_api import constants as c
from addon_api.common import (
    ClusterStatus,
    EndpointExclusion,
    EndpointMember,
    EndpointStatus,
    IntentStatus,
)
from addon_api.hub import FleetEndpoint
from addon_api.reasons import ClusterReason
from addon_api.rollout import RolloutStatus
from addon_manager.facts.records import ClusterFact

DEFAULT_WEIGHT = 100
"""A Spread member's weight when spec.endpoint.weights does not name it; the Failover
active member's weight."""


class Excluded(StrEnum):
    """Why a selected cluster takes no traffic (status.endpoint.excluded[].reason)."""

    NOT_SELECTED = "NotSelected"
    OUTSIDE_SELECTOR = "OutsideSelector"
    CORDONED = "Cordoned"
    STALE = "Stale"
    NOT_READY = "NotReady"
    REVISION_ROLLED_BACK = "RevisionRolledBack"
    REVISION_HALTED = "RevisionHalted"
    OTHER_REVISION = "OtherRevision"
    NO_URL = "NoURL"
    ZERO_WEIGHT = "ZeroWeight"
    METRIC_OUT_OF_BOUNDS = "MetricOutOfBounds"


def _revision_exclusion(entry: ClusterStatus, rollout: RolloutStatus | None
                        ) -> tuple[Excluded, str] | None:
    if rollout is None or entry.revision is None:
        return None
    stable, target = rollout.stable_revision, rollout.target_revision
    if rollout.phase == "RolledBack":
        if stable is not None and entry.revision != stable:
            return (Excluded.REVISION_ROLLED_BACK,
                    f"serves revision {entry.revision}, rolled back to {stable}")
        return None
    if rollout.phase == "Halted" and entry.revision == target and target != stable:
        return (Excluded.REVISION_HALTED,
                f"serves revision {entry.revision}, whose rollout step failed")
    if entry.revision not in {r for r in (stable, target) if r is not None}:
        return (Excluded.OTHER_REVISION,
                f"serves revision {entry.revision}; the rollout is at stable {stable}, "
                f"target {target}")
    return None


def exclusion(entry: ClusterStatus, spec: FleetEndpoint, rollout: RolloutStatus | None,
              selected: frozenset[str] | None, fact: ClusterFact | None
              ) -> tuple[Excluded, str] | None:
    """Why the cluster of ``entry`` takes no traffic (reason, message), None when it may.

    ``selected``: the clusters the Placement selects (None when the Placement is not found:
    every entry counts, as for the intent's status). ``fact``: its ManagedCluster.
    """
    labels = dict(fact.labels) if fact is not None else {}
    if entry.stale:  # first: a partitioned cluster also leaves its Placement, and this says why
        return Excluded.STALE, entry.message or "its report is out of date"
    if selected is not None and entry.cluster not in selected:
        return Excluded.NOT_SELECTED, "the Placement no longer selects it"
    if spec.cluster_selector is not None and not spec.cluster_selector.matches(labels):
        return Excluded.OUTSIDE_SELECTOR, "its labels do not match spec.endpoint.clusterSelector"
    if fact is not None and fact.cordoned is not None:
        return Excluded.CORDONED, fact.cordoned or "the cluster is cordoned for endpoints"
    if not entry.ready:
        what = ": ".join(x for x in (entry.phase, entry.reason) if x) or "not ready"
        return Excluded.NOT_READY, what
    revision = _revision_exclusion(entry, rollout)
    if revision is not None:
        return revision
    if not (entry.external_url or entry.url):
        return Excluded.NO_URL, "the cluster reports no URL for the model"
    return None


def _label_order(value: str | None) -> tuple[int, float, str]:
    """Sort key of a priorityLabel value: numbers first (numerically), then text, then none."""
    if value is None:
        return (2, 0.0, "")
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)


def failover_order(clusters: Iterable[str], spec: FleetEndpoint,
                   facts: Mapping[str, ClusterFact | None]) -> list[str]:
    """``clusters`` in Failover priority.

    spec.endpoint.priority first (in its order), then by priorityLabel's value, then by name.
    """
    named = {cl: i for i, cl in enumerate(spec.priority)}

    def key(cl: str) -> tuple[int, tuple[int, float, str], str]:
        fact = facts.get(cl)
        value = dict(fact.labels).get(spec.priority_label) if (
            fact is not None and spec.priority_label) else None
        return (named.get(cl, len(named)), _label_order(value), cl)

    return sorted(clusters, key=key)


def _updating(entry: ClusterStatus, member: EndpointMember | None) -> ClusterStatus:
    """A member whose work the work agent has not picked up yet, as it still serves.

    Its entry says WorkUpdating for the moment between a new work generation and the work
    agent's next report; the model there serves what it served (its previous URL and
    revision), and what the new generation changes is judged once reported. Without this a
    spec change would empty the set for that moment, and a work that gains its ServiceExport
    on joining would leave the set, lose the export and join again, forever.
    """
    if member is None or entry.ready or entry.reason != ClusterReason.WORK_UPDATING:
        return entry
    return entry.model_copy(update={"ready": True, "url": member.url, "external_url": "",
                                    "revision": member.revision})


def serving_set(spec: FleetEndpoint | None, status: IntentStatus,
                selected: frozenset[str] | None, facts: Mapping[str, ClusterFact | None],
                previous: EndpointStatus | None, now: datetime,
                spilled: Mapping[str, str] | None = None) -> EndpointStatus:
    """The model's serving set from its status entries (see the module docstring).

    ``spilled``: the clusters whose model's metric spec.endpoint.spillover last found out of
    bounds, with what it found; they take no traffic while another member can take it.
    """
    spec = spec or FleetEndpoint()
    weights = {w.cluster: w.weight for w in spec.weights}
    candidates: dict[str, ClusterStatus] = {}
    excluded: list[EndpointExclusion] = []
    before = {m.cluster: m for m in previous.members} if previous is not None else {}
    for entry in status.clusters:
        entry = _updating(entry, before.get(entry.cluster))
        why = exclusion(entry, spec, status.rollout, selected, facts.get(entry.cluster))
        if why is None and spec.policy == "Spread" and weights.get(entry.cluster) == 0:
            why = Excluded.ZERO_WEIGHT, "spec.endpoint.weights gives it 0"
        if why is None:
            candidates[entry.cluster] = entry
        else:
            excluded.append(EndpointExclusion(cluster=entry.cluster, reason=why[0],
                                              message=why[1]))
    out_of_bounds = {cl: found for cl, found in (spilled or {}).items() if cl in candidates}
    if spec.spillover is not None and out_of_bounds and len(out_of_bounds) < len(candidates):
        for cl, found in sorted(out_of_bounds.items()):
            del candidates[cl]
            excluded.append(EndpointExclusion(cluster=cl, reason=Excluded.METRIC_OUT_OF_BOUNDS,
                                              message=found[:1024]))
    if spec.policy == "Failover":
        order = failover_order(candidates, spec, facts)
        weight = {cl: DEFAULT_WEIGHT if i == 0 else 0 for i, cl in enumerate(order)}
    else:
        order = sorted(candidates)
        weight = {cl: weights.get(cl, DEFAULT_WEIGHT) for cl in order}
    members = [EndpointMember(cluster=cl, weight=weight[cl],
                              url=candidates[cl].external_url or candidates[cl].url,
                              revision=candidates[cl].revision) for cl in order]
    same = previous is not None and [(m.cluster, m.weight, m.url) for m in previous.members] == [
        (m.cluster, m.weight, m.url) for m in members]
    return EndpointStatus(
        policy=spec.policy,
        members=members,
        excluded=sorted(excluded, key=lambda x: x.cluster),
        omitted=status.clusters_omitted,
        serving=sum(1 for m in members if m.weight > 0),
        last_change_time=previous.last_change_time if same and previous else now,
    )


def changes(before: EndpointStatus | None, after: EndpointStatus
            ) -> list[tuple[str, str, str]]:
    """Events for a change of the serving set: (type, reason, message) each.

    A cluster that joins (EndpointMemberAdded), one that leaves with its reason
    (EndpointMemberRemoved, a Warning), a Failover that moves the traffic (EndpointFailover),
    and no cluster left to serve after some did (EndpointDown, a Warning). Nothing when only
    weights or URLs of the same members changed, nor on the set's first computation.
    """
    old = {m.cluster: m for m in before.members} if before is not None else {}
    new = {m.cluster: m for m in after.members}
    why = {x.cluster: x for x in after.excluded}
    out: list[tuple[str, str, str]] = []
    if before is None:  # a new model: its clusters come up one by one, nothing went down
        return []
    for cl in sorted(set(new) - set(old)):
        out.append(("Normal", "EndpointMemberAdded",
                    f"{cl} joined the serving set (weight {new[cl].weight})"))
    for cl in sorted(set(old) - set(new)):
        reason = why.get(cl)
        detail = f": {reason.reason} ({reason.message})" if reason else ""
        out.append(("Warning", "EndpointMemberRemoved", f"{cl} left the serving set{detail}"))
    active_before = [m.cluster for m in before.members if m.weight > 0]
    active_after = [m.cluster for m in after.members if m.weight > 0]
    if after.policy == "Failover" and active_before and active_after and (
            active_before != active_after):
        out.append(("Normal", "EndpointFailover",
                    f"traffic moves from {active_before[0]} to {active_after[0]}"))
    if before.serving and not after.serving:
        out.append(("Warning", "EndpointDown", "no cluster can take the model's traffic"))
    return out


POOL_IMPORT_GROUP = "inference.networking.x-k8s.io"
POOL_IMPORT_VERSION = "v1alpha1"
POOL_IMPORT_PLURAL = "inferencepoolimports"
POOL_IMPORT_CONTROLLER = "modelserving.opendatahub.io/fleet-endpoint"
"""The controller name of the manager's entry in an InferencePoolImport's status."""


def pool_import(namespace: str, name: str, owner_uid: str, found: EndpointStatus,
                labels: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The model's InferencePoolImport on the hub, and its status (two applies).

    Owned by the MultiClusterInferenceService (the garbage collector removes it with it).
    Its status carries one controller entry, the manager's: the clusters taking the
    model's traffic as ``exportingClusters`` and an ``Accepted`` condition, True while at
    least one does (its time: when the set last changed, so an unchanged set writes
    nothing new).
    """
    api = f"{POOL_IMPORT_GROUP}/{POOL_IMPORT_VERSION}"
    meta = {"name": name, "namespace": namespace}
    obj = {"apiVersion": api, "kind": "InferencePoolImport", "metadata": {
        **meta, "labels": dict(labels),
        "ownerReferences": [{"apiVersion": c.API_VERSION, "kind": c.KIND_INFERENCE_SERVICE,
                             "name": name, "uid": owner_uid, "controller": True,
                             "blockOwnerDeletion": False}]}}
    exporting = [m.cluster for m in found.members if m.weight > 0]
    since = found.last_change_time.strftime("%Y-%m-%dT%H:%M:%SZ") if (
        found.last_change_time) else "1970-01-01T00:00:00Z"
    condition = {
        "type": "Accepted", "status": "True" if exporting else "False",
        "reason": "Accepted" if exporting else "NoServingCluster",
        "message": (f"{len(exporting)} cluster(s) take the model's traffic (the serving set of "
                    f"MultiClusterInferenceService {namespace}/{name})" if exporting else
                    "no cluster takes the model's traffic"),
        "lastTransitionTime": since}
    status = {"apiVersion": api, "kind": "InferencePoolImport", "metadata": meta,
              "status": {"controllers": [{
                  "name": POOL_IMPORT_CONTROLLER,
                  "exportingClusters": [{"name": cl} for cl in exporting],
                  "conditions": [condition]}]}}
    return obj, status
