"""Every phase and reason the add-on sets, with what each means: one place for both sides.

The manager (hub intents) and the agent (ServingPlatform and SealedStorageConnection on each
cluster) set these values; OCM and KServe pass a few more through, listed here too. Each value
is a member of a :class:`~enum.StrEnum` (so it *is* its string on the wire), and each is
explained by one or more :class:`Entry` objects: where it is seen, what it means, what to do.

``docs/troubleshooting.md`` is generated from the entries: ``python -m addon_api.reasons``
rewrites the blocks between its ``<!-- BEGIN reasons NAME ... -->`` and ``<!-- END reasons
NAME -->`` markers (``--check`` only compares); the prose around them is hand-written.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Literal

# Hub intents -------------------------------------------------------------------------------------


class IntentConditionType(StrEnum):
    """Types of the conditions in a hub intent's ``status.conditions`` (set by the manager)."""

    PLACEMENT_RESOLVED = "PlacementResolved"
    READY = "Ready"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"
    DELETION_BLOCKED = "DeletionBlocked"
    ROLLED_OUT = "RolledOut"
    DEPRECATED = "Deprecated"


class IntentPhase(StrEnum):
    """``status.phase`` of a hub intent (set by the manager).

    The values of the ``IntentPhase`` literal of :mod:`addon_api.common` (the model's type).
    """

    PENDING = "Pending"
    PROGRESSING = "Progressing"
    READY = "Ready"
    DEGRADED = "Degraded"
    INVALID = "Invalid"


class IntentReason(StrEnum):
    """Reasons of a hub intent's conditions (set by the manager)."""

    RESOLVED = "Resolved"
    PLACEMENT_NOT_FOUND = "PlacementNotFound"
    NO_CLUSTERS_SELECTED = "NoClustersSelected"
    ALL_CLUSTERS_READY = "AllClustersReady"
    NOT_ALL_CLUSTERS_READY = "NotAllClustersReady"
    NO_CLUSTERS = "NoClusters"
    REMOVAL_BLOCKED = "RemovalBlocked"
    REMOVING = "Removing"
    DELETING = "Deleting"
    INVALID_SPEC = "InvalidSpec"
    DEV_FLAGS_NOT_ALLOWED = "DevFlagsNotAllowed"
    NAMESPACE_NOT_ALLOWED = "NamespaceNotAllowed"
    METRIC_QUERY_NOT_ALLOWED = "MetricQueryNotAllowed"
    CLUSTERS_PROGRESSING = "ClustersProgressing"
    STABLE = "Stable"
    CLUSTERS_FAILED = "ClustersFailed"
    CLUSTERS_STALE = "ClustersStale"
    NO_FAILURES = "NoFailures"
    WORKS_REMAIN = "WorksRemain"
    INTENTS_ON_CLUSTER = "IntentsOnCluster"
    PLATFORM_DEPRECATED = "PlatformDeprecated"


class RolloutPhase(StrEnum):
    """``status.rollout.phase`` of an intent with a progressive rollout.

    Also the reason of its ``RolledOut`` condition; the values of the model's literal
    (:data:`addon_api.rollout.RolloutPhaseName`).
    """

    PROGRESSING = "Progressing"
    WAITING_FOR_APPROVAL = "WaitingForApproval"
    PAUSED = "Paused"
    HALTED = "Halted"
    ROLLED_BACK = "RolledBack"
    COMPLETE = "Complete"


class ClusterPhase(StrEnum):
    """``status.clusters[].phase`` of a hub intent, as the manager sets it.

    A ModelServing's or StorageConnection's entry carries the agent's phase instead (a
    :class:`ServingPlatformPhase` or :class:`SealedPhase`), fed back from the cluster.
    """

    WAITING = "Waiting"
    PENDING = "Pending"
    APPLYING = "Applying"
    APPLIED = "Applied"
    PROGRESSING = "Progressing"
    READY = "Ready"
    AVAILABLE = "Available"
    FAILED = "Failed"
    CONFLICT = "Conflict"
    DEGRADED = "Degraded"
    REMOVING = "Removing"
    REMOVAL_BLOCKED = "RemovalBlocked"
    STALE = "Stale"


class ClusterReason(StrEnum):
    """``status.clusters[].reason`` of a hub intent, as the manager sets it.

    Besides these, an entry may carry the agent's phase (ModelServing, StorageConnection) or a
    reason of OCM or KServe (:class:`PassedThroughReason`).
    """

    WAITING_FOR_PLATFORM = "WaitingForPlatform"
    WAITING_FOR_STORAGE = "WaitingForStorage"
    WAITING_FOR_AGENT_KEY = "WaitingForAgentKey"
    AGENT_KEY_CHANGED = "AgentKeyChanged"
    IDENTITY_WORK_INVALID = "IdentityWorkInvalid"
    WAITING_FOR_TENANT_ACCESS = "WaitingForTenantAccess"
    WAITING_FOR_ROLLOUT = "WaitingForRollout"
    SENDING = "Sending"
    CONFLICT = "Conflict"
    RENDER_FAILED = "RenderFailed"
    SECRET_NOT_FOUND = "SecretNotFound"
    SECRET_KEY_MISSING = "SecretKeyMissing"
    SECRET_FORBIDDEN = "SecretForbidden"
    SECRET_UNDECODABLE = "SecretUndecodable"
    SECRET_READ_FAILED = "SecretReadFailed"
    FOREIGN_WORK = "ForeignWork"
    ADDON_NOT_ENABLED = "AddonNotEnabled"
    SPOKE_OBJECT_OWNED = "SpokeObjectOwned"
    APPLY_FAILED = "ApplyFailed"
    NOT_APPLIED = "NotApplied"
    NAMESPACE_NOT_ALLOWED = "NamespaceNotAllowed"
    DEV_FLAGS_NOT_ALLOWED = "DevFlagsNotAllowed"
    POD_NOT_ALLOWED = "PodNotAllowed"
    KIND_NOT_ALLOWED = "KindNotAllowed"
    WORK_NOT_APPLIED = "WorkNotApplied"
    WORK_UPDATING = "WorkUpdating"
    WAITING_FOR_SPOKE = "WaitingForSpoke"
    APPLIED = "Applied"
    APPLY_FORBIDDEN = "ApplyForbidden"
    INTENTS_ON_CLUSTER = "IntentsOnCluster"
    WORK_DELETING = "WorkDeleting"
    PLATFORM_REMOVING = "PlatformRemoving"
    CLUSTER_UNAVAILABLE = "ClusterUnavailable"
    WORK_NOT_OBSERVED = "WorkNotObserved"
    AVAILABLE = "Available"
    READY = "Ready"
    BLOCKED_BY_FAILED_LOAD = "BlockedByFailedLoad"
    INVALID_SPEC = "InvalidSpec"
    ROUTE_NOT_CREATED = "RouteNotCreated"
    STORAGE_DOWNLOAD_FAILED = "StorageDownloadFailed"
    CRASH_LOOPING = "CrashLooping"
    MODEL_NOT_LOADED = "ModelNotLoaded"
    REPLICAS_NOT_READY = "ReplicasNotReady"
    SPEC_NOT_BUILT = "SpecNotBuilt"
    SPEC_REJECTED = "SpecRejected"
    NO_ROUTE_API = "NoRouteApi"


# Spoke objects (written by the agent) ------------------------------------------------------------


class ServingPlatformPhase(StrEnum):
    """``status.phase`` of a ServingPlatform (the CRD's enum)."""

    INSTALLING = "Installing"
    AVAILABLE = "Available"
    DEGRADED = "Degraded"
    REMOVING = "Removing"
    REMOVED = "Removed"
    REMOVAL_BLOCKED = "RemovalBlocked"
    UPGRADING = "Upgrading"


class ServingPlatformConditionType(StrEnum):
    """Types of a ServingPlatform's conditions."""

    AVAILABLE = "Available"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"


class ServingPlatformReason(StrEnum):
    """Reasons of a ServingPlatform's conditions."""

    INSTALLING = "Installing"
    ALL_COMPONENTS_AVAILABLE = "AllComponentsAvailable"
    COMPONENTS_UNAVAILABLE = "ComponentsUnavailable"
    REPLICAS_WARNING = "ReplicasWarning"
    RUNTIMES_NOT_APPLIED = "RuntimesNotApplied"
    FOREIGN_OBJECT_CONFLICT = "ForeignObjectConflict"
    BUNDLE_ERROR = "BundleError"
    APPLY_FAILED = "ApplyFailed"
    ANOTHER_PLATFORM_OWNS = "AnotherPlatformOwns"
    FOREIGN_OBJECTS_PRESENT = "ForeignObjectsPresent"
    WAITING_FOR_INFERENCE_SERVICES = "WaitingForInferenceServices"
    REMOVING = "Removing"
    REMOVED = "Removed"
    REMOVED_WITH_LEFTOVERS = "RemovedWithLeftovers"
    UPGRADING_CONTROLLERS = "UpgradingControllers"
    VERSION_NOT_CARRIED = "VersionNotCarried"
    OWNED_BY_ANOTHER_OPERATOR = "OwnedByAnotherOperator"
    STACK_NOT_FOUND = "StackNotFound"
    UNSUPPORTED_VERSION = "UnsupportedVersion"
    WAITING_FOR_EXISTING_STACK = "WaitingForExistingStack"
    USING_EXISTING_STACK = "UsingExistingStack"
    DEV_FLAGS_NOT_ALLOWED = "DevFlagsNotAllowed"
    NAMESPACE_NOT_ALLOWED = "NamespaceNotAllowed"


class SealedPhase(StrEnum):
    """``status.phase`` of a SealedStorageConnection (the CRD's enum)."""

    PENDING = "Pending"
    DELIVERED = "Delivered"
    FAILED = "Failed"


class SealedConditionType(StrEnum):
    """Types of a SealedStorageConnection's conditions."""

    DELIVERED = "Delivered"
    DEGRADED = "Degraded"


class SealedReason(StrEnum):
    """Reasons of a SealedStorageConnection's conditions."""

    DELIVERED = "Delivered"
    NAMESPACE_MISSING = "NamespaceMissing"
    NAMESPACE_TERMINATING = "NamespaceTerminating"
    NAMESPACE_NOT_ALLOWED = "NamespaceNotAllowed"
    KEY_MISMATCH = "KeyMismatch"
    DECRYPT_FAILED = "DecryptFailed"
    SEAL_MISMATCH = "SealMismatch"
    SEAL_REPLAYED = "SealReplayed"
    SEAL_UNSIGNED = "SealUnsigned"
    ENTRY_CONFLICT = "EntryConflict"


SEALED_WAITS: frozenset[SealedReason] = frozenset(
    {SealedReason.NAMESPACE_MISSING, SealedReason.NAMESPACE_TERMINATING}
)
"""Delivery reasons that are a wait for the cluster (phase Pending), not a failure."""


def sealed_phase(reason: SealedReason) -> SealedPhase:
    """The phase a SealedStorageConnection has for the reason of its Delivered condition."""
    if reason is SealedReason.DELIVERED:
        return SealedPhase.DELIVERED
    return SealedPhase.PENDING if reason in SEALED_WAITS else SealedPhase.FAILED


# Passed through ----------------------------------------------------------------------------------


class PassedThroughReason(StrEnum):
    """Cluster-entry reasons that are OCM's or KServe's words, not the add-on's."""

    APPLIED_MANIFEST_WORK_FAILED = "AppliedManifestWorkFailed"
    RESOURCES_NOT_AVAILABLE = "ResourcesNotAvailable"
    RESOURCES_STATUS_UNKNOWN = "ResourcesStatusUnknown"
    MODEL_LOAD_FAILED = "ModelLoadFailed"
    RUNTIME_UNHEALTHY = "RuntimeUnhealthy"
    RUNTIME_DISABLED = "RuntimeDisabled"
    NO_SUPPORTING_RUNTIME = "NoSupportingRuntime"
    RUNTIME_NOT_RECOGNIZED = "RuntimeNotRecognized"
    INVALID_PREDICTOR_SPEC = "InvalidPredictorSpec"


ENUMS: tuple[type[StrEnum], ...] = (
    IntentConditionType,
    IntentPhase,
    IntentReason,
    RolloutPhase,
    ClusterPhase,
    ClusterReason,
    ServingPlatformConditionType,
    ServingPlatformPhase,
    ServingPlatformReason,
    SealedConditionType,
    SealedPhase,
    SealedReason,
    PassedThroughReason,
)
"""Every enum of this module, in the order of the documentation."""

LABELS: dict[type[StrEnum], str] = {
    IntentConditionType: "intent condition",
    IntentPhase: "intent phase",
    IntentReason: "intent condition reason",
    RolloutPhase: "rollout phase",
    ClusterPhase: "cluster entry phase",
    ClusterReason: "cluster entry reason",
    ServingPlatformConditionType: "ServingPlatform condition",
    ServingPlatformPhase: "ServingPlatform phase",
    ServingPlatformReason: "ServingPlatform reason",
    SealedConditionType: "SealedStorageConnection condition",
    SealedPhase: "SealedStorageConnection phase",
    SealedReason: "SealedStorageConnection reason",
    PassedThroughReason: "cluster entry reason from OCM or KServe",
}
"""How the index of docs/troubleshooting.md names what a value of each enum is."""

HOME: dict[type[StrEnum], str] = {
    IntentConditionType: "Hub intents: conditions and phases",
    IntentPhase: "Intent phases",
    IntentReason: "Hub intents: conditions and phases",
    RolloutPhase: "Rollouts",
    ClusterPhase: "Hub intents: per-cluster entries",
    ClusterReason: "Hub intents: per-cluster entries",
    ServingPlatformConditionType: "On the cluster: ServingPlatform",
    ServingPlatformPhase: "On the cluster: ServingPlatform",
    ServingPlatformReason: "On the cluster: ServingPlatform",
    SealedConditionType: "On the cluster: SealedStorageConnection",
    SealedPhase: "On the cluster: SealedStorageConnection",
    SealedReason: "On the cluster: SealedStorageConnection",
    PassedThroughReason: "Reasons passed through from OCM and KServe",
}
"""The heading of docs/troubleshooting.md under which each enum's values are explained; the
index links a value without an entry there (an intent condition to its "`Type` reasons")."""

DOCUMENTED: tuple[type[StrEnum], ...] = tuple(
    e
    for e in ENUMS
    if e not in (IntentConditionType, ServingPlatformConditionType, SealedConditionType)
)
"""The enums each of whose members has an entry (condition types are explained in the prose
around the entries, which is organised by them)."""


# Documentation -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """What docs/troubleshooting.md says about one or more values set together.

    ``seen`` is where a reader sees them (rendered in italics first), ``means`` what they mean
    (Markdown; paragraphs separated by blank lines, list items start with ``- ``), ``todo``
    what to do (after **What to do:**; one starting "if it stays" reads **What to do** if it stays).
    ``title`` replaces the heading made from the values; ``source`` (tables only) says whose
    word the value is.
    """

    terms: tuple[StrEnum, ...]
    seen: str = ""
    means: str = ""
    todo: str = ""
    title: str = ""
    source: str = ""


@dataclass(frozen=True)
class Group:
    """A run of entries that one marked block of docs/troubleshooting.md holds.

    ``style`` ``heading`` gives each entry a heading of ``level``; ``list`` a bullet with the
    value in bold; ``table`` a row of the table reason | where | comes from | meaning.
    """

    name: str
    entries: tuple[Entry, ...]
    style: Literal["heading", "list", "table"] = "heading"
    level: int = 3


IC, IP, IR = IntentConditionType, IntentPhase, IntentReason
CP, CR = ClusterPhase, ClusterReason
PP, PR = ServingPlatformPhase, ServingPlatformReason
SP, SR = SealedPhase, SealedReason
PT = PassedThroughReason

INTENT_PLACEMENT = Group(
    'intent-placement',
    (
        Entry(
            (IR.RESOLVED,),
            seen="Condition `PlacementResolved` = True.",
            means=(
                "The Placement exists and selects at least one cluster; the message says how many. "
                "Nothing to do."
            ),
        ),
        Entry(
            (IR.PLACEMENT_NOT_FOUND,),
            seen="Condition `PlacementResolved` = False.",
            means=(
                "`spec.placementRef.name` names no Placement in the intent's namespace. Intents "
                "may only use Placements of their own namespace. Nothing is sent anywhere; "
                "`summary.desired` is 0 and the phase `Pending`."
            ),
            todo=(
                "create the Placement in this namespace (see `examples/placement.yaml`) or fix the "
                "name. A Placement that disappears is not taken as a decision to uninstall: "
                "ManifestWorks the intent had already sent are kept (and no longer reported per "
                "cluster) until the Placement exists again or the intent is deleted."
            ),
        ),
        Entry(
            (IR.NO_CLUSTERS_SELECTED,),
            seen="Condition `PlacementResolved` = False.",
            means="The Placement exists but its PlacementDecisions list no cluster.",
            todo=(
                "`kubectl -n NS get placement NAME -o yaml` (its `PlacementSatisfied` condition "
                "says why), `kubectl -n NS get placementdecisions`. Usual causes: no "
                "ManagedClusterSetBinding for the set in this namespace (the binding's name must "
                "equal `spec.clusterSet`), the set has no clusters, or the Placement's predicates "
                "(labels) match no cluster."
            ),
        ),
    ),
    level=4,
)


INTENT_READY = Group(
    'intent-ready',
    (
        Entry(
            (IR.ALL_CLUSTERS_READY,),
            seen="Condition `Ready` = True.",
            means="Ready on every selected cluster (phase `Ready`).",
        ),
        Entry(
            (IR.NOT_ALL_CLUSTERS_READY,),
            seen="Condition `Ready` = False.",
            means=(
                "Some selected clusters are not ready yet (`ready on 1/3`). Look at the non-ready "
                "entries of `status.clusters` (they come first)."
            ),
        ),
        Entry(
            (IR.NO_CLUSTERS,),
            seen="Condition `Ready` = False.",
            means=(
                "No cluster is selected; see `PlacementNotFound` / `NoClustersSelected` on the "
                "`PlacementResolved` condition."
            ),
        ),
        Entry(
            (IR.REMOVAL_BLOCKED,),
            title="`RemovalBlocked` (Ready reason, ModelServing)",
            seen=(
                "Condition `Ready` = False, message `removal of the stack is blocked on CLUSTER, "
                "...`."
            ),
            means=(
                "The stack is to be removed (`managementState: Removed`, the ModelServing deleted, "
                "or a cluster left its Placement) and on the named clusters that removal is "
                "refused: by the manager (`IntentsOnCluster`: add-on intents still use the stack "
                "there) or by the agent (`ForeignObjectsPresent`). See the cluster entries."
            ),
        ),
        Entry(
            (IR.REMOVING,),
            title="`Removing` (Ready reason, ModelServing)",
            seen=(
                "Condition `Ready` = False, message `the stack is being removed on CLUSTER, ...`."
            ),
            means=(
                "Some clusters report `Removing`: the agent is uninstalling (or waiting for "
                "InferenceServices to be deleted first, `WaitingForInferenceServices`). A "
                "ModelServing whose stack is being removed is never Ready; with `managementState: "
                "Removed` it becomes Ready again (`AllClustersReady`) once every cluster reports "
                "`Removed`."
            ),
        ),
        Entry(
            (IR.DELETING,),
            seen=(
                "Condition `Ready` = False, reason **Deleting**, on a ModelServing being deleted."
            ),
            means=(
                "Its ManifestWorks are being deleted and the agents remove the stacks. A "
                "ModelServing being deleted is never Ready. If it stays, see `DeletionBlocked`."
            ),
        ),
        Entry(
            (IR.INVALID_SPEC, CR.INVALID_SPEC,),
            means=(
                "Two places:\n"
                "\n"
                "- *Condition `Ready` = False, intent phase `Invalid`:* the manager could not read "
                "the intent's spec (its model rejected it); the message is the validation error "
                "naming the field. Nothing is sent to any cluster and the status has no cluster "
                "entries. Admission normally rejects such objects, so this usually means the CRDs "
                "on the hub are older than the manager (upgrade the chart, which installs the "
                "CRDs) or the object was stored before a rule existed (for example a template "
                "field KServe does not have, `spec.template.metadata: Extra inputs are not "
                "permitted`, in an object stored before the hub's CRDs declared the template's "
                "fields). **What to do:** fix the field the message names.\n"
                "- *Cluster entry of a MultiClusterInferenceService, phase `Failed`:* KServe "
                "reports `status.modelStatus.transitionStatus: InvalidSpec` for the "
                "InferenceService on that cluster (for example a predictor KServe does not accept, "
                "or a mode the cluster's platform does not serve). **What to do:** read "
                "`clusters[].message`, then `kubectl -n TARGET describe inferenceservice NAME` on "
                "the cluster; fix the template or the cluster's override."
            ),
        ),
        Entry(
            (IR.DEV_FLAGS_NOT_ALLOWED, CR.DEV_FLAGS_NOT_ALLOWED,),
            title="`DevFlagsNotAllowed` (Ready reason, ModelServing)",
            seen=(
                "Condition `Ready` = False, intent phase `Invalid`, message `spec.devFlags.images "
                "is not allowed: ...` (or `spec.devFlags.manifests`, or "
                "`spec.overrides[N].patch.devFlags.images` when an override's patch sets them); "
                "or a cluster entry (phase `Failed`) whose message says `spec.devFlags.images: "
                "not allowed ... (as rendered for this cluster, overrides applied)`: the work "
                "the manager would send that cluster carries devFlags, whatever wrote them."
            ),
            means=(
                "The ModelServing sets devFlags and the add-on's configuration does not allow them "
                "(the default): devFlags replace controller images or the whole bundle the agent "
                "installs with its cluster-wide rights, so they belong to the platform admin. "
                "Nothing is written for any cluster; works an earlier configuration allowed stay "
                "as they are (not updated, not deleted) until the ModelServing or the "
                "configuration changes."
            ),
            todo=(
                "remove `spec.devFlags`, or (platform admin, development hubs only) set the chart "
                "value `manager.policy.allowDevFlags: true` (manager flag `--allow-dev-flags`)."
            ),
        ),
        Entry(
            (IR.METRIC_QUERY_NOT_ALLOWED,),
            title="`MetricQueryNotAllowed` (Ready reason, any intent with a rollout)",
            seen=(
                "Condition `Ready` = False, intent phase `Invalid`, message "
                "`spec.rollout.metricGate.query: free PromQL is not allowed in hub namespace "
                "...`."
            ),
            means=(
                "The rollout's metric gate is free PromQL, and the intent's hub namespace is "
                "not one the platform admin trusts with the stack "
                "(`manager.policy.stackOwnerNamespaces`). The manager runs gate queries with "
                "its own Prometheus token, which sees every cluster's series, so a tenant "
                "names a metric instead and the manager selects only the intent's own series "
                "(its spoke namespaces, its predictor pods, the step's clusters). Nothing is "
                "written for any cluster."
            ),
            todo=(
                "replace `query` by `metric` (with `rate`, `labels`, `maxValue`/`minValue`; "
                "see docs/user-guide.md, rollouts)."
            ),
        ),
        Entry(
            (IR.NAMESPACE_NOT_ALLOWED, CR.NAMESPACE_NOT_ALLOWED,),
            title="`NamespaceNotAllowed` (Ready reason, any intent)",
            seen=(
                "Condition `Ready` = False, intent phase `Invalid`, message `FIELD: spoke "
                "namespace 'X' is not allowed for hub namespace 'NS', which may target only ...` "
                "or `FIELD: spoke namespace 'X' is never a tenant's target ...`."
            ),
            means=(
                "A field that names a spoke namespace (StorageConnection `targetNamespaces[i]`, "
                "MultiClusterServingRuntime / MultiClusterInferenceService `targetNamespace`, "
                "ModelServing `servingNamespaces[i]`, or the same field in "
                "`spec.overrides[N].patch`) names one the namespace policy does not allow this hub "
                "namespace: by default a hub namespace may target only the spoke namespace of its "
                "own name, the platform admin may map it to others (chart value "
                "`manager.policy.targetNamespaces`, manager flag `--target-namespaces`), and "
                "`kube-*`, `openshift-*`, `open-cluster-management*` and the agent's namespace are "
                "never allowed. Nothing is written for any cluster; works sent before the policy "
                "changed stay as they are. The same reason on **one cluster's entry** (phase "
                "`Failed`) means the namespace is that cluster's own agent namespace (an "
                "AddOnDeploymentConfig installs the agent elsewhere there). **What to do:** target "
                "a namespace of your own (see docs/security.md), or ask the platform admin to map "
                "this hub namespace to it.\n"
                "\n"
                "*ModelServing only: message `ModelServings in hub namespace 'NS' may not own a "
                "cluster's stack ...`.* The chart value `manager.policy.stackOwnerNamespaces` "
                "(manager flag `--stack-owner-namespaces`) lists the hub namespaces whose "
                "ModelServings may own a cluster's stack, and this namespace is not on it. Nothing "
                "is written for any cluster, and the ModelServing does not take part in the "
                "\"oldest ModelServing owns the cluster\" rule (it cannot block one from an "
                "allowed namespace). Works sent before the list changed stay as they are. **What "
                "to do:** create the ModelServing in an allowed namespace, or ask the platform "
                "admin to add the namespace."
            ),
        ),
    ),
    level=4,
)


INTENT_PROGRESSING = Group(
    'intent-progressing',
    (
        Entry(
            (IR.CLUSTERS_PROGRESSING,),
            seen="Condition `Progressing` = True.",
            means=(
                "Some clusters are on their way (waiting, being applied, installing, loading the "
                "model); the message names up to 10 of them."
            ),
        ),
        Entry(
            (IR.STABLE,),
            seen="Condition `Progressing` = False.",
            means="No cluster is progressing.",
        ),
    ),
    level=4,
)


INTENT_DEGRADED = Group(
    'intent-degraded',
    (
        Entry(
            (IR.CLUSTERS_FAILED,),
            seen="Condition `Degraded` = True, phase `Degraded`.",
            means=(
                "At least one cluster failed; the message names up to 10 (`failed on a, b and 3 "
                "more`). Find them at the top of `status.clusters` and look up their `reason` "
                "below."
            ),
        ),
        Entry(
            (IR.CLUSTERS_STALE,),
            seen="Condition `Degraded` = True, phase `Degraded`.",
            means=(
                "No cluster failed, but at least one cluster's report is out of date (its entries "
                "have phase `Stale`; the message names up to 10: `no current report from a, b "
                "(stale)`). When clusters failed too, the reason is `ClustersFailed` and the "
                "message has both parts. See "
                "[`Stale`](#stale-phase--clusterunavailable--worknotobserved) below for what to "
                "do."
            ),
        ),
        Entry(
            (IR.NO_FAILURES,),
            seen="Condition `Degraded` = False.",
            means="No cluster failed and every cluster's report is current.",
        ),
    ),
    level=4,
)


INTENT_DELETION = Group(
    'intent-deletion',
    (
        Entry(
            (IC.DELETION_BLOCKED, IR.WORKS_REMAIN,),
            title="`DeletionBlocked` (condition) / `WorksRemain`",
            seen=(
                "Condition `DeletionBlocked` = True, reason **WorksRemain**, on an intent being "
                "deleted."
            ),
            means=(
                "The intent's ManifestWorks have not gone away within `--deletion-blocked-after` "
                "seconds (default 30) of the deletion; the message names the clusters. The "
                "finalizer `modelserving.opendatahub.io/cleanup` keeps the intent until they are "
                "gone (retried every 2 s)."
            ),
            todo=(
                "check those clusters: is the cluster available (`kubectl get managedcluster`), is "
                "its work agent running? For a ModelServing, the agent may be refusing to "
                "uninstall (`RemovalBlocked` on the cluster's ServingPlatform). If a cluster is "
                "gone for good, remove its ManifestWork (and the cluster) as OCM documents; the "
                "intent then goes."
            ),
        ),
        Entry(
            (IC.DELETION_BLOCKED, IR.INTENTS_ON_CLUSTER,),
            title="`DeletionBlocked` (condition) / `IntentsOnCluster`",
            seen=(
                "Condition `DeletionBlocked` = True, reason **IntentsOnCluster**, on a "
                "ModelServing being deleted, message `the stack is not removed while add-on "
                "intents have ManifestWorks on the cluster; CLUSTER: MultiClusterInferenceService "
                "NS/NAME, ...; ...`."
            ),
            means=(
                "The manager does not remove a stack from a cluster while "
                "MultiClusterInferenceServices or MultiClusterServingRuntimes still have "
                "ManifestWorks there: their InferenceServices carry KServe's finalizers, which "
                "only the running controller processes. Nothing on those clusters is touched; the "
                "ModelServing keeps its finalizer (set at once, not after "
                "`--deletion-blocked-after`) and the clusters show `RemovalBlocked` / "
                "`IntentsOnCluster`. Clusters without intents are removed meanwhile."
            ),
            todo=(
                "delete the named intents (or take the cluster out of their Placements); the "
                "deletion then proceeds by itself."
            ),
        ),
        Entry(
            (IC.DEPRECATED, IR.PLATFORM_DEPRECATED,),
            title="`Deprecated` (condition) / `PlatformDeprecated`",
            seen=(
                "Condition `Deprecated` = True, reason **PlatformDeprecated**, on a ModelServing "
                "with `platform: ModelMesh`; `kubectl apply` of it prints a `Warning:` with the "
                "same message."
            ),
            means=(
                "ModelMesh Serving is archived upstream; its last release is v0.12.0 and the "
                "add-on carries no newer one. It still installs and serves as before; the "
                "condition says nothing is wrong on the clusters, only that the platform has no "
                "future."
            ),
            todo=(
                "plan a move to `platform: KServe` (Standard mode serves the same model "
                "formats); the condition goes when the ModelServing no longer asks for "
                "ModelMesh."
            ),
        ),
    ),
    level=3,
)


CLUSTER_BEFORE = Group(
    'cluster-before',
    (
        Entry(
            (CP.WAITING,),
            title="`Waiting` (phase)",
            means=(
                "The intent is held back on this cluster until something else is true there; "
                "`reason` is the first gate, `waitingFor` lists them all. Gates only hold back an "
                "intent never sent to that cluster: once sent, it is kept up to date whatever "
                "happens later."
            ),
        ),
        Entry(
            (CR.WAITING_FOR_PLATFORM,),
            seen=(
                "MultiClusterServingRuntime and MultiClusterInferenceService, phase `Waiting`, "
                "`waitingFor: [ServingPlatform Available]`."
            ),
            means=(
                "The cluster has no ServingPlatform in phase `Available`: no ModelServing selects "
                "it, or the platform is still installing, degraded or removed."
            ),
            todo=(
                "make sure a ModelServing selects this cluster (its Placement may differ from the "
                "model's) and look at that ModelServing's entry for the cluster."
            ),
        ),
        Entry(
            (CR.WAITING_FOR_STORAGE,),
            seen=(
                "MultiClusterInferenceService, phase `Waiting`, `waitingFor: [StorageConnection "
                "NAME delivered]`."
            ),
            means=(
                "A StorageConnection listed in `spec.storageConnections` is not `Delivered` on "
                "this cluster: it does not exist in this namespace, does not select this cluster, "
                "or is still being delivered or failed."
            ),
            todo=(
                "`kubectl -n NS get sconn NAME -o yaml` and read its entry for the cluster; check "
                "the name in `storageConnections`."
            ),
        ),
        Entry(
            (CR.WAITING_FOR_ROLLOUT,),
            seen=(
                "MultiClusterServingRuntime and MultiClusterInferenceService with a Progressive "
                "`spec.rollout`, phase `Waiting`, `waitingFor: [rollout of revision N reaches "
                "this cluster]`."
            ),
            means=(
                "The rollout has not reached this cluster yet and it has no earlier revision to "
                "keep (it joined the Placement, or the intent is new). `status.rollout` says "
                "which step is in progress and what its gates saw."
            ),
            todo=(
                "wait for the steps before it; if `status.rollout.phase` is `WaitingForApproval`, "
                "annotate as its message says; if `Halted` or `RolledBack`, fix the spec."
            ),
        ),
        Entry(
            (CR.WAITING_FOR_AGENT_KEY,),
            seen=(
                "StorageConnection, phase `Waiting`, `waitingFor: [agent public key published]`."
            ),
            means=(
                "The manager has not yet received the cluster agent's public key, so it cannot "
                "seal the credentials for it. The key comes back through the ManifestWork "
                "`model-serving-agent-identity` in the cluster namespace."
            ),
            todo=(
                "check that the add-on is enabled and `Available` on the cluster (`kubectl -n "
                "CLUSTER get managedclusteraddon model-serving`), that the identity work exists "
                "and its feedback has `publicKey` and `keyId`, and on the cluster that ConfigMap "
                "`model-serving-agent-identity` exists in the agent namespace. That namespace must "
                "be the one the ManagedClusterAddOn reports in `status.namespace` (the manager "
                "reads the key there, and ignores a key read back from another namespace); the "
                "agent's `--namespace` must match it. A freshly started agent publishes its key "
                "within seconds."
            ),
        ),
        Entry(
            (CR.AGENT_KEY_CHANGED,),
            seen="StorageConnection, phase `Failed`.",
            means=(
                "The agent of this cluster publishes another public key than the one pinned on the "
                "hub (`pin.CLUSTER` in ConfigMap `model-serving-sealing` in the manager's "
                "namespace). Nothing is sealed to the new key and what was delivered stays, "
                "because a key substituted through a forged identity work would let its author "
                "read the credentials."
            ),
            todo=(
                "if the change is expected (the agent's key Secret was deleted, the agent moved "
                "namespace), approve the key id the message names with the command it prints "
                "(`approve.CLUSTER` in that ConfigMap); the manager pins it and reseals. To change "
                "a key without any gap, rotate it instead "
                "(docs/user-guide.md#rotating-an-agent-key)."
            ),
        ),
        Entry(
            (CR.IDENTITY_WORK_INVALID,),
            seen="StorageConnection, phase `Failed`.",
            means=(
                "The ManifestWork `model-serving-agent-identity` in the cluster namespace is not "
                "the ReadOnly work the manager wrote (its update strategy, manifests or feedback "
                "rules were changed). Its key is not trusted; the manager writes the work again "
                "and seals once it reads back the key from the real one."
            ),
            todo=(
                "find who edits ManifestWorks in the cluster namespace (`kubectl -n CLUSTER get "
                "manifestwork model-serving-agent-identity -o yaml`, its `managedFields`)."
            ),
        ),
        Entry(
            (CR.WAITING_FOR_TENANT_ACCESS,),
            seen=(
                "StorageConnection, MultiClusterServingRuntime, MultiClusterInferenceService, "
                "phase `Waiting`, `waitingFor: [tenant identity model-serving-tenant-NS granted]`, "
                "or `... granted in namespace TARGET (it must exist on the cluster)`."
            ),
            means=(
                "The intent's works run on the cluster as its tenant's executor ServiceAccount "
                "(docs/security.md); the manager has written the tenant's access work "
                "(`model-serving-tenant-NS-<hash>` in the cluster namespace: the ServiceAccount "
                "and its Roles) and waits until the work agent reports the executor's RoleBinding "
                "applied in every namespace the intent's work writes to, so the work is not "
                "refused for lack of rights (OCM's work agent would retry a refused work only a "
                "minute later). It normally lasts seconds."
            ),
            todo=(
                "if it stays: when a namespace is named, it does not exist on the cluster: list it "
                "in the ModelServing's `servingNamespaces` or create it (while the intent waits, "
                "the manager changes the access work's `modelserving.opendatahub.io/grant-retry` "
                "label every 15 s, so OCM's work agent applies the grant as soon as the namespace "
                "is there instead of after its retry backoff). Otherwise look at that access "
                "work's status on the hub (`kubectl -n CLUSTER get manifestwork "
                "model-serving-tenant-NS-... -o yaml`); the work agent must be running and may "
                "create ServiceAccounts, Roles and RoleBindings (OCM's klusterlet roles do)."
            ),
        ),
        Entry(
            (CP.PENDING, CR.SENDING,),
            title="`Pending` (phase) / `Sending`",
            seen="Reason **Sending**, any intent.",
            means=(
                "The ManifestWork for this cluster is about to be written (or its write is in "
                "flight). It normally lasts one reconcile. If it stays, read the manager log."
            ),
        ),
    ),
    level=4,
)


CLUSTER_PROBLEMS = Group(
    'cluster-problems',
    (
        Entry(
            (CP.CONFLICT, CR.CONFLICT,),
            seen=(
                "ModelServing, phase and reason `Conflict`, message `ModelServing NS/NAME (older) "
                "already serves this cluster`; also a `Warning` Event with reason `Conflict`."
            ),
            means=(
                "Two ModelServings select the same cluster. One platform per cluster: the oldest "
                "ModelServing (creation time, then namespace, then name) owns the cluster, the "
                "newer one sends nothing there and deletes its work if it had one."
            ),
            todo=(
                "narrow one of the Placements, or delete the newer ModelServing. To switch a "
                "cluster's platform, change `platform` of the owning ModelServing instead."
            ),
        ),
        Entry(
            (CR.RENDER_FAILED,),
            seen=(
                "Any intent, cluster phase `Failed`, message `spec for CLUSTER is invalid after "
                "overrides: spec.FIELD: ...`."
            ),
            means=(
                "The spec with this cluster's overrides applied is not valid for its kind (for a "
                "ModelServing, not a valid ServingPlatform spec): an override patch set a wrong "
                "value (e.g. `platform: Foo`, `targetNamespace: Bad_NS`, `type: ftp`) or removed a "
                "required field. Only the clusters the override selects fail. **What to do:** fix "
                "the `patch` of the override that selects this cluster; the message names the "
                "invalid field.\n"
                "\n"
                "*Message `spec.template: the ManifestWork for CLUSTER would carry N bytes of "
                "manifests, more than the 512000 OCM accepts`.* The template is passed through as "
                "is, so admission cannot bound its size, but OCM refuses ManifestWorks whose "
                "manifests exceed 500 KiB. **What to do:** shrink the template (large data belongs "
                "in the model storage, not in the spec)."
            ),
        ),
        Entry(
            (CR.SECRET_NOT_FOUND,),
            seen="StorageConnection, phase `Failed`, message `Secret NAME does not exist`.",
            means=(
                "`spec.secretRef.name` names no Secret in the StorageConnection's namespace on the "
                "hub. It is checked once the cluster's agent key is known (so a new cluster shows "
                "`WaitingForAgentKey` first)."
            ),
            todo=(
                "create the Secret in the same namespace; the manager seals and sends as soon as "
                "it appears."
            ),
        ),
        Entry(
            (CR.SECRET_KEY_MISSING,),
            seen=(
                "StorageConnection, phase `Failed`, message `Secret NS/NAME has no key 'KEY' "
                "(named by spec.secretRef.keys.FIELD); nothing is delivered until it has`."
            ),
            means=(
                "`spec.secretRef.keys` maps a credential field to a key of the Secret, and the "
                "Secret has no such key. Credentials are delivered whole or not at all: no entry "
                "reaches the cluster (one delivered before stays as it was)."
            ),
            todo=(
                "add the key to the Secret or fix the mapping; the manager seals and sends as soon "
                "as both agree."
            ),
        ),
        Entry(
            (CR.SECRET_FORBIDDEN,),
            seen=(
                "StorageConnection, phase `Failed`, message `Secret NS/NAME: the manager may not "
                "read Secrets in namespace NS (HTTP 403 Forbidden); a hub admin grants it get, "
                "list and watch on secrets there: add NS to the chart's manager.secretNamespaces "
                "(...); nothing is delivered until it may`."
            ),
            means=(
                "The manager has no cluster-wide right on Secrets: it reads them only in the "
                "namespaces a hub admin granted (`docs/hub-setup.md`, \"The manager's Secrets\"). "
                "Nothing reaches the cluster (an entry delivered before stays as it was)."
            ),
            todo=(
                "ask the hub admin to add the namespace to `manager.secretNamespaces` (`helm "
                "upgrade`) or to create the RoleBinding to ClusterRole "
                "`model-serving-addon-manager-secrets` there. The manager retries every 10 "
                "seconds; no restart."
            ),
        ),
        Entry(
            (CR.SECRET_UNDECODABLE,),
            seen=(
                "StorageConnection, phase `Failed`, message `Secret NS/NAME: the value of key "
                "'KEY' is not base64 of UTF-8 text; nothing is delivered until it is`."
            ),
            means=(
                "A key whose value is sealed (those `spec.secretRef.keys` names, or every key of "
                "the Secret when it names none) holds binary data. Credentials are delivered whole "
                "or not at all."
            ),
            todo=(
                "store the credential as text (`stringData`), or map only the text keys with "
                "`spec.secretRef.keys`."
            ),
        ),
        Entry(
            (CR.SECRET_READ_FAILED,),
            seen=(
                "StorageConnection, phase `Failed`, message `Secret NS/NAME: get secrets: HTTP "
                "CODE ...`."
            ),
            means=(
                "The read of the Secret right before sealing failed for another reason than a 403 "
                "(after retries)."
            ),
            todo="look at the hub API server; the manager tries again on its next reconcile.",
        ),
        Entry(
            (CR.SPOKE_OBJECT_OWNED,),
            seen=(
                "MultiClusterInferenceService or MultiClusterServingRuntime, phase `Conflict`, "
                "message `cluster CLUSTER: KIND NS/NAME exists there and field F is owned by "
                "MANAGER ...`."
            ),
            means=(
                "An object of the intent's name already exists in the spoke namespace and "
                "someone other than the add-on (a user's `kubectl apply`, another controller: "
                "the field manager named) owns fields the intent would change. The add-on "
                "never takes such an object over; nothing of it was changed."
            ),
            todo=(
                "if the object is yours and should be the add-on's, delete it on the cluster "
                "(OCM's work agent creates the intent's at its next resync, within 4 minutes); "
                "otherwise rename the intent or target another namespace."
            ),
        ),
        Entry(
            (CR.STORAGE_DOWNLOAD_FAILED,),
            seen=(
                "MultiClusterInferenceService, phase `Failed`, message `the model download "
                "failed (exit code N: ...)`."
            ),
            means=(
                "KServe's storage initializer, the init container of the predictor's pods, "
                "could not download `storageUri`; the message is its own (e.g. an access "
                "denied: the StorageConnection's Secret holds a wrong key; no such key: the "
                "URI names nothing). Found by the agent in the pods' status."
            ),
            todo=(
                "fix the StorageConnection's Secret or the model's `storageUri`; the pods "
                "retry on their own, and `model-serving-addon explain mcisvc/NAME` shows the "
                "cluster's entry."
            ),
        ),
        Entry(
            (CR.MODEL_NOT_LOADED,),
            seen=(
                "MultiClusterInferenceService, phase `Failed`, message `the model server "
                "exited before it was ever ready: the model did not load (restarted N times; "
                "last exit code X: ...)`."
            ),
            means=(
                "The model was downloaded, but the model server exits while it starts, before "
                "it ever answered its readiness check: it cannot load what it was given (no "
                "model file at the path, a file of another format or library version, a "
                "model for another runtime). The message ends with the server's own last "
                "words. Found by the agent in the pods' status: the server's restarts, and "
                "the pod never Ready since its storage initializer finished."
            ),
            todo=(
                "check what the storage path holds (one model file the runtime loads: "
                "`model.joblib` for sklearn), the model format and the runtime in the intent; "
                "the predictor pod's logs on the cluster say more."
            ),
        ),
        Entry(
            (CR.CRASH_LOOPING,),
            seen=(
                "MultiClusterInferenceService, phase `Failed`, message `the model server "
                "restarted N times; last exit code X: ...`."
            ),
            means=(
                "The model server, ready before, keeps exiting and the kubelet restarts it "
                "with back-off; the message is its last termination message (the server runs "
                "out of memory: exit code 137; killed; a fault while serving)."
            ),
            todo=(
                "read the message and the predictor pod's logs on the cluster; fix the model "
                "or the resources in the intent's template."
            ),
        ),
        Entry(
            (CR.REPLICAS_NOT_READY,),
            seen=(
                "MultiClusterInferenceService, message `K of N replicas ready`; phase `Ready` "
                "while at least one serves, else `Progressing`."
            ),
            means="Fewer of the predictor's pods are ready than its Deployment asks for.",
            todo=(
                "wait while a rollout or restart runs; if it stays, look at the cluster's "
                "predictor pods (scheduling, probes)."
            ),
        ),
        Entry(
            (CR.SPEC_NOT_BUILT,),
            seen="MultiClusterInferenceService, phase `Progressing`.",
            means=(
                "KServe has not yet built the predictor Deployment from the intent's current "
                "spec (the Deployment carries the hash of another spec); what KServe reports "
                "Ready is the previous spec, and is not counted."
            ),
            todo="wait; if it stays, `explain` the intent and look at KServe's events there.",
        ),
        Entry(
            (CR.SPEC_REJECTED,),
            seen=(
                "MultiClusterInferenceService, phase `Failed`, message KServe's reconcile "
                "error (e.g. `StorageURI not supported: ...`)."
            ),
            means=(
                "KServe's controller refused the current spec and kept the previous one: "
                "its Ready is about the old spec, so the cluster is not counted Ready for "
                "this one (nor by a rollout's gates)."
            ),
            todo="fix the field KServe names in the intent (or its override for the cluster).",
        ),
        Entry(
            (CR.ADDON_NOT_ENABLED,),
            seen=(
                "ModelServing, phase `Waiting`, message `the add-on is not enabled on CLUSTER "
                "...`."
            ),
            means=(
                "The Placement selects the cluster, but it has no ManagedClusterAddOn "
                "`model-serving`, so no agent runs there to install the stack, and the manager "
                "does not enable add-ons itself (chart value `manager.addonEnablement: false`, "
                "the default: the platform admin's install strategy decides). The works are "
                "written and wait for the agent."
            ),
            todo=(
                "enable the add-on on the cluster the way your hub does it: the "
                "ClusterManagementAddOn's install strategy (`addon.installStrategy`, e.g. "
                "`Placements`), `clusteradm addon enable --names model-serving --clusters "
                "CLUSTER`, or a ManagedClusterAddOn `model-serving` in the cluster namespace; or "
                "take the cluster out of the Placement."
            ),
        ),
        Entry(
            (CR.FOREIGN_WORK,),
            seen=(
                "Any intent, phase `Failed`, message `ManifestWork CLUSTER/NAME exists and is not "
                "ours` (or an HTTP 409 from the apply)."
            ),
            means=(
                "A ManifestWork with the name the add-on uses exists in the cluster namespace but "
                "does not carry the add-on's owner labels, and the manager never takes over "
                "someone else's work."
            ),
            todo=(
                "find out who created it (`kubectl -n CLUSTER get manifestwork NAME -o yaml`: "
                "labels, `managedFields`); delete it if it is stale. The manager then creates its "
                "own."
            ),
        ),
        Entry(
            (CR.APPLY_FAILED, PR.APPLY_FAILED,),
            means=(
                "Two places:\n"
                "\n"
                "- *Hub intent cluster entry, phase `Failed` (manager).* Writing the ManifestWork "
                "failed after retries (throttling, 5xx and conflicts are retried with backoff): "
                "for example the manager's RBAC does not allow it, an admission webhook on the hub "
                "rejected the work, the work is too large, or sealing the credentials to the "
                "published key failed. The message holds the API error. **What to do:** read the "
                "message and the manager log (`apply ... failed: ...`).\n"
                "- *ServingPlatform on the cluster, phase `Degraded`, conditions reason "
                "`ApplyFailed` (agent); on the hub the ModelServing cluster entry shows `Degraded` "
                "with message `apply failed: STATUS REASON: ...`.* The agent's server-side apply "
                "of a stack object failed; it retries after 10 s. **What to do:** read the message "
                "(often RBAC of the agent, an admission webhook or quota on the cluster), and the "
                "agent log."
            ),
        ),
        Entry(
            (CR.NO_ROUTE_API,),
            seen=(
                "MultiClusterInferenceService cluster entry with `spec.exposure` Route: phase "
                "`Ready` (or whatever the model is), no `externalUrl`, message `not exposed: "
                "cluster CLUSTER has no Route API (route.openshift.io); the model serves inside "
                "the cluster only`."
            ),
            means=(
                "The cluster is not OpenShift (its API server has no `routes` resource): the "
                "exposure falls back to none there, as asked for clusters without the Route "
                "API, and the model counts by its own state. OCM's work agent keeps retrying "
                "the Route in the background (its ManifestWork's `Applied` stays False)."
            ),
            todo=(
                "nothing, or turn the exposure off there with an override (`patch: "
                "{exposure: {type: None}}` for a `clusterSelector` such as `vendor: "
                "Kubernetes`) to stop the retries."
            ),
        ),
        Entry(
            (CR.ROUTE_NOT_CREATED,),
            seen=(
                "MultiClusterInferenceService cluster entry, phase `Failed`, message `cluster "
                "CLUSTER: Route NAMESPACE/NAME was not created, the model is not reachable from "
                "outside the cluster (it serves inside it): ERROR`."
            ),
            means=(
                "`spec.exposure` asks for an OpenShift Route, and the cluster's Route API "
                "refused it (a cluster without that API is `NoRouteApi` instead): for example "
                "a host another Route holds, or outside the router's domains, or a "
                "`routes/custom-host` right missing. The InferenceService was applied and "
                "serves inside the cluster; the intent as asked is not in effect there."
            ),
            todo="fix what the error names (the host, or the identity's rights).",
        ),
        Entry(
            (CR.NOT_APPLIED,),
            seen="Any intent, phase `Failed`.",
            means=(
                "OCM's work agent reports the ManifestWork's `Applied` condition as False without "
                "a reason. Usually OCM does give a reason (e.g. `AppliedManifestWorkFailed`, see "
                "[below](#reasons-passed-through-from-ocm-and-kserve)), which is shown instead."
            ),
            todo=(
                "read the work's conditions and `status.resourceStatus` on the hub; typical causes "
                "are a missing CRD on the cluster (add-on not enabled there, or KServe not "
                "installed), a missing target namespace, or an object KServe's webhook rejects."
            ),
        ),
        Entry(
            (CR.POD_NOT_ALLOWED,),
            title="`PodNotAllowed` (cluster entry, MultiClusterServingRuntime / InferenceService)",
            seen=(
                "Cluster entry phase `Failed`, message `spec.template.predictor.hostNetwork: "
                "host namespaces are not allowed ... (as rendered for this cluster, overrides "
                "applied); the work is not written`."
            ),
            means=(
                "The ServingRuntime or InferenceService the manager would send this cluster "
                "(the template with the cluster's overrides merged) asks its pods for something "
                "a tenant may not: a host namespace (`hostNetwork`, `hostPID`, `hostIPC`), a "
                "`hostPath` volume, a privileged container, a capability Pod Security "
                "`baseline` does not allow, a host port, unconfined seccomp or AppArmor, an "
                "unsafe sysctl, `procMount`, SELinux types or users, Windows host processes, a "
                "`nodeName`, a ServiceAccount other than `default` and the ones the admin "
                "allows, or a priority class the admin does not allow. Nothing is written to "
                "that cluster; a work sent before stays as it was. The message names every "
                "refused field."
            ),
            todo=(
                "remove the field from the template or the override that sets it. A platform "
                "admin may allow more ServiceAccounts (chart value "
                "`manager.policy.podServiceAccounts`, manager flag `--pod-service-accounts`) "
                "or priority classes (`manager.policy.priorityClasses`, `--priority-classes`); "
                "the other rules are fixed (see docs/security.md)."
            ),
        ),
        Entry(
            (CR.KIND_NOT_ALLOWED,),
            title="`KindNotAllowed` (cluster entry)",
            seen="Cluster entry phase `Failed`, message `... is not a kind the add-on sends ...`.",
            means=(
                "The work the manager rendered carries an object of a kind that this intent's "
                "works never carry. It cannot come from a valid intent; it means a bug or a "
                "tampered manager. Nothing is written."
            ),
            todo="report it with the intent and the manager's version.",
        ),
    ),
    level=4,
)


CLUSTER_ON_ITS_WAY = Group(
    'cluster-on-its-way',
    (
        Entry(
            (CP.APPLYING, CR.WORK_NOT_APPLIED,),
            title="`Applying` (phase) / `WorkNotApplied`",
            seen="Any intent, reason **WorkNotApplied**.",
            means=(
                "The ManifestWork exists but OCM's work agent has not reported it applied yet. "
                "Normally seconds."
            ),
            todo=(
                "if it stays: the cluster may be offline (`kubectl get managedcluster CLUSTER`: "
                "`ManagedClusterConditionAvailable`) or its work agent is not running."
            ),
        ),
        Entry(
            (CR.WORK_UPDATING,),
            seen="Any intent, phase `Applying`.",
            means=(
                "The intent (or what it depends on) changed and the manager updated the "
                "ManifestWork, but OCM's work agent has not picked up the new spec yet (the work's "
                "conditions still carry an older `observedGeneration` than its "
                "`metadata.generation`). What the cluster reported is about the previous spec, so "
                "the cluster does not count as ready. Normally seconds; after `--stale-after` "
                "(default 60 s) the entry turns `Stale` / `WorkNotObserved`."
            ),
        ),
        Entry(
            (CR.WAITING_FOR_SPOKE,),
            seen=(
                "Any intent, phase `Applying` (progressing, not failed), message `cluster CLUSTER: "
                "KIND NAME not applied yet, the cluster is still setting up what admits it (the "
                "work agent retries): ` and the spoke API server's error."
            ),
            means=(
                "OCM's work agent tried to apply the object and the cluster refused it for a "
                "reason its own setup ends: the stack's admission webhook is not serving yet "
                "(`failed calling webhook ... connection refused` / `no endpoints available`), or "
                "the kind's CRD is not established yet (`no matches for kind`). This is normal for "
                "a few seconds right after a stack becomes Available."
            ),
            todo=(
                "nothing; if it stays, look at the stack's controller on the cluster (its webhook "
                "server) and at the ServingPlatform's status."
            ),
        ),
        Entry(
            (CP.APPLIED, CR.APPLIED,),
            seen="Phase or reason.",
            means=(
                "The work is applied on the cluster, but the cluster has not reported more yet: "
                "for a ModelServing or StorageConnection, the agent has not written a status (is "
                "the agent running? see `ManagedClusterAddOn`); for a MultiClusterServingRuntime, "
                "OCM does not report the ServingRuntime as available yet (`reason` is OCM's, e.g. "
                "`ResourcesStatusUnknown`); for a MultiClusterInferenceService (phase "
                "`Progressing`, reason `Applied`), KServe has not set a Ready reason yet."
            ),
        ),
        Entry(
            (CR.APPLY_FORBIDDEN,),
            seen="Any intent, phase `Failed`.",
            means=(
                "OCM's work agent on the cluster may not create or patch an object of the work. "
                "The message names the cluster, the work agent's identity, the verb and the "
                "resource, followed by the spoke API server's error, e.g. `cluster cluster1: "
                "system:serviceaccount:open-cluster-management-agent:klusterlet-work-sa may not "
                "patch servingplatforms.modelserving.opendatahub.io (ServingPlatform "
                "model-serving)`. The work agent runs with OCM's klusterlet roles plus every "
                "ClusterRole labelled `open-cluster-management.io/aggregate-to-work: \"true\"`; "
                "the add-on ships one, `open-cluster-management:model-serving:work`, in its "
                "AddOnTemplate (ServingPlatforms, SealedStorageConnections, ServingRuntimes, "
                "InferenceServices)."
            ),
            todo=(
                "check that the add-on is enabled on the cluster (`kubectl get managedclusteraddon "
                "model-serving -n CLUSTER`) and that the role exists there (`kubectl get "
                "clusterrole open-cluster-management:model-serving:work`) with the aggregation "
                "label, and that `open-cluster-management:klusterlet-work:aggregate` includes its "
                "rules. The work agent retries on its own; the entry heals without restarting "
                "anything."
            ),
        ),
        Entry(
            (CR.APPLY_FAILED,),
            title="`ApplyFailed` (from the cluster)",
            seen="Any intent, phase `Failed`.",
            means=(
                "The spoke API server refused an object of the work for another reason; the "
                "message is `cluster CLUSTER: KIND NAME was refused: ` and the server's own error "
                "(or the work agent's: `not allowed to apply the resource ...` when the tenant's "
                "executor may not write there; its Role in that namespace is missing, e.g. the "
                "namespace did not exist when the access work was applied: the work agent retries "
                "every minute, docs/security.md), which names the field (for example "
                "`.spec.predictor.model.storageUrl: field not declared in schema`: the hub checks "
                "a template's fields only down to the predictor's and the runtime spec's own, see "
                "the user guide's section 5). The same reason is used when the manager itself "
                "fails to write the work (the message then has no cluster prefix)."
            ),
            todo="fix the field in the intent (or its override for that cluster).",
        ),
        Entry(
            (CP.REMOVAL_BLOCKED, CR.INTENTS_ON_CLUSTER,),
            title="`RemovalBlocked` (phase) / `IntentsOnCluster`",
            seen=(
                "ModelServing, failed, message `the stack is not removed while add-on intents have "
                "ManifestWorks on this cluster: MultiClusterInferenceService NS/NAME, ...`."
            ),
            means=(
                "The stack is to be removed from the cluster (`managementState: Removed`, the "
                "ModelServing deleted, or the cluster left the ModelServing's Placement) but the "
                "named intents still have ManifestWorks there (even ones being deleted: their "
                "InferenceServices are not gone yet). The manager leaves the cluster's "
                "ServingPlatform work exactly as it was, so the stack and the models keep running. "
                "The ModelServing is not Ready (`RemovalBlocked`)."
            ),
            todo=(
                "delete the named intents (or take the cluster out of their Placements); once "
                "their works are gone from the cluster the removal proceeds by itself."
            ),
        ),
        Entry(
            (CP.REMOVING, CR.WORK_DELETING,),
            title="`Removing` (phase) / `WorkDeleting`",
            seen="Any intent, reason **WorkDeleting**.",
            means=(
                "The work is being deleted (cluster left the Placement, intent deleted) and OCM is "
                "removing what it carried; the message names the ManifestWork (for a ModelServing, "
                "it is the agent's own account of the uninstall when it gives one). If it stays, "
                "see `DeletionBlocked`; for a ModelServing, the agent may be refusing to "
                "uninstall: the entry then shows reason `RemovalBlocked` with the agent's message "
                "naming what blocks it. A cluster that left the Placement keeps its entry (and "
                "counts as not ready) until its work is gone, so a stuck removal never disappears "
                "from the hub."
            ),
        ),
        Entry(
            (CP.DEGRADED, CR.PLATFORM_REMOVING,),
            title="`PlatformRemoving`",
            seen=(
                "MultiClusterInferenceService or MultiClusterServingRuntime, phase `Degraded`, not "
                "ready, message `the ServingPlatform of this cluster reports Removing: ...` or "
                "`the ModelServing NS/NAME no longer serves this cluster: its ServingPlatform is "
                "being removed`."
            ),
            means=(
                "Whatever the object on the cluster says, the stack it runs on is going away (its "
                "ServingPlatform reports `Removing`, `Removed` or `RemovalBlocked`, or the "
                "ModelServing's work there is being deleted), so the model or runtime will not "
                "keep serving. The manager normally refuses such a removal while intents use the "
                "stack (`IntentsOnCluster`); this shows when the removal was ordered before the "
                "intent's work existed."
            ),
            todo=(
                "set the ModelServing back to `managementState: Managed`, or delete the intent."
            ),
        ),
    ),
    level=4,
)


CLUSTER_STALE = Group(
    'cluster-stale',
    (
        Entry(
            (CP.STALE, CR.CLUSTER_UNAVAILABLE, CR.WORK_NOT_OBSERVED,),
            title="`Stale` (phase) / `ClusterUnavailable` / `WorkNotObserved`",
            seen=(
                "Any intent, `stale: true`, `staleSince` set; counted in `summary.stale`, not as "
                "ready; the intent's `Degraded` condition is True (`ClustersStale`)."
            ),
            means=(
                "What the cluster last reported can no longer be trusted to be current. The "
                "message says what is stale, since when, and the phase the cluster last reported "
                "(e.g. `...; last reported: Ready`); `url` and `modelState` keep their last "
                "reported values.\n"
                "\n"
                "- **ClusterUnavailable**: the hub's `ManagedClusterConditionAvailable` of the "
                "cluster is False or Unknown (OCM's registration stopped hearing from the "
                "cluster's agent). `staleSince` is that condition's `lastTransitionTime`. The "
                "entry turns stale as soon as the condition changes. When the message adds `it "
                "left the Placement while not Available: its ManifestWorks are kept until TIME`, "
                "OCM's `unreachable`/`unavailable` taint took the cluster out of a Placement that "
                "does not tolerate it; the manager keeps every work of the cluster (nothing is "
                "uninstalled there) until TIME (`--unavailable-grace`, default one day after it "
                "stopped being Available), or removes them once the cluster is Available again and "
                "the Placement still does not select it (after 60 s of settling). **What to do:** "
                "if the cluster is meant to stay, add the tolerations of "
                "[examples/placement.yaml](../examples/placement.yaml) to the Placement (it is "
                "selected again at once) or bring the cluster back before TIME; if it is gone for "
                "good, nothing (its works go at TIME), or detach it.\n"
                "- **WorkNotObserved**: OCM's work agent on the cluster reported on the intent's "
                "ManifestWork before, but has not picked up its current spec (the work's "
                "conditions carry an older `observedGeneration` than its `metadata.generation`) "
                "for longer than the manager's `--stale-after` (default 60 s). `staleSince` is "
                "when the manager last changed the work (its `managedFields` entry), so it "
                "survives manager restarts. A work the work agent never reported on is not stale "
                "(there is no report to distrust): it stays `Applying` / `WorkNotApplied`.\n"
                "\n"
                "**What to do:** `kubectl get managedcluster CLUSTER` (is it Available? is its "
                "lease renewed?); on the cluster, is the OCM work agent running "
                "(`open-cluster-management-agent` namespace) and can it reach the hub? Once the "
                "work agent runs again it applies the current spec, reports it, and the entry "
                "heals by itself (next reconcile, within seconds of the report)."
            ),
        ),
    ),
    level=4,
)


CLUSTER_REPORTS = Group(
    'cluster-reports',
    (
        Entry(
            (CP.AVAILABLE, CR.AVAILABLE,),
            title="`Available` (MultiClusterServingRuntime; ModelServing)",
            seen="MultiClusterServingRuntime, phase and reason `Available`, ready.",
            means=(
                "The ServingRuntime is applied and OCM reports it available. For a ModelServing, "
                "`Available` is the ServingPlatform's phase (see "
                "[ServingPlatform](#on-the-cluster-servingplatform))."
            ),
        ),
        Entry(
            (CP.READY, CR.READY,),
            title="`Ready` (MultiClusterInferenceService)",
            seen="Phase and reason `Ready`, ready; `url` and `modelState` filled.",
            means="The InferenceService's `Ready` condition is True on the cluster.",
        ),
        Entry(
            (CP.PROGRESSING,),
            title="`Progressing` (MultiClusterInferenceService)",
            seen=(
                "Phase `Progressing`; `reason` is KServe's Ready reason (or `Applied`), `message` "
                "its Ready message."
            ),
            means=(
                "The InferenceService exists and is not Ready yet: pulling images, downloading the "
                "model, waiting for the runtime."
            ),
            todo=(
                "if it stays: on the cluster, `kubectl -n TARGET describe inferenceservice NAME` "
                "and the predictor pods' events. A model that needs a StorageConnection reads it "
                "from `storage-config` in its namespace."
            ),
        ),
        Entry(
            (CP.FAILED,),
            title="`Failed` (phase)",
            seen="Phase `Failed`.",
            means=(
                "The cluster failed: `reason` says how (one of the manager's problems above, an "
                "OCM apply failure, KServe's `BlockedByFailedLoad`/`InvalidSpec`/failure reason, "
                "or, for a StorageConnection, the SealedStorageConnection's phase `Failed`)."
            ),
        ),
        Entry(
            (CR.BLOCKED_BY_FAILED_LOAD,),
            seen="MultiClusterInferenceService, phase `Failed`.",
            means=(
                "KServe's `modelStatus.transitionStatus` on the cluster: the latest model could "
                "not be loaded, so the transition is blocked. The message is KServe's "
                "`lastFailureInfo.message` (or its Ready message)."
            ),
            todo=(
                "check the `storageUri`/`storage` settings and credentials (the StorageConnection "
                "entry), the model format and the runtime; the predictor pod logs on the cluster "
                "say why the load failed."
            ),
        ),
    ),
    level=4,
)


PLATFORM = Group(
    'platform',
    (
        Entry(
            (PP.INSTALLING, PR.INSTALLING,),
            seen="Phase and reason `Installing`.",
            means=(
                "The stack is being installed or upgraded: a CRD is not `Established` yet, or a "
                "stack Deployment is missing or still rolling out; the message lists what it waits "
                "for (`waiting for CRD ..., Deployment ...`, or `CRDs not Established: ...`). "
                "Normally seconds to a minute."
            ),
            todo=(
                "if it stays: on the cluster, look at the Deployments it names (`kubectl -n kserve "
                "get deploy,pods` or `-n modelmesh-serving`): image pulls, scheduling, resources "
                "from `spec.components`."
            ),
        ),
        Entry(
            (PP.UPGRADING, PR.UPGRADING_CONTROLLERS,),
            seen=(
                "Phase `Upgrading`, reason **UpgradingControllers**, message `upgrading KServe "
                "FROM -> TO: CRDs applied; waiting for kserve-controller-manager to roll out "
                "before the configuration`; `stackVersion` is still FROM, `targetVersion` TO."
            ),
            means=(
                "`spec.version` changed (an upgrade or a downgrade of the same platform). The "
                "agent applied the new version's CRDs (never removing one, and never replacing a "
                "newer version's CRD by an older one: the older schema would prune fields from "
                "stored objects) and its controllers with their RBAC, and waits for the "
                "controllers to roll out; then it applies the configuration (ConfigMaps, "
                "webhooks, serving runtimes) and removes what the new version no longer has. "
                "InferenceServices keep serving throughout. The hub shows the cluster "
                "`Upgrading`, not ready, and new models wait for it; models already there are "
                "not touched."
            ),
            todo=(
                "if it stays: the controller Deployment's rollout on the cluster (`kubectl -n "
                "kserve rollout status deploy/kserve-controller-manager`): image pulls, crash "
                "loops of the new version. Setting `spec.version` back returns the same way."
            ),
        ),
        Entry(
            (PR.VERSION_NOT_CARRIED,),
            seen=(
                "Phase `Degraded`, reason `VersionNotCarried`, message `KServe VERSION is not a "
                "version this agent carries; it has v0.17.0, v0.20.0`."
            ),
            means=(
                "`spec.version` names a release the agent image has no bundle of. Nothing is "
                "applied; the installed stack is left as it is."
            ),
            todo=(
                "set `spec.version` to one of the versions the message lists (or leave it out "
                "for the newest), or upgrade the add-on to an agent that carries the version."
            ),
        ),
        Entry(
            (PR.DEV_FLAGS_NOT_ALLOWED, PR.NAMESPACE_NOT_ALLOWED),
            title="`DevFlagsNotAllowed` / `NamespaceNotAllowed` (ServingPlatform)",
            seen=(
                "Phase `Degraded`, message `spec.devFlags is not allowed on this cluster ...` or "
                "`spec.servingNamespaces[N]: spoke namespace 'X' is never a tenant's target ...`."
            ),
            means=(
                "The agent checks what the hub sent again, with the policy it was started with "
                "(`--allow-dev-flags`, `--target-namespaces`, from the add-on's "
                "AddOnDeploymentConfig): the ServingPlatform carries devFlags the agent may not "
                "install, or a serving namespace the policy denies for the ModelServing's hub "
                "namespace. The hub's manager refuses the same before it sends anything, so this "
                "means the hub and the cluster disagree (another AddOnDeploymentConfig on this "
                "cluster, or a work that did not come from the manager). Nothing is changed; the "
                "installed stack is left as it is."
            ),
            todo=(
                "compare the cluster's AddOnDeploymentConfig variables (`ALLOW_DEV_FLAGS`, "
                "`TARGET_NAMESPACES`) with the chart's `manager.policy`; find who wrote the "
                "ManifestWork (`kubectl -n CLUSTER get manifestwork -o yaml`)."
            ),
        ),
        Entry(
            (PR.OWNED_BY_ANOTHER_OPERATOR,),
            seen=(
                "Phase `Degraded`, reason `OwnedByAnotherOperator`, message `KServe on this "
                "cluster is managed by OWNER (EVIDENCE); the agent changes nothing of it. ...`."
            ),
            means=(
                "`spec.managementState` is `Managed`, but the cluster's KServe (its "
                "InferenceService CRD, its controller Deployment in any namespace, or its "
                "`inferenceservice-config`) carries another manager's mark: an owner reference, "
                "an `app.kubernetes.io/managed-by` label that is not the add-on's, an OLM label, "
                "or fields managed by an operator (Open Data Hub / OpenShift AI, a Helm release). "
                "The agent applies nothing, so it never fights that operator."
            ),
            todo=(
                "set `spec.managementState: Unmanaged` to serve with that KServe (see "
                "`UsingExistingStack`), or remove KServe from the other operator first (for "
                "Open Data Hub, its KServe component `Removed`) and keep `Managed`."
            ),
        ),
        Entry(
            (PR.USING_EXISTING_STACK, PR.WAITING_FOR_EXISTING_STACK),
            seen=(
                "Phase `Available`, reason **UsingExistingStack**, message `serving with KServe "
                "VERSION installed by OWNER (Deployment NAMESPACE/kserve-controller-manager); the "
                "agent installs and changes nothing of the stack here`; or phase `Installing`, "
                "reason **WaitingForExistingStack** until that controller is available."
            ),
            means=(
                "`spec.managementState: Unmanaged`: the agent found a KServe it did not install, "
                "of a supported version, and serves with it. It still enables the serving "
                "namespaces and delivers credentials, and the hub releases runtimes and models "
                "to the cluster. What an earlier `Managed` install of the agent left stays as it "
                "was (neither reconciled nor removed)."
            ),
            todo=(
                "if it stays `WaitingForExistingStack`: the other operator's controller "
                "Deployment the message names."
            ),
        ),
        Entry(
            (PR.STACK_NOT_FOUND,),
            seen=(
                "Phase `Degraded`, reason `StackNotFound`, message `spec.managementState is "
                "Unmanaged but no KServe is installed on the cluster (CRD "
                "inferenceservices.serving.kserve.io not found); ...` (or no Deployment "
                "`kserve-controller-manager` in any namespace)."
            ),
            means="`Unmanaged` asks to serve with a KServe that is not on the cluster.",
            todo=(
                "install KServe (through the operator that should own it), or set `Managed` to "
                "have the agent install it."
            ),
        ),
        Entry(
            (PR.UNSUPPORTED_VERSION,),
            seen=(
                "Phase `Degraded`, reason `UnsupportedVersion`, message `KServe VERSION installed "
                "by OWNER is older than the add-on supports (v0.17.0 or newer)`."
            ),
            means=(
                "`Unmanaged` found a KServe older than the oldest release the agent carries (the "
                "version is read from the controller's `app.kubernetes.io/version` label or its "
                "image tag). The hub does not release models to the cluster."
            ),
            todo="upgrade KServe through the operator that owns it.",
        ),
        Entry(
            (PP.AVAILABLE, PR.ALL_COMPONENTS_AVAILABLE,),
            seen=(
                "Phase `Available`, reason **AllComponentsAvailable**, message `VERSION: all "
                "components available`."
            ),
            means=(
                "Every CRD is Established and every stack Deployment is Available for its current "
                "generation. The hub counts the cluster ready and releases runtimes and models "
                "gated on it."
            ),
        ),
        Entry(
            (PP.DEGRADED, PR.COMPONENTS_UNAVAILABLE,),
            seen=(
                "Phase `Degraded`, reason **ComponentsUnavailable**, message `not available: NAME, "
                "...`."
            ),
            means=(
                "A stack Deployment finished its rollout (or hit its progress deadline) and is not "
                "Available. The hub counts the cluster failed."
            ),
            todo=(
                "`kubectl -n kserve describe deploy NAME` and its pods: crash loops, failed image "
                "pulls (check `devFlags.images`), unschedulable pods (resources, node selectors), "
                "webhook certificate problems in the controller log."
            ),
        ),
        Entry(
            (PR.REPLICAS_WARNING,),
            seen=(
                "Condition `Degraded` = True with reason `ReplicasWarning` while the phase may "
                "still be `Available`; the message ends with `warning: NAME may run N replicas; "
                "with leader election only one is active`."
            ),
            means=(
                "A controller is set to run more than 2 replicas (`replicas`, or "
                "`autoscaling.maxReplicas`). It works, but only one replica is active. The hub "
                "sees the warning in the cluster entry's message; the cluster still counts as "
                "ready if Available."
            ),
            todo=(
                "lower `replicas`/`maxReplicas` for that component (in the ModelServing or its "
                "override), or accept the warning."
            ),
        ),
        Entry(
            (PR.RUNTIMES_NOT_APPLIED,),
            seen=(
                "Condition `Degraded` = True with reason `RuntimesNotApplied` while the phase may "
                "still be `Available`; the message ends with `runtimes not applied: "
                "ClusterServingRuntime NAME: ERROR`."
            ),
            means=(
                "The stack's built-in runtimes (`spec.kserve.builtInRuntimes` or "
                "`spec.modelmesh.builtInRuntimes`, on by default) could not be applied, usually "
                "because the stack's admission webhook for serving runtimes cannot be reached yet, "
                "or it rejected them: KServe's `clusterservingruntime.serving.kserve.io`, served "
                "by `kserve-controller-manager`; ModelMesh's "
                "`modelmesh-servingruntime.serving.kserve.io`, served by `modelmesh-controller`. A "
                "first install creates the runtimes before that webhook is configured; later "
                "changes to them (and every agent restart, which applies them again) go through "
                "it. The rest of the stack is installed; the runtimes are tried again on every "
                "reconcile, and the condition clears once they apply."
            ),
            todo=(
                "check that the controller is Available and its log for webhook errors; set "
                "`builtInRuntimes: false` if the cluster brings its own runtimes."
            ),
        ),
        Entry(
            (PR.FOREIGN_OBJECT_CONFLICT,),
            seen=(
                "Phase `Degraded`, reason **ForeignObjectConflict**, message `not taken over "
                "(exist and are not the add-on's; the agent neither changes nor deletes them): "
                "KIND NS/NAME, ...`."
            ),
            means=(
                "An object of the stack's bundle (a Deployment, ConfigMap, ClusterRole, webhook "
                "configuration, ...) already exists on the cluster with the same name and was not "
                "created by the add-on (it lacks `app.kubernetes.io/managed-by: "
                "model-serving-addon`). The agent does not apply over it, label it, or ever delete "
                "it; everything else of the stack is installed, but the stack is not reported "
                "`Available` (the hub counts the cluster failed) while a needed object is someone "
                "else's. A built-in serving runtime of the same name (`ClusterServingRuntime "
                "NAME`) is only reported: condition `Degraded` with this reason, the phase "
                "unchanged, since one of that name serves anyway. Exceptions: a pre-existing "
                "Namespace of the bundle is used as it is (never labelled or deleted), and a "
                "pre-existing CRD is updated to the stack's version (the stack cannot run without "
                "it) but never labelled or deleted."
            ),
            todo=(
                "find out who made the object; delete it (the agent then creates its own on the "
                "next reconcile) or remove that stack from this cluster. For runtimes, "
                "`builtInRuntimes: false` also ends the report."
            ),
        ),
        Entry(
            (PR.BUNDLE_ERROR,),
            seen="Phase `Degraded`, reason `BundleError`.",
            means=(
                "The stack bundle could not be loaded: a `devFlags.manifests` URI that cannot be "
                "fetched or read (`file:///` path missing on the agent's filesystem, https "
                "download failed, bad tarball), a `contextDir`/`sourcePath` that does not exist, a "
                "directory that holds no YAML or whose kustomization does not build, or no "
                "rendered bundle for the platform and version in the agent image. The agent also "
                "refuses a bundle it must not trust: `sha256 digest mismatch: got X, want Y` (the "
                "tarball is not the one `devFlags.manifests.sha256` names; nothing of it is used "
                "or kept), `is too large` (a tarball over 64 MiB), `an https bundle needs "
                "devFlags.manifests.sha256` (an object stored before admission required the "
                "digest), `unsupported scheme` (only `file://` and `https://`), and `the bundle "
                "holds kinds the agent does not apply: KIND NAME (apiVersion), ...` (an object "
                "whose kind is not one the pinned KServe and ModelMesh bundles contain; the whole "
                "bundle is refused, nothing of it is applied). The installed stack is left "
                "untouched."
            ),
            todo=(
                "fix `devFlags.manifests` (the message says which part failed), or remove it to go "
                "back to the built-in bundle."
            ),
        ),
        Entry(
            (PR.ANOTHER_PLATFORM_OWNS,),
            seen=(
                "Phase `Degraded`, reason `AnotherPlatformOwns`, message `ServingPlatform NAME "
                "manages the serving stack of this cluster`."
            ),
            means=(
                "More than one ServingPlatform exists on the cluster (the manager only ever sends "
                "one, named `model-serving`, so another was created by hand or by something else). "
                "The oldest owns the stack; this one does nothing, and deleting it removes "
                "nothing."
            ),
            todo="delete the extra ServingPlatform.",
        ),
        Entry(
            (PP.REMOVAL_BLOCKED, PR.FOREIGN_OBJECTS_PRESENT,),
            seen=(
                "Phase `RemovalBlocked`, reason **ForeignObjectsPresent**, message `2 "
                "ServingRuntime, 1 InferenceService not created by the add-on remain (...): "
                "ServingRuntime NS/NAME, NS/NAME, ...` (kinds with counts, then the first 20 "
                "objects)."
            ),
            means=(
                "The platform is to be removed (`managementState: Removed`, the ModelServing "
                "deleted, or the cluster left its Placement), but objects the add-on did not "
                "create exist that the uninstall would take with it: any object of a kind whose "
                "CRD the agent installed and would delete (ServingRuntimes, InferenceGraphs, "
                "TrainedModels, ... whatever the installed bundle's CRDs serve), and "
                "InferenceServices or finalizer-carrying objects of the stack's kinds whoever "
                "installed their CRD (their controller would go). The stack's own objects "
                "(built-in runtimes) and those the add-on's intents created do not count. Nothing "
                "is removed; once they are gone the removal goes on by itself. The hub counts the "
                "cluster failed (phase `RemovalBlocked` with this message); a deletion stays "
                "blocked (`DeletionBlocked` on the hub)."
            ),
            todo=(
                "delete or move those objects, or force the uninstall for that cluster with an "
                "override on the ModelServing: `overrides: [{clusterNames: [CLUSTER], patch: "
                "{force: true}}]` (`force` is a ServingPlatform field; the CRDs that still have "
                "objects are then kept, see `RemovedWithLeftovers`)."
            ),
        ),
        Entry(
            (PR.WAITING_FOR_INFERENCE_SERVICES,),
            seen=(
                "Phase `Removing`, reason **WaitingForInferenceServices**, message `waiting for "
                "InferenceServices to be deleted: NS/NAME, ...`."
            ),
            means=(
                "The stack is to be removed and InferenceServices the add-on created still exist "
                "(their ManifestWorks are being deleted), or other objects of the stack's kinds "
                "that carry finalizers (`TrainedModel NS/NAME`, ...). The agent deletes nothing "
                "before they are gone: KServe's controller must keep running to process their "
                "finalizers, or they would stay `Terminating` for ever. With `force: true` only "
                "those already being deleted are waited for."
            ),
            todo=(
                "usually nothing; if one stays, look at it on the cluster (`kubectl get isvc -A`) "
                "and at the MultiClusterInferenceService that created it."
            ),
        ),
        Entry(
            (PP.REMOVING, PR.REMOVING,),
            seen=(
                "Phase and reason `Removing`, message `uninstalling the stack` or `waiting for "
                "removal of KIND NAME, ...`."
            ),
            means=(
                "The agent is deleting what it installed, in reverse order, and waits for the "
                "objects to disappear (namespaces and CRDs with finalizers can take a while)."
            ),
            todo=(
                "if it stays: look at the objects it names on the cluster (a namespace stuck "
                "`Terminating`, a CRD whose instances have finalizers)."
            ),
        ),
        Entry(
            (PP.REMOVED, PR.REMOVED,),
            seen="Phase and reason `Removed`, message `the stack is not installed`.",
            means=(
                "Everything the agent installed is gone. With `managementState: Removed` the hub "
                "counts the cluster ready. Set `managementState: Managed` to install again."
            ),
        ),
        Entry(
            (PR.REMOVED_WITH_LEFTOVERS,),
            seen=(
                "Phase `Removed`, reason **RemovedWithLeftovers**, message `the stack is removed[ "
                "(force)]; left in place because they still hold objects the agent does not "
                "delete: CustomResourceDefinition NAME (N left: NS/NAME, ...); Namespace NS (holds "
                "KIND NS/NAME, ...)`."
            ),
            means=(
                "The stack is removed, but a namespace the agent created (the stack's own, e.g. "
                "`kserve`, or a serving namespace) that holds objects the agent did not create is "
                "kept, with or without `force`, and named with what it holds. Not counted: the "
                "add-on's own objects, objects with an owner (made by a controller for another "
                "object), Events, Leases, Endpoints, and what Kubernetes puts into every namespace "
                "(`kube-root-ca.crt`, the `default` ServiceAccount); only kinds the agent may list "
                "(its ClusterRole) are seen. A forced removal (`force: true`) also keeps a CRD "
                "whose kind still has instances (the controller is gone, so objects there with "
                "finalizers cannot be deleted until it runs again). The hub counts the cluster "
                "removed. While the ServingPlatform stays (`managementState: Removed`) the agent "
                "looks again on every resync and deletes a kept namespace once it holds nothing "
                "else."
            ),
            todo=(
                "move or delete those objects (the agent then deletes the namespace), or delete "
                "the CRDs and namespace yourself, or set `managementState: Managed` (the agent "
                "takes them back)."
            ),
        ),
    ),
    level=3,
)


SEALED = Group(
    'sealed',
    (
        Entry(
            (SP.DELIVERED, SR.DELIVERED,),
            seen=(
                "Phase `Delivered`, condition `Delivered` = True with reason `Delivered`, message "
                "`entry delivered to NS, ...`."
            ),
            means=(
                "The entry is in the `storage-config` Secret of every target namespace. The hub "
                "counts the cluster ready, and InferenceServices waiting for this connection "
                "(`WaitingForStorage`) are sent."
            ),
        ),
        Entry(
            (SR.NAMESPACE_MISSING,),
            seen=(
                "Phase `Pending` (not failed), reason `NamespaceMissing`, message `target "
                "namespaces do not exist: NS, ...`."
            ),
            means=(
                "A namespace of `spec.targetNamespaces` does not exist on the cluster. The hub "
                "shows the cluster progressing with phase `Pending`."
            ),
            todo=(
                "list the namespace in the ModelServing's `servingNamespaces` (the agent creates "
                "it) or create it; the agent watches for the namespace and delivers the moment it "
                "exists (no resync wait)."
            ),
        ),
        Entry(
            (SR.NAMESPACE_TERMINATING,),
            seen=(
                "Phase `Pending` (not failed), reason **NamespaceTerminating**, message `target "
                "namespaces are being deleted, nothing is written into them: NS, ...`."
            ),
            means=(
                "A target namespace is being deleted (typically a serving namespace the agent "
                "created, while the stack is removed); nothing can be created in it, so the agent "
                "writes nothing and retries. Once it is gone the reason is `NamespaceMissing`."
            ),
            todo=(
                "nothing, unless the namespace stays `Terminating`: then look at what holds it "
                "(`kubectl get ns NS -o yaml`, its `status.conditions`)."
            ),
        ),
        Entry(
            (SR.NAMESPACE_NOT_ALLOWED,),
            seen=(
                "Phase `Failed`, reason `NamespaceNotAllowed`, message `NS: spoke namespace 'NS' "
                "is not allowed for hub namespace 'HUB' ...`."
            ),
            means=(
                "The agent checks a connection's `targetNamespaces` against the namespace policy "
                "it was started with (`--target-namespaces`, from the AddOnDeploymentConfig "
                "variable `TARGET_NAMESPACES`) for the hub namespace it was sealed for (the `<hub "
                "namespace>.` prefix of its name; `spec.source` must agree), and writes nothing "
                "when one is not allowed. The manager refuses such connections on the hub already, "
                "so on the cluster this means the agent's policy differs from the manager's (a "
                "cluster with its own AddOnDeploymentConfig lacking the variable: the default, "
                "same name only, applies) or the object did not come from the manager."
            ),
            todo=(
                "give the cluster's AddOnDeploymentConfig the same `TARGET_NAMESPACES` as the "
                "chart's default one."
            ),
        ),
        Entry(
            (SR.KEY_MISMATCH,),
            seen=(
                "Phase `Failed`, reason `KeyMismatch`, message `sealed for key A, agent holds B`."
            ),
            means=(
                "The payload was sealed to a key the agent does not hold, typically because the "
                "agent's key Secret (`model-serving-agent-key`) was deleted and a new key "
                "generated; the manager re-seals once the new key reaches it through "
                "`model-serving-agent-identity`, so this normally clears by itself."
            ),
            todo=(
                "if it stays: compare `keyId` in the identity ConfigMap on the cluster with the "
                "identity work's feedback on the hub; check that the identity work is applied."
            ),
        ),
        Entry(
            (SR.DECRYPT_FAILED,),
            seen=(
                "Phase `Failed`, reason `DecryptFailed` (on the cluster's SealedStorageConnection "
                "and, through the work's status feedback, on the hub StorageConnection's entry for "
                "that cluster)."
            ),
            means=(
                "The sealed payload does not open with the agent's key for this object: it was "
                "edited, or copied from another SealedStorageConnection (a payload is bound to "
                "`<namespace>/<name>` of the object it was sealed for)."
            ),
            todo=(
                "do not edit SealedStorageConnections by hand. Delete the StorageConnection's "
                "ManifestWork for this cluster on the hub (the manager writes a fresh one) or "
                "change the StorageConnection so it is re-sealed."
            ),
        ),
        Entry(
            (SR.SEAL_MISMATCH,),
            seen="Phase `Failed`.",
            means=(
                "The payload opens and is signed by the manager, but a bound field differs from "
                "where it was found; the message names it (`cluster`, `binding`, "
                "`spec.targetNamespaces`, `spec.entryName`, `spec.type`). The "
                "SealedStorageConnection was edited, copied, or written by a forged ManifestWork "
                "with a payload sealed for another object or cluster. Nothing is written; what was "
                "delivered stays."
            ),
            todo=(
                "do not edit SealedStorageConnections; check the agent's `--cluster-name` equals "
                "the ManagedCluster's name; look for foreign ManifestWorks in the cluster "
                "namespace on the hub."
            ),
        ),
        Entry(
            (SR.SEAL_REPLAYED,),
            seen="Phase `Failed`.",
            means=(
                "The payload's sequence is lower than the last one the agent accepted for this "
                "object (Lease `model-serving-seal-ledger` in the agent's state namespace "
                "`model-serving-agent`): an older ciphertext was put back, e.g. by a forged "
                "ManifestWork. The newer credential stays delivered."
            ),
            todo=(
                "find and delete the foreign work; the manager's own work brings the current "
                "payload back."
            ),
        ),
        Entry(
            (SR.SEAL_UNSIGNED,),
            seen="Phase `Failed`.",
            means=(
                "The payload opens with the agent's key but carries no valid signature of the "
                "manager: someone who knows the agent's public key sealed it, or the agent has no "
                "verify key (`--seal-verify-key`, from the AddOnDeploymentConfig variable "
                "`SEAL_VERIFY_KEY` the manager sets)."
            ),
            todo=(
                "check the agent's arguments; if they are right, look for foreign ManifestWorks in "
                "the cluster namespace."
            ),
        ),
        Entry(
            (SR.ENTRY_CONFLICT,),
            seen=(
                "Phase `Failed`, reason `EntryConflict`, message `NS: entry 'NAME' already exists "
                "and belongs to ...`."
            ),
            means=(
                "The `storage-config` Secret in a target namespace already has an entry of that "
                "name that this connection did not write (another StorageConnection with the same "
                "`entryName`, for example from another hub namespace, or an entry added by hand). "
                "The agent never overwrites it."
            ),
            todo=(
                "set a different `spec.entryName` on the StorageConnection, or remove the other "
                "entry if it is stale."
            ),
        ),
        Entry(
            (SP.PENDING, SP.FAILED,),
            title="`Pending` / `Failed` (phases)",
            means=(
                "`Pending` is used only for `NamespaceMissing`; `Failed` for `KeyMismatch`, "
                "`DecryptFailed`, `SealMismatch`, `SealReplayed`, `SealUnsigned` and "
                "`EntryConflict`. On the hub, the StorageConnection's cluster entry shows the same "
                "phase as `phase` and `reason`, with the agent's message."
            ),
        ),
    ),
    level=3,
)


INTENT_PHASES = Group(
    "intent-phases",
    (
        Entry(
            (IP.PENDING,),
            means="not ready or progressing on any cluster yet, or no cluster selected.",
        ),
        Entry((IP.PROGRESSING,), means="on its way on some clusters, none failed."),
        Entry((IP.READY,), means="ready on every selected cluster."),
        Entry(
            (IP.DEGRADED,),
            means=(
                "failed on at least one cluster (`ClustersFailed`), or some cluster's report is "
                "stale (`ClustersStale`); the Event is a `Warning`."
            ),
        ),
        Entry((IP.INVALID,), means="the manager rejected the spec; see `InvalidSpec`."),
    ),
    style="list",
)


RO = RolloutPhase

ROLLOUT = Group(
    "rollout",
    (
        Entry((RO.PROGRESSING,), means=(
            "a step is in progress: its clusters get the new revision and must pass the gates "
            "(`status.rollout.gates` says what each saw); the other clusters keep theirs.")),
        Entry((RO.WAITING_FOR_APPROVAL,), means=(
            "the step before passed; with `manualApproval` the next one starts once the intent "
            "is annotated `rollout.modelserving.opendatahub.io/approve=<revision>/<step>` (the "
            "message names the value).")),
        Entry((RO.PAUSED,), means=(
            "the intent is annotated `rollout.modelserving.opendatahub.io/pause=true`: the step "
            "in progress is still judged, no new step starts.")),
        Entry((RO.HALTED,), means=(
            "a step failed (a cluster's failure, the metric gate, or `progressDeadline`) and "
            "`failurePolicy` is `Pause`, or there was no earlier revision to return to. The "
            "intent is `Degraded` and not Ready; nothing moves until the spec changes or an "
            "undo annotation (`rollout.modelserving.opendatahub.io/undo=<target>:<revision>`) "
            "names a revision.")),
        Entry((RO.ROLLED_BACK,), means=(
            "a step failed and every cluster went back to `stableRevision` (or an undo "
            "annotation sent them to the revision it names). The message names the cluster, "
            "the gate and what it saw; `failedRevision` is not tried again until the spec "
            "changes. The intent is `Degraded` and not Ready.")),
        Entry((RO.COMPLETE,), means=(
            "every selected cluster is on the spec's revision; it is the new `stableRevision`.")),
    ),
    style="list",
)


PASSED_THROUGH = Group(
    "passed-through",
    (
        Entry(
            (PT.APPLIED_MANIFEST_WORK_FAILED,),
            title="`AppliedManifestWorkFailed` (and other `Applied` reasons)",
            seen="any intent, phase `Failed`",
            source="OCM work agent, ManifestWork `Applied` = False",
            means=(
                "the work agent could not apply a manifest; "
                "`status.resourceStatus.manifests[].conditions` on the work say which and why"
            ),
        ),
        Entry(
            (PT.RESOURCES_NOT_AVAILABLE, PT.RESOURCES_STATUS_UNKNOWN),
            seen="MultiClusterServingRuntime, phase `Applied`",
            source="OCM work agent, ManifestWork `Available`",
            means="the ServingRuntime is not (yet) seen on the cluster",
        ),
        Entry(
            (),
            title="KServe Ready reasons",
            seen="MultiClusterInferenceService, phase `Progressing`",
            source="the InferenceService's `Ready` condition",
            means="KServe's own progress reasons",
        ),
        Entry(
            (
                PT.MODEL_LOAD_FAILED,
                PT.RUNTIME_UNHEALTHY,
                PT.RUNTIME_DISABLED,
                PT.NO_SUPPORTING_RUNTIME,
                PT.RUNTIME_NOT_RECOGNIZED,
                PT.INVALID_PREDICTOR_SPEC,
            ),
            seen="MultiClusterInferenceService, phase `Failed`",
            source="KServe `modelStatus.lastFailureInfo.reason`",
            means=(
                "the model failed on that cluster; e.g. `NoSupportingRuntime`: no ServingRuntime "
                "in the namespace and no ClusterServingRuntime supports the model format (is the "
                "MultiClusterServingRuntime on that cluster? has the ModelServing "
                "`builtInRuntimes: false`?)"
            ),
        ),
    ),
    style="table",
)


GROUPS: tuple[Group, ...] = (
    INTENT_PLACEMENT,
    INTENT_READY,
    INTENT_PROGRESSING,
    INTENT_DEGRADED,
    INTENT_DELETION,
    INTENT_PHASES,
    ROLLOUT,
    CLUSTER_BEFORE,
    CLUSTER_PROBLEMS,
    CLUSTER_ON_ITS_WAY,
    CLUSTER_STALE,
    CLUSTER_REPORTS,
    PLATFORM,
    SEALED,
    PASSED_THROUGH,
)
"""Every group, in the order of docs/troubleshooting.md."""

INDEX = "index"
"""Name of the marked block that holds the table of every value (made from :data:`ENUMS`)."""


def entries_of(member: StrEnum) -> list[Entry]:
    """The entries that explain ``member``.

    By identity: ``IntentReason.REMOVING`` is not ``ServingPlatformReason.REMOVING``.
    """
    return [
        e
        for g in GROUPS
        for e in g.entries
        if any(type(t) is type(member) and t is member for t in e.terms)
    ]


def values() -> frozenset[str]:
    """Every value any enum of this module has."""
    return frozenset(m.value for e in ENUMS for m in e)


# Rendering ---------------------------------------------------------------------------------------

WIDTH = 100
"""Column the generated Markdown is wrapped at."""
_LINE_START = re.compile(r"^([-+*>#|=]+|\d+[.)])$")
"""Words that would start a list, heading, quote, table or underline at the start of a line."""


def wrap(text: str, first: str = "", rest: str = "") -> list[str]:
    """``text`` (one paragraph, single spaces) wrapped at :data:`WIDTH`.

    ``first``/``rest`` prefix the first and the other lines (a list item's bullet and
    indent). A word that Markdown would read as block syntax at the start of a line stays at
    the end of the line before it, even past the width.
    """
    lines: list[str] = []
    line = first
    for word in text.split(" "):
        if line.strip() == "" or line == first:
            line += word
        elif len(line) + 1 + len(word) <= WIDTH or _LINE_START.match(word):
            line += " " + word
        else:
            lines.append(line)
            line = rest + word
    lines.append(line)
    return lines


def _paragraph(text: str) -> list[str]:
    out: list[str] = []
    for item in text.split("\n"):
        if item.startswith("- "):
            out += wrap(item[2:], "- ", "  ")
        else:
            out += wrap(item)
    return out


def _code(value: str) -> str:
    return f"`{value}`"


def title(entry: Entry, sep: str = " / ") -> str:
    """The heading (or first table cell) of ``entry``."""
    return entry.title or sep.join(_code(v) for v in dict.fromkeys(str(t) for t in entry.terms))


def paragraphs(entry: Entry) -> list[str]:
    """The body of a heading entry: seen, means and todo as Markdown paragraphs."""
    paras = [p for p in entry.means.split("\n\n") if p]
    if entry.seen:
        lead = f"*{entry.seen}*"
        paras = [f"{lead} {paras[0]}", *paras[1:]] if paras else [lead]
    if entry.todo:
        mark = "**What to do**" if entry.todo.startswith("if it stays") else "**What to do:**"
        todo = f"{mark} {entry.todo}"
        paras = [*paras[:-1], f"{paras[-1]} {todo}"] if paras else [todo]
    return paras


def render(group: Group) -> list[str]:
    """The Markdown lines of one group."""
    out: list[str] = []
    if group.style == "table":
        out += ["| reason | where | comes from | meaning |", "|---|---|---|---|"]
        out += [
            f"| {title(e, ', ')} | {e.seen} | {e.source} | {e.means} |" for e in group.entries
        ]
        return out
    for entry in group.entries:
        if group.style == "list":
            names = ", ".join(f"**{t}**" for t in entry.terms)
            out += wrap(f"{names}: {entry.means}", "- ", "  ")
            continue
        if out:
            out.append("")
        out += ["#" * group.level + " " + title(entry), ""]
        for i, para in enumerate(paragraphs(entry)):
            if i:
                out.append("")
            out += _paragraph(para)
    return out


_BLOCK = re.compile(
    r"^<!-- BEGIN reasons (?P<name>[-a-z]+) [^\n]*-->\n(?P<body>.*?)"
    r"^<!-- END reasons (?P=name) -->$",
    re.DOTALL | re.MULTILINE,
)
_HEADING = re.compile(r"^(#{1,6}) (.*)$")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading (before de-duplication)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def headings(text: str) -> dict[str, str]:
    """Anchor of each heading of ``text`` by its text (the first of equal headings)."""
    lines = text.splitlines()
    out: dict[str, str] = {}
    for number, anchor in _anchors(text).items():
        heading = _HEADING.match(lines[number])
        if heading:
            out.setdefault(heading.group(2), anchor)
    return out


def _anchors(text: str) -> dict[int, str]:
    """Anchor of every heading line of ``text`` (by line number), de-duplicated as GitHub does."""
    seen: dict[str, int] = {}
    out: dict[int, str] = {}
    fenced = False
    for number, line in enumerate(text.splitlines()):
        if line.startswith("```"):
            fenced = not fenced
        heading = _HEADING.match(line)
        if heading and not fenced:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            out[number] = base if count == 0 else f"{base}-{count}"
    return out


def _entry_links(text: str) -> dict[int, tuple[str, str]]:
    """Where each entry is (id of the Entry -> its heading text and anchor) in ``text``.

    A heading entry links to its own heading; a list or table entry to the heading above it.
    """
    anchors = _anchors(text)
    lines = text.splitlines()
    groups = {g.name: g for g in GROUPS}
    out: dict[int, tuple[str, str]] = {}
    above = ("", "")
    block: Iterator[Entry] | None = None
    style = ""
    for number, line in enumerate(lines):
        begin = re.match(r"^<!-- BEGIN reasons ([-a-z]+) ", line)
        if begin and begin.group(1) in groups:
            group = groups[begin.group(1)]
            block, style = iter(group.entries), group.style
            if style != "heading":
                for entry in group.entries:
                    out[id(entry)] = above
            continue
        if line.startswith("<!-- END reasons "):
            block = None
            continue
        heading = _HEADING.match(line)
        if number in anchors and heading:
            above = (heading.group(2), anchors[number])
            if block is not None and style == "heading":
                current = next(block, None)
                if current is not None:
                    out[id(current)] = above
    return out


def index(text: str) -> list[str]:
    """The table of every value, what it is and where it is explained (links into ``text``)."""
    links = _entry_links(text)
    anchors = headings(text)
    rows: dict[str, tuple[list[str], list[str]]] = {}
    for enum in ENUMS:
        for member in enum:
            kinds, see = rows.setdefault(member.value, ([], []))
            kinds.append(LABELS[enum])
            places = [links.get(id(entry), ("", "")) for entry in entries_of(member)]
            if not places:
                home = f"`{member.value}` reasons"
                home = home if enum is IntentConditionType and home in anchors else HOME[enum]
                places = [(home, anchors.get(home, ""))]
            for heading, anchor in places:
                link = f"[{heading}](#{anchor})"
                if not anchor:
                    raise ValueError(f"{enum.__name__}.{member.name}: no heading {heading!r}")
                if link not in see:
                    see.append(link)
    out = ["| value | what it is | explained in |", "|---|---|---|"]
    for value in sorted(rows, key=str.lower):
        kinds, see = rows[value]
        out.append(f"| `{value}` | {'; '.join(kinds)} | {', '.join(see)} |")
    return out


def _replace(text: str, fill: dict[str, list[str]]) -> str:
    names = [m.group("name") for m in _BLOCK.finditer(text)]
    missing = sorted(set(fill) - set(names))
    unknown = sorted(set(names) - set(fill))
    if missing or unknown or len(names) != len(set(names)):
        raise ValueError(
            f"marked blocks: missing {missing}, unknown {unknown}, found {names}"
        )

    def block(match: re.Match[str]) -> str:
        name = match.group("name")
        head = match.group(0).split("\n", 1)[0]
        return "\n".join([head, "", *fill[name], "", f"<!-- END reasons {name} -->"])

    return _BLOCK.sub(block, text)


def render_doc(text: str) -> str:
    """``text`` (docs/troubleshooting.md) with every marked block generated again."""
    fill = {g.name: render(g) for g in GROUPS}
    fill[INDEX] = []
    first = _replace(text, fill)
    fill[INDEX] = index(first)
    return _replace(first, fill)


DOC = Path(__file__).resolve().parents[1] / "docs" / "troubleshooting.md"
"""docs/troubleshooting.md of this checkout."""


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the generated blocks of docs/troubleshooting.md (``--check``: only compare)."""
    parser = argparse.ArgumentParser(prog="python -m addon_api.reasons", description=main.__doc__)
    parser.add_argument("path", nargs="?", type=Path, default=DOC)
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is not current")
    args = parser.parse_args(argv)
    text = args.path.read_text()
    new = render_doc(text)
    if args.check:
        if new != text:
            print(f"{args.path} is out of date: run python -m addon_api.reasons", file=sys.stderr)
            return 1
        return 0
    if new != text:
        args.path.write_text(new)
        print(f"wrote {args.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
