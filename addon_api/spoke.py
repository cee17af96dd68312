"""Per-cluster objects: what ManifestWorks carry to a managed cluster for the agent.

The spoke CRDs are installed with the agent. The manager writes the specs (through
ManifestWorks); the agent writes the statuses, which the work agent feeds back.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from addon_api import constants as c
from addon_api.base import (
    ApiModel,
    DnsLabel,
    DnsSubdomain,
    SecretKey,
    StatusReason,
    StatusText,
    UniqueList,
    set_list,
)
from addon_api.common import AGE_COLUMN, Conditions, CrdInfo, PrinterColumn, Resource
from addon_api.hub import StorageType
from addon_api.platform import PlatformSettings
from addon_api.reasons import SealedPhase, ServingPlatformPhase


class IntentRef(ApiModel):
    """The hub intent an object was rendered from (informational)."""

    namespace: DnsLabel
    """Namespace of the intent on the hub."""
    name: DnsSubdomain
    """Name of the intent on the hub."""


# ServingPlatform ---------------------------------------------------------------------------------


class ServingPlatformSpec(PlatformSettings):
    """A ModelServing rendered for one cluster (overrides applied), plus agent settings."""

    force: bool = False
    """Uninstall (managementState Removed) even while InferenceServices the add-on did not
    create still exist."""
    source: IntentRef | None = None
    """The ModelServing on the hub this was rendered from."""


LaxPhase = Field(strict=False)
"""A phase field takes its enum's value as a string too (as read from the API server)."""

MAX_KEPT_NAMESPACES = 16
"""Kept namespaces a ServingPlatform's status lists (the leftovers line counts the rest)."""
KEPT_OBJECTS_NAMED = 3
"""Objects of a kept namespace its entry names (``objects`` counts them all)."""


class KeptNamespace(ApiModel):
    """A serving namespace the agent created, stopped serving and kept: it holds data."""

    name: DnsLabel
    """Name of the namespace (labelled modelserving.opendatahub.io/kept-namespace)."""
    objects: Annotated[int, Field(ge=0)] = 0
    """How many objects the agent did not create it holds (a kind the agent may not list
    counts as one)."""
    holds: Annotated[list[StatusReason], Field(max_length=KEPT_OBJECTS_NAMED)] = Field(
        default_factory=list)
    """The first of them, as Kind namespace/name (Kind namespace/* for a kind the agent may
    not list)."""


class ServingPlatformStatus(ApiModel):
    """State of the serving stack on this cluster, as the agent sees it."""

    phase: Annotated[ServingPlatformPhase, LaxPhase] | None = None
    """Installing, Available, Degraded, Upgrading (a change of spec.version: the controllers
    roll out at the new version before the configuration follows), Removing, Removed or
    RemovalBlocked (uninstall refused while force is false: objects the add-on did not create
    exist under a CRD it would delete, or InferenceServices still use the stack)."""
    message: StatusText = ""
    """Human-readable details of the phase."""
    observed_generation: Annotated[int, Field(ge=0)] | None = None
    """The metadata.generation this status was computed from."""
    ready_components: Annotated[int, Field(ge=0)] = 0
    """Deployments of the stack that are Available."""
    total_components: Annotated[int, Field(ge=0)] = 0
    """Deployments of the stack."""
    stack_version: Annotated[str, Field(max_length=64)] = ""
    """Version of the installed stack (e.g. v0.20.0); during an upgrade or downgrade, the
    version the cluster ran before it."""
    target_version: Annotated[str, Field(max_length=64)] = ""
    """The version being installed while phase is Upgrading; empty otherwise."""
    kept_namespaces: Annotated[list[KeptNamespace], Field(max_length=MAX_KEPT_NAMESPACES)] = (
        Field(default_factory=list))
    """Namespaces dropped from spec.servingNamespaces that the agent created but did not
    delete, because they hold objects it did not create (a tenant's PVCs, Jobs, a kind it
    may not list). They are no longer served; the stack is not affected. The agent deletes
    one once it holds nothing else; an entry also goes when the namespace is deleted or put
    back in servingNamespaces. At most 16, by name."""
    leftovers: StatusText = ""
    """keptNamespaces in one short line, as the hub shows it in the cluster's entry (e.g.
    namespace team-a kept: holds PersistentVolumeClaim team-a/data (1 more)); empty when
    none are kept."""
    conditions: Conditions = Field(default_factory=list)
    """Available, Progressing and Degraded."""


class ServingPlatform(Resource):
    """The serving platform of this cluster, as the model-serving add-on wants it."""

    crd = CrdInfo(
        plural="servingplatforms",
        short_names=("splat",),
        scope="Cluster",
        hub=False,
        columns=(
            PrinterColumn("Platform", "string", ".spec.platform", "Serving platform."),
            PrinterColumn("Phase", "string", ".status.phase", "State of the stack."),
            PrinterColumn("Ready", "integer", ".status.readyComponents", "Deployments Available."),
            PrinterColumn("Total", "integer", ".status.totalComponents", "Deployments."),
            PrinterColumn("Version", "string", ".status.stackVersion", "Stack version."),
            AGE_COLUMN,
        ),
    )

    kind: Literal["ServingPlatform"] = "ServingPlatform"
    """Kind of the object."""
    spec: ServingPlatformSpec
    """Desired state of the serving stack on this cluster."""
    status: ServingPlatformStatus | None = None
    """Observed state of the serving stack, written by the agent."""


# SealedStorageConnection -------------------------------------------------------------------------

MAX_SEALED_LENGTH = 65536


def _base64(value: str) -> str:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as err:
        raise ValueError("sealed must be standard base64") from err
    return value


class SealedStorageConnectionSpec(ApiModel):
    """Credentials of one storage connection, sealed for this cluster's agent."""

    key_id: Annotated[str, Field(min_length=1, max_length=128)]
    """Id of the agent public key the payload is sealed to; the agent refuses payloads
    sealed to a key it does not hold."""
    sealed: Annotated[
        str,
        Field(min_length=1, max_length=MAX_SEALED_LENGTH, json_schema_extra={"format": "byte"}),
        AfterValidator(_base64),
    ]
    """Base64 of the sealed box holding the storage-config entry (JSON)."""
    type: StorageType
    """Storage type of the entry (s3, gcs, azure, pvc or uri)."""
    target_namespaces: Annotated[
        list[DnsLabel], set_list(c.MAX_NAMESPACES, min_items=1), UniqueList
    ]
    """Namespaces whose storage-config Secret gets the entry."""
    entry_name: SecretKey
    """Key of the entry in the storage-config Secret."""
    source: IntentRef | None = None
    """The StorageConnection on the hub this was sealed from."""


class SealedStorageConnectionStatus(ApiModel):
    """Delivery state, written by the agent."""

    phase: Annotated[SealedPhase, LaxPhase] | None = None
    """Pending, Delivered (the entry is in every target namespace) or Failed."""
    message: StatusText = ""
    """Human-readable details of the phase."""
    observed_generation: Annotated[int, Field(ge=0)] | None = None
    """The metadata.generation this status was computed from."""
    conditions: Conditions = Field(default_factory=list)
    """Delivered and Degraded."""


class SealedStorageConnection(Resource):
    """Storage credentials sealed for this cluster's agent.

    The agent turns them into a storage-config Secret entry in each target namespace.
    """

    crd = CrdInfo(
        plural="sealedstorageconnections",
        short_names=("sealedsc",),
        scope="Namespaced",
        hub=False,
        columns=(
            PrinterColumn("Type", "string", ".spec.type", "Storage type."),
            PrinterColumn("Entry", "string", ".spec.entryName", "storage-config key."),
            PrinterColumn("Phase", "string", ".status.phase", "Delivery state."),
            AGE_COLUMN,
        ),
    )

    kind: Literal["SealedStorageConnection"] = "SealedStorageConnection"
    """Kind of the object."""
    spec: SealedStorageConnectionSpec
    """The sealed credentials and where they go."""
    status: SealedStorageConnectionStatus | None = None
    """Delivery state, written by the agent."""


SPOKE_RESOURCES: tuple[type[Resource], ...] = (ServingPlatform, SealedStorageConnection)
"""Every spoke kind, in documentation order."""
