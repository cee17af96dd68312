"""Per kind: one intent's work for one cluster, and what it waits for there.

Each ``prepare_*`` function is pure over the :class:`~addon_manager.facts.world.World` (and the
sealer's pins, read only): it renders the work, lists the gates still closed on that cluster
(:mod:`addon_manager.kinds.ordering`), or says why nothing can be sent (a reason and a message).
The registry (:mod:`addon_manager.kinds.registry`) names the one each kind uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import cast

from addon_api import constants as c
from addon_api import sealing
from addon_api.common import Resource
from addon_api.hub import (
    ModelServing,
    MultiClusterInferenceService,
    MultiClusterServingRuntime,
    StorageConnection,
    StorageConnectionSpec,
)
from addon_api.reasons import ClusterReason
from addon_manager.facts import naming
from addon_manager.facts.records import WorkFact
from addon_manager.facts.sealing import AgentKey, SealingView
from addon_manager.facts.world import World
from addon_manager.kinds import ordering, pinning, render


@dataclass(frozen=True)
class Context:
    """What preparing an intent's work may read."""

    world: World
    sealer: SealingView
    """Pins, approvals and the hash key (read only: a new pin is returned, not recorded)."""
    namespace: str
    name: str
    specs: render.SpecMemo = field(default_factory=render.SpecMemo)
    """The intent's cluster specs, by the overrides that select a cluster (this plan's)."""


@dataclass(frozen=True)
class Prepared:
    """One cluster's work (None: nothing to send yet), its closed gates, or its problem."""

    work: render.RenderedWork | None = None
    waits: tuple[ordering.Wait, ...] = ()
    problem: tuple[str, str] | None = None
    """(reason, message): the intent cannot go to this cluster as it is."""
    pin: AgentKey | None = None
    """An agent key to pin for this cluster before anything is sealed to it."""


def prepare_model_serving(ctx: Context, intent: Resource, cluster: str) -> Prepared:
    """A ModelServing's ServingPlatform work: no gate."""
    return Prepared(render.render_model_serving(
        cast(ModelServing, intent), cluster, ctx.world.cluster_labels(cluster), ctx.specs))


def prepare_serving_runtime(ctx: Context, intent: Resource, cluster: str) -> Prepared:
    """A runtime's work, gated on the cluster's ServingPlatform being Available."""
    waits = ordering.waits_for_runtime(ctx.world.works_on(cluster, c.KIND_MODEL_SERVING))
    return Prepared(render.render_serving_runtime(
        cast(MultiClusterServingRuntime, intent), cluster, ctx.world.cluster_labels(cluster),
        ctx.specs,
    ), tuple(waits))


def prepare_inference_service(ctx: Context, intent: Resource, cluster: str) -> Prepared:
    """An InferenceService's work, gated on the platform and its StorageConnections there."""
    isvc = cast(MultiClusterInferenceService, intent)
    storage = list(isvc.spec.storage_connections)
    waits = ordering.waits_for_inference_service(
        ctx.world.works_on(cluster, c.KIND_MODEL_SERVING),
        storage,
        {s: ctx.world.works_of(c.KIND_STORAGE_CONNECTION, ctx.namespace, s).get(cluster)
         for s in storage},
    )
    return Prepared(render.render_inference_service(
        isvc, cluster, ctx.world.cluster_labels(cluster), ctx.specs), tuple(waits))


def prepare_storage_connection(ctx: Context, intent: Resource, cluster: str) -> Prepared:
    """A StorageConnection's sealed work: needs the agent's (pinned) key and a whole Secret.

    The Secret is judged from the watch's facts (it exists, has every key the spec names,
    each decodes); its data is read only when the work is written.
    """
    conn = cast(StorageConnection, intent)
    cluster_spec = render.storage_cluster_spec(conn, cluster, ctx.world.cluster_labels(cluster))
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
        missing = render.missing_secret_keys(cluster_spec, found.keys)
        if missing:
            return Prepared(problem=(
                ClusterReason.SECRET_KEY_MISSING,
                f"Secret {ns}/{secret_name} has no " + ", ".join(
                    f"key {k!r} (named by spec.secretRef.keys.{field})" for field, k in missing
                ) + "; nothing is delivered until it has",
            ))
        bad = [k for k in render.secret_keys_read(cluster_spec, found.keys)
               if k in found.undecodable]
        if bad:
            return Prepared(problem=(
                ClusterReason.SECRET_UNDECODABLE,
                f"Secret {ns}/{secret_name}: the value of " + ", ".join(f"key {k!r}" for k in bad)
                + " is not base64 of UTF-8 text; nothing is delivered until it is",
            ))
        digest = found.digest
    inputs = render.SealInputs(
        public_key=key.public_key,
        key_id=key.key_id,
        binding=sealing.binding_for(agent_ns, naming.sealed_name(ns, name)),
        secret_digest=digest,
        hash_key=ctx.sealer.keys.hash_key,
    )
    return Prepared(render.render_storage_connection(
        conn, cluster, ctx.world.cluster_labels(cluster), inputs, spec=cluster_spec,
        namespace=agent_ns,
    ))


def identity_work(world: World, cluster: str) -> WorkFact | None:
    """The identity work of ``cluster``: the one of its exact name (never another labelled one)."""
    return next((w for w in world.works_on(cluster, naming.KIND_IDENTITY)
                 if w.name == naming.IDENTITY_WORK_NAME), None)


@dataclass(frozen=True)
class KeyDecision:
    """The agent key to seal to on a cluster (None: not yet, see ``waits``, or ``problem``)."""

    key: AgentKey | None = None
    pin: AgentKey | None = None
    """A key to pin first (a new cluster's, or one a hub admin approved)."""
    waits: tuple[ordering.Wait, ...] = ()
    problem: tuple[str, str] | None = None


def agent_key(ctx: Context, cluster: str, agent_ns: str) -> KeyDecision:
    """The key to seal to on ``cluster``, after the identity and pin checks.

    The identity work must be the one of its exact name with the shape the manager renders
    (ReadOnly, reading the agent's ConfigMap in ``agent_ns``): any other is not trusted
    (``IdentityWorkInvalid``; the manager writes it again). The published key must be the
    pinned one (see :mod:`addon_manager.kinds.pinning`), else ``AgentKeyChanged``.
    """
    identity = identity_work(ctx.world, cluster)
    expected = render.render_identity(cluster, agent_ns).render_hash
    if identity is not None and identity.render_hash == expected and identity.identity_source != (
        f"{agent_ns}/{c.AGENT_IDENTITY_CONFIGMAP}"
    ):
        return KeyDecision(problem=(pinning.REASON_IDENTITY_INVALID, (
            f"ManifestWork {cluster}/{naming.IDENTITY_WORK_NAME} was changed: it is not the "
            "ReadOnly work reading the agent's identity ConfigMap; its key is not trusted "
            "and nothing is sealed until the manager has written it again")))
    if identity is not None and identity.render_hash != expected:
        identity = None  # it reads another namespace (the agent moved), or is being rewritten
    published = pinning.published(identity)
    if published is None:
        return KeyDecision(waits=tuple(ordering.waits_for_storage(None)))
    sealer = ctx.sealer
    decision = pinning.decide(
        cluster, sealer.pinned(cluster), sealer.approved(cluster), published,
        sealer.approve_hint(cluster, published.current.key_id),
    )
    if decision.key is None:
        return KeyDecision(problem=(decision.reason, decision.message))
    return KeyDecision(decision.key, pin=decision.pin)
