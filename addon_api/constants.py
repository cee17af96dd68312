"""Names shared by the manager, the agent and the generated CRDs.

Everything the two sides must agree on by name lives here, so that a rename is
one edit.
"""

from __future__ import annotations

from typing import Final

from addon_api.reasons import IntentConditionType

ADDON_NAME: Final = "model-serving"
"""Name of the OCM add-on (ClusterManagementAddOn / ManagedClusterAddOn)."""

GROUP: Final = "modelserving.opendatahub.io"
"""API group of every kind of the add-on, on the hub and on the spokes."""

VERSION: Final = "v1alpha1"
"""The one served and stored version."""

API_VERSION: Final = f"{GROUP}/{VERSION}"
"""``apiVersion`` of every object of the add-on."""

CATEGORY: Final = "mlfleet"
"""``kubectl get mlfleet`` lists every hub intent. It must shadow no kind's name: kubectl
expands a category before it looks for a resource, so a category ``modelserving`` made
``kubectl get modelserving NAME`` (and ``delete``) reach every kind's NAME."""

FIELD_MANAGER: Final = "model-serving-addon"
"""Field manager used for server-side apply by the manager and the agent."""

# Kinds -------------------------------------------------------------------------------------------

KIND_MODEL_SERVING: Final = "ModelServing"
KIND_STORAGE_CONNECTION: Final = "StorageConnection"
KIND_SERVING_RUNTIME: Final = "MultiClusterServingRuntime"
KIND_INFERENCE_SERVICE: Final = "MultiClusterInferenceService"
KIND_SERVING_PLATFORM: Final = "ServingPlatform"
KIND_SEALED_STORAGE_CONNECTION: Final = "SealedStorageConnection"

HUB_KINDS: Final = (
    KIND_MODEL_SERVING,
    KIND_STORAGE_CONNECTION,
    KIND_SERVING_RUNTIME,
    KIND_INFERENCE_SERVICE,
)
"""Kinds served by the hub (the intents)."""

SPOKE_KINDS: Final = (KIND_SERVING_PLATFORM, KIND_SEALED_STORAGE_CONNECTION)
"""Kinds served by every managed cluster (installed with the agent)."""

# Labels and annotations --------------------------------------------------------------------------

LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
"""Standard label; value :data:`FIELD_MANAGER` on everything the add-on creates."""

LABEL_PART_OF: Final = "app.kubernetes.io/part-of"
"""Standard label; value :data:`ADDON_NAME`."""

LABEL_INTENT_KIND: Final = f"{GROUP}/intent-kind"
"""On a ManifestWork (and what it carries): kind of the hub intent that owns it."""

LABEL_INTENT_NAMESPACE: Final = f"{GROUP}/intent-namespace"
"""On a ManifestWork (and what it carries): hub namespace of the owning intent."""

LABEL_INTENT_NAME: Final = f"{GROUP}/intent-name"
"""On a ManifestWork (and what it carries): name of the owning intent."""

LABEL_COMPONENT: Final = f"{GROUP}/component"
"""On stack objects the agent installs: the component (deployment name) they belong to."""

ANNOTATION_RENDER_HASH: Final = f"{GROUP}/render-hash"
"""Hash of the inputs a ManifestWork was rendered from (steady state makes no writes)."""

ANNOTATION_REVISION: Final = f"{GROUP}/revision"
"""On a ManifestWork of an intent with a progressive rollout: the revision it renders."""

ANNOTATION_SPEC_HASH: Final = f"{GROUP}/spec-hash"
"""On an InferenceService the manager renders: a hash of its spec. KServe copies an
InferenceService's annotations onto the predictor Deployment it builds, so the Deployment
carrying the same hash is KServe having built the current spec (a new hash also rolls the
predictor's pods once, like any spec change)."""

ANNOTATION_DATAPLANE: Final = f"{GROUP}/dataplane"
"""On a predictor's Deployment, written by the agent: what its pods say (compact JSON: the
download failed, the server crash-loops, replicas ready), fed back to the hub."""

PREDICTOR_SUFFIX: Final = "-predictor"
"""KServe's Standard mode names an InferenceService's predictor Deployment NAME-predictor."""

ROLLOUT_PREFIX: Final = "rollout.modelserving.opendatahub.io"
ANNOTATION_ROLLOUT_PAUSE: Final = f"{ROLLOUT_PREFIX}/pause"
"""On an intent: "true" starts no further rollout step."""
ANNOTATION_ROLLOUT_APPROVE: Final = f"{ROLLOUT_PREFIX}/approve"
"""On an intent: ``<revision>/<step>`` lets that step of a manual-approval rollout start."""
ANNOTATION_ROLLOUT_UNDO: Final = f"{ROLLOUT_PREFIX}/undo"
"""On an intent: ``<target>:<revision>`` returns every cluster to that revision while the
spec's revision is ``<target>``."""

# Conditions --------------------------------------------------------------------------------------
# Aliases of the members of addon_api.reasons.IntentConditionType (the strings on the wire).

CONDITION_READY: Final = IntentConditionType.READY
CONDITION_PROGRESSING: Final = IntentConditionType.PROGRESSING
CONDITION_DEGRADED: Final = IntentConditionType.DEGRADED
CONDITION_PLACEMENT_RESOLVED: Final = IntentConditionType.PLACEMENT_RESOLVED

INTENT_CONDITION_TYPES: Final = (
    CONDITION_READY,
    CONDITION_PROGRESSING,
    CONDITION_DEGRADED,
    CONDITION_PLACEMENT_RESOLVED,
)
"""Condition types the manager maintains on every hub intent."""

# Spoke-side names --------------------------------------------------------------------------------

STORAGE_CONFIG_SECRET: Final = "storage-config"
"""Secret both KServe and ModelMesh read storage credentials from, one entry per connection."""

MODELMESH_ENABLED_LABEL: Final = "modelmesh-enabled"
"""Namespace label (value ``"true"``) that lets ModelMesh serve in a namespace."""

DEPLOYMENT_MODE_ANNOTATION: Final = "serving.kserve.io/deploymentMode"
"""InferenceService annotation choosing Standard/RawDeployment or ModelMesh."""

# Size bounds (also what keeps the CEL cost estimates of the CRDs small) -------------------------

MAX_OVERRIDES: Final = 32
"""Overrides per intent."""

MAX_CLUSTER_NAMES: Final = 100
"""Cluster names one override lists."""

MAX_CLUSTER_STATUSES: Final = 100
"""Per-cluster status entries kept in an intent's status (non-ready clusters first)."""

ENDPOINT_CORDON_TAINT: Final = "modelserving.opendatahub.io/cordoned"
"""A ManagedCluster taint (any effect; PreferNoSelect leaves Placements alone) that keeps a
cluster out of every model's fleet endpoint while its models keep running there: traffic
drained before maintenance. Its value is shown as the reason's message."""

MAX_CONDITIONS: Final = 16
"""Conditions per status."""

MAX_COMPONENTS: Final = 16
"""Entries of ``components`` and ``devFlags.images``."""

MAX_NAMESPACES: Final = 64
"""Entries of ``servingNamespaces`` and ``targetNamespaces``."""

MAX_SELECTOR_TERMS: Final = 32
"""``matchLabels`` entries, ``matchExpressions`` items and values per expression."""

# Agent identity and sealing -----------------------------------------------------------------------
AGENT_NAMESPACE: Final = "open-cluster-management-agent-addon"
"""Spoke namespace the agent runs in (OCM's default namespace for add-on agents)."""
AGENT_IDENTITY_CONFIGMAP: Final = "model-serving-agent-identity"
"""ConfigMap (in :data:`AGENT_NAMESPACE`) where the agent publishes its public key."""
NAMESPACE_POLICY_CONFIGMAP: Final = "model-serving-namespace-policy"
"""ConfigMap (in the agent's namespace) where the manager delivers the namespace policy."""
POLICY_KEY_TARGETS: Final = "targetNamespaces"
"""Key of that ConfigMap: the targets, as ``--target-namespaces`` takes them."""
POLICY_KEY_DENIED: Final = "deniedNamespaces"
"""Key of that ConfigMap: the namespaces the admin denies every tenant, comma-separated."""
AGENT_STATE_NAMESPACE: Final = "model-serving-agent"
"""Spoke namespace of the agent's private state (its key Secret and seal ledger), apart from the
add-on namespace OCM may share between add-ons: a Role another add-on gets there reaches
nothing of the agent's (``--state-namespace``)."""
AGENT_KEY_SECRET: Final = "model-serving-agent-key"
"""Secret (in :data:`AGENT_STATE_NAMESPACE`) holding the agent's private key; never leaves the
spoke."""
IDENTITY_PUBLIC_KEY: Final = "publicKey"
"""Identity ConfigMap key: base64 of the agent's X25519 public key."""
IDENTITY_KEY_ID: Final = "keyId"
"""Identity ConfigMap key: id of that public key (see ``addon_api.sealing.key_id``)."""
IDENTITY_NEXT_PUBLIC_KEY: Final = "nextPublicKey"
"""Identity ConfigMap key during a key rotation: base64 of the agent's next public key."""
IDENTITY_NEXT_KEY_ID: Final = "nextKeyId"
"""Identity ConfigMap key during a key rotation: id of the next public key."""
AGENT_SEAL_LEDGER: Final = "model-serving-seal-ledger"
"""Lease (in :data:`AGENT_STATE_NAMESPACE`) recording the last sealed sequence accepted per
binding."""
ANNOTATION_ROTATE_KEY: Final = f"{GROUP}/rotate-key"
"""On the agent's key Secret: ``requested`` asks the agent to publish a next key."""
