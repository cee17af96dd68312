"""Every phase and reason the add-on sets: one place for both sides.

The manager (hub intents) and the agent (ServingPlatform and SealedStorageConnection on each
cluster) set these values; OCM and KServe pass a few more through, listed here too. Each value
is a member of a :class:`~enum.StrEnum` (so it *is* its string on the wire).

What each value means (where it is seen, what to do) is not here, so that a controller loading
an enum loads no prose: it is data in :mod:`addon_cli.troubleshooting` (one YAML file per
family of reasons), from which ``docs/troubleshooting.md`` is generated and ``explain`` reads.
"""

from __future__ import annotations

from enum import StrEnum

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
    WAITING_FOR_RUNTIME = "WaitingForServingRuntime"
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
    NO_SERVICE_EXPORT_API = "NoServiceExportApi"
    SERVICE_EXPORT_NOT_CREATED = "ServiceExportNotCreated"


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
    WAITING_FOR_NAMESPACE_POLICY = "WaitingForNamespacePolicy"
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
    WAITING_FOR_NAMESPACE_POLICY = "WaitingForNamespacePolicy"


SEALED_WAITS: frozenset[SealedReason] = frozenset(
    {SealedReason.NAMESPACE_MISSING, SealedReason.NAMESPACE_TERMINATING,
     SealedReason.WAITING_FOR_NAMESPACE_POLICY}
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


class AlertName(StrEnum):
    """The alerts of the chart's rules (``charts/model-serving-addon/templates/_rules.tpl``).

    Not set by any controller: listed here so that docs/troubleshooting.md has an entry for
    each, which the alert's ``runbook_url`` points at.
    """

    AGENT_METRICS_ABSENT = "ModelServingAgentMetricsAbsent"
    AGENT_UNAVAILABLE = "ModelServingAgentUnavailable"
    AGENT_METRICS_MISSING = "ModelServingAgentMetricsMissing"
    PLATFORM_NOT_AVAILABLE = "ModelServingPlatformNotAvailable"
    COMPONENT_NOT_AVAILABLE = "ModelServingComponentNotAvailable"
    MODEL_LOAD_FAILED = "ModelServingModelLoadFailed"
    MODEL_NOT_READY = "ModelServingModelNotReady"
    CLUSTER_STALE = "ModelServingClusterStale"
    MANIFEST_WORK_ERRORS = "ModelServingManifestWorkErrors"
    ROLLOUT_ROLLED_BACK = "ModelServingRolloutRolledBack"
    MODEL_ERROR_RATIO_HIGH = "ModelServingModelErrorRatioHigh"
    MODEL_LATENCY_HIGH = "ModelServingModelLatencyHigh"


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
    AlertName,
)
"""Every enum of this module, in the order of the documentation."""


def values() -> frozenset[str]:
    """Every value any enum of this module has."""
    return frozenset(m.value for e in ENUMS for m in e)
