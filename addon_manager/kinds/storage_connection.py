"""StorageConnection: storage credentials sealed to each selected cluster's agent.

Its render (a SealedStorageConnection whose payload is sealed when the work is written),
the Secret checks and payload, its feedback rules, gate (the agent's pinned key, from
:mod:`addon_manager.kinds.agent_identity`) and report.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

from pydantic import ValidationError

from addon_api import constants as c
from addon_api import sealing
from addon_api.common import ClusterStatus, Resource
from addon_api.hub import StorageConnection, StorageConnectionSpec
from addon_api.reasons import ClusterPhase, ClusterReason, SealedConditionType, SealedPhase
from addon_manager.facts import naming
from addon_manager.facts.canonical import keyed_canonical_hash
from addon_manager.facts.records import WorkFact
from addon_manager.facts.sealing import AgentKey
from addon_manager.kinds.agent_identity import KIND as IDENTITY_KIND
from addon_manager.kinds.agent_identity import agent_key
from addon_manager.kinds.base import (
    Category,
    Context,
    Dependency,
    KindSpec,
    Prepared,
    spoke_phase,
    text,
)
from addon_manager.kinds.render import (
    RenderedWork,
    RenderError,
    SealInputs,
    cluster_spec,
    condition_path,
    invalid_after_overrides,
    manifest_work,
    owner_labels,
    ssa_config,
)
from addon_manager.kinds.tenant_access import ACCESS_KIND

SEALED_PLACEHOLDER_PREFIX = "sealing-inputs:"
"""Start of the digest that stands in for the ciphertext in a hashed body."""
SEALED_FEEDBACK = [
    ("phase", ".status.phase"),
    ("message", ".status.message"),
    # why not delivered: DecryptFailed, ...
    ("reason", condition_path(SealedConditionType.DELIVERED, "reason")),
]
"""What the agent reports of a delivered connection (SealedStorageConnection), fed back."""


def seal_placeholder(inputs: SealInputs, spec: StorageConnectionSpec) -> str:
    """What stands in for the ciphertext in the hashed body: a digest of the sealing inputs.

    It covers the cluster's spec too (endpoint, bucket, region... end up inside the sealed
    payload, not in the visible body), so changing one of them re-seals.
    """
    if not inputs.hash_key:
        raise RenderError("sealed works need the manager's render-hash key")
    return SEALED_PLACEHOLDER_PREFIX + keyed_canonical_hash(
        inputs.hash_key, [inputs.key_id, inputs.binding, inputs.secret_digest, spec.to_dict()]
    )


def storage_cluster_spec(
    intent: StorageConnection, cluster: str, labels: dict[str, str]
) -> StorageConnectionSpec:
    """A StorageConnection's spec as it applies to ``cluster``: its overrides applied.

    Raises :class:`RenderError` (naming the field) when an override makes it invalid.
    """
    spec = cluster_spec(intent.spec.to_dict(), intent.spec.overrides, cluster, labels)
    spec["placementRef"] = intent.spec.placement_ref.to_dict()
    try:
        return StorageConnectionSpec.from_wire(spec)
    except ValidationError as err:
        raise invalid_after_overrides(cluster, err) from err


def render(
    intent: StorageConnection, cluster: str, labels: dict[str, str], inputs: SealInputs,
    spec: StorageConnectionSpec | None = None, namespace: str = c.AGENT_NAMESPACE,
) -> RenderedWork:
    """The SealedStorageConnection work of a StorageConnection for one cluster.

    The sealed object goes to ``namespace``, where the cluster's agent runs; ``inputs.binding``
    must name the same namespace (:func:`~addon_api.sealing.binding_for`), or the agent
    cannot open it. ``spec.sealed`` holds a placeholder; :func:`with_sealed` puts the
    ciphertext in, built by :func:`storage_payload` from the cluster's spec
    (``RenderedWork.sealed_spec``). ``spec`` is that spec when the caller already has it
    from :func:`storage_cluster_spec`.
    """
    ns, name = str(intent.metadata.namespace), str(intent.metadata.name)
    if spec is None:
        spec = storage_cluster_spec(intent, cluster, labels)
    sealed_name = naming.sealed_name(ns, name)
    sealed = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_SEALED_STORAGE_CONNECTION,
        "metadata": {
            "name": sealed_name,
            "namespace": namespace,
            "labels": owner_labels(c.KIND_STORAGE_CONNECTION, ns, name),
        },
        "spec": {
            "keyId": inputs.key_id,
            "sealed": seal_placeholder(inputs, spec),
            "type": spec.type,
            "targetNamespaces": list(spec.target_namespaces),
            "entryName": spec.entry_key(name),
            "source": {"namespace": ns, "name": name},
        },
    }
    config = ssa_config(
        c.GROUP, "sealedstorageconnections", sealed_name, namespace, SEALED_FEEDBACK
    )
    return manifest_work(
        c.KIND_STORAGE_CONNECTION, ns, name, cluster, [sealed], [config],
        seal_inputs=inputs, sealed_spec=spec, hash_key=inputs.hash_key,
    )


def with_sealed(work: RenderedWork, ciphertext: str) -> dict[str, Any]:
    """The work body with the sealed payload in place of its placeholder."""
    body = copy.deepcopy(work.body)
    body["spec"]["workload"]["manifests"][0]["spec"]["sealed"] = ciphertext
    return body


def binding_of(work: RenderedWork) -> sealing.Binding:
    """What the sealed payload of a StorageConnection work is bound to (its spoke object)."""
    obj = work.body["spec"]["workload"]["manifests"][0]
    meta, spec = obj["metadata"], obj["spec"]
    return sealing.Binding(
        cluster=work.cluster, namespace=str(meta["namespace"]), name=str(meta["name"]),
        target_namespaces=tuple(spec["targetNamespaces"]), entry_name=str(spec["entryName"]),
        type=str(spec["type"]),
    )


def missing_secret_keys(
    spec: StorageConnectionSpec, secret_keys: tuple[str, ...] | list[str]
) -> list[tuple[str, str]]:
    """(field, key) for every key that ``spec.secretRef.keys`` names and the Secret lacks."""
    if spec.secret_ref is None or not spec.secret_ref.keys:
        return []
    have = set(secret_keys)
    return [(f, k) for f, k in sorted(spec.secret_ref.keys.items()) if k not in have]


def secret_keys_read(spec: StorageConnectionSpec, secret_keys: tuple[str, ...]) -> list[str]:
    """The keys of the Secret whose values are sealed.

    Those ``spec.secretRef.keys`` names, or every key of the Secret when it names none.
    """
    if spec.secret_ref is None:
        return []
    if spec.secret_ref.keys:
        return sorted(set(spec.secret_ref.keys.values()))
    return sorted(secret_keys)


def storage_payload(spec: StorageConnectionSpec, secret_data: dict[str, str]) -> dict[str, Any]:
    """The storage-config entry (JSON object) of a StorageConnection, credentials included.

    ``spec`` is the connection's spec for one cluster (:func:`storage_cluster_spec`) and
    ``secret_data`` the decoded data of the Secret it names. Only the manager calls this,
    right before sealing; the result is never stored.
    """
    out: dict[str, Any] = {"type": spec.type}
    if spec.secret_ref is not None:
        if spec.secret_ref.keys:
            missing = missing_secret_keys(spec, list(secret_data))
            if missing:  # checked before rendering; never deliver half a credential
                raise RenderError(f"the Secret has no key {missing[0][1]!r}")
            for field_name, key in spec.secret_ref.keys.items():
                out[field_name] = secret_data[key]
        else:
            out.update(secret_data)
    if spec.s3 is not None:
        for field_name, value in (
            ("endpoint_url", spec.s3.endpoint),
            ("region", spec.s3.region),
            ("bucket", spec.s3.bucket),  # KServe's storage initializer
            ("default_bucket", spec.s3.bucket),  # ModelMesh's puller
        ):
            if value is not None:
                out[field_name] = value
    if spec.gcs is not None and spec.gcs.bucket is not None:
        out["bucket"] = spec.gcs.bucket
    if spec.azure is not None:
        out["storage_account"] = spec.azure.storage_account
        if spec.azure.container is not None:
            out["container"] = spec.azure.container
    if spec.pvc is not None:
        out["claim_name"] = spec.pvc.claim_name
    if spec.uri is not None:
        out["uri"] = spec.uri.uri
    return out


def prepare(ctx: Context, intent: Resource, cluster: str) -> Prepared:
    """A StorageConnection's sealed work: needs the agent's (pinned) key and a whole Secret.

    The Secret is judged from the watch's facts (it exists, has every key the spec names,
    each decodes); its data is read only when the work is written.
    """
    conn = cast(StorageConnection, intent)
    cluster_spec = storage_cluster_spec(conn, cluster, ctx.world.cluster_labels(cluster))
    agent_ns = ctx.world.agent_namespace(cluster)
    decided = agent_key(ctx, cluster, agent_ns)
    if decided.problem is not None or decided.key is None:
        return Prepared(waits=decided.waits, problem=decided.problem)
    return replace(_sealed_work(ctx, conn, cluster, cluster_spec, agent_ns, decided.key),
                   pin=decided.pin)


def _sealed_work(
    ctx: Context, conn: StorageConnection, cluster: str, cluster_spec: StorageConnectionSpec,
    agent_ns: str, key: AgentKey,
) -> Prepared:
    ns, name = ctx.namespace, ctx.name
    secret_name = cluster_spec.secret_ref.name if cluster_spec.secret_ref else ""
    digest = ""
    if secret_name:
        access = ctx.world.secret_access(ns)
        if access.state == "pending":
            return Prepared()  # its namespace's Secrets are being listed
        if access.state == "forbidden":
            return Prepared(problem=(
                ClusterReason.SECRET_FORBIDDEN,
                f"Secret {ns}/{secret_name}: {access.detail}; nothing is delivered until it may",
            ))
        found = ctx.world.secret(ns, secret_name)
        if found is None:
            return Prepared(problem=(
                ClusterReason.SECRET_NOT_FOUND, f"Secret {secret_name} does not exist"
            ))
        missing = missing_secret_keys(cluster_spec, found.keys)
        if missing:
            return Prepared(problem=(
                ClusterReason.SECRET_KEY_MISSING,
                f"Secret {ns}/{secret_name} has no " + ", ".join(
                    f"key {k!r} (named by spec.secretRef.keys.{field})" for field, k in missing
                ) + "; nothing is delivered until it has",
            ))
        bad = [k for k in secret_keys_read(cluster_spec, found.keys)
               if k in found.undecodable]
        if bad:
            return Prepared(problem=(
                ClusterReason.SECRET_UNDECODABLE,
                f"Secret {ns}/{secret_name}: the value of " + ", ".join(f"key {k!r}" for k in bad)
                + " is not base64 of UTF-8 text; nothing is delivered until it is",
            ))
        digest = found.digest
    inputs = SealInputs(
        public_key=key.public_key,
        key_id=key.key_id,
        binding=sealing.binding_for(agent_ns, naming.sealed_name(ns, name)),
        secret_digest=digest,
        hash_key=ctx.sealer.keys.hash_key,
    )
    return Prepared(render(
        conn, cluster, ctx.world.cluster_labels(cluster), inputs, spec=cluster_spec,
        namespace=agent_ns,
    ))


WAITING_FOR_STORAGE = ClusterReason.WAITING_FOR_STORAGE
"""Wait reason (of what reads through a connection): the connection is not Delivered there."""


def delivered(work: WorkFact | None) -> bool:
    """Whether a StorageConnection work reports its entry Delivered on the cluster."""
    return work is not None and not work.deleting and work.value("phase") == SealedPhase.DELIVERED


def report(work: WorkFact, removed: bool) -> tuple[ClusterStatus, Category]:
    """A SealedStorageConnection's phase; the agent's own reason when it is not delivered."""
    del removed
    reported = spoke_phase(SealedPhase, work.value("phase"))
    phase = reported or text(work.value("phase")) or ClusterPhase.APPLIED
    msg = text(work.value("message"))
    cat: Category = (
        "ready" if reported is SealedPhase.DELIVERED
        else "failed" if reported is SealedPhase.FAILED else "progressing"
    )
    # The agent's own reason (DecryptFailed, KeyMismatch, NamespaceMissing, ...) when not
    # delivered; the phase otherwise.
    reason = text(work.value("reason")) if cat != "ready" else ""
    return ClusterStatus(
        cluster=work.cluster, phase=phase, ready=cat == "ready", reason=reason or phase,
        message=msg,
    ), cat


def secrets_named(spec: Mapping[str, Any]) -> set[str]:
    """Secrets a StorageConnection spec reads: its secretRef and any its overrides set."""
    refs = [spec.get("secretRef")]
    refs += [(o.get("patch") or {}).get("secretRef") for o in spec.get("overrides") or []
             if isinstance(o, Mapping)]
    return {str(r["name"]) for r in refs if isinstance(r, Mapping) and r.get("name")}


SPEC = KindSpec(
    StorageConnection, prepare, report,
    depends_on=(Dependency(IDENTITY_KIND), Dependency(ACCESS_KIND, same_namespace=True)),
    tenant=True, seals=True, claims=True, spoke_namespaces=("targetNamespaces", True),
)
"""The registry's entry (:mod:`addon_manager.kinds.registry`)."""
