"""kopf handlers: indexes over the hub, one daemon per intent, deletion with a finalizer.

Handlers stay thin: indexes turn watch events into :class:`~addon_manager.facts.WorkFact`
and small tuples, event handlers wake the intents a change concerns, and each intent's
daemon calls :meth:`~addon_manager.reconcile.Reconciler.reconcile` (at most once a second,
which also coalesces status writes).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf

from addon_api import constants as c
from addon_manager import conflicts, metrics, naming, partition, tenancy
from addon_manager.facts import (
    ClusterFact,
    WorkFact,
    agent_namespace,
    owner_of,
    parse_cluster,
    parse_work,
)
from addon_manager.placement import decided_clusters, decision_key
from addon_manager.policy import TENANT_KINDS, Policy
from addon_manager.reconcile import PLURALS, Reconciler, Writer
from addon_manager.sealkeys import Sealer
from addon_manager.secrets import PENDING, SecretAccess, SecretFact, SecretWatches

log = logging.getLogger(__name__)

FINALIZER = f"{c.GROUP}/cleanup"
CLUSTER_GROUP = "cluster.open-cluster-management.io"
ADDON_GROUP = "addon.open-cluster-management.io"
WORK_GROUP = "work.open-cluster-management.io"
INDEX_NAMES = (
    "placement_decisions", "placements", "managed_clusters", "manifest_works", "addons_index",
    *(f"{plural}_index" for plural in PLURALS.values()),
)


@dataclass
class Settings:
    """What main() tells the handlers."""

    writer: Writer | None = None
    addons: bool = True
    min_interval: float = 1.0
    """Seconds between two reconciles of one intent (coalesces status writes)."""
    resync: float = 300.0
    """Seconds after which an idle intent is reconciled anyway (writes nothing if in sync)."""
    stale_after: float = 60.0
    """Seconds a work may wait for the work agent before its cluster's entry is stale."""
    unavailable_grace: float = partition.UNAVAILABLE_GRACE
    """Seconds the works of a cluster that left its Placement while not Available are kept."""
    deletion_blocked_after: float = 30.0
    connection: kopf.ConnectionInfo | None = None
    secrets: SecretWatches | None = None
    """Per-namespace Secret watches (main() starts them; see addon_manager.secrets)."""
    ready: bool = False
    policy: Policy = field(default_factory=Policy)
    """What the platform admin allows hub tenants (devFlags, stack owners)."""
    sealer: Sealer | None = None
    """Signing/hash keys, sequences and pinned agent keys (main() loads them from the hub)."""
    sealing_refresh: float = 10.0
    """Seconds between two reads of the pins and approvals (a hub admin's approval)."""


SETTINGS = Settings()


@dataclass
class Wakeups:
    """One asyncio.Event per intent; set when something the intent depends on changed."""

    events: dict[tuple[str, str, str], asyncio.Event] = field(default_factory=dict)

    def get(self, key: tuple[str, str, str]) -> asyncio.Event:
        """The event of an intent (created on first use)."""
        if key not in self.events:
            self.events[key] = asyncio.Event()
        return self.events[key]

    def poke(self, keys: Iterable[tuple[str, str, str]]) -> None:
        """Wake these intents."""
        for key in keys:
            self.get(key).set()


WAKEUPS = Wakeups()
_RECONCILER: Reconciler | None = None
_CLUSTERS: dict[str, ClusterFact] = {}
_AGENT_NAMESPACES: dict[str, str] = {}
"""Agent install namespace per cluster, as last seen (wakes on a change only)."""


def _store(index: Any, key: Any) -> list[Any]:
    try:
        return list(index[key])
    except KeyError:
        return []


class IndexWorld:
    """The reconciler's :class:`~addon_manager.reconcile.World`, read from kopf indexes."""

    def __init__(self, indexes: Mapping[str, Any]) -> None:
        self.ix = {name: indexes[name] for name in INDEX_NAMES}

    def placement_exists(self, namespace: str, name: str) -> bool:
        """Whether the Placement exists."""
        return (namespace, name) in self.ix["placements"]

    def placement_clusters(self, namespace: str, name: str) -> frozenset[str]:
        """Union of the clusters of every decision object of the Placement."""
        out: set[str] = set()
        for names in _store(self.ix["placement_decisions"], (namespace, name)):
            out.update(names)
        return frozenset(out)

    def cluster_labels(self, cluster: str) -> dict[str, str]:
        """Labels of a ManagedCluster."""
        found = self.cluster_health(cluster)
        return dict(found.labels) if found else {}

    def cluster_health(self, cluster: str) -> ClusterFact | None:
        """The ManagedCluster as last seen: labels and availability."""
        found = _store(self.ix["managed_clusters"], cluster)
        return found[0] if found else None

    def works_of(self, kind: str, namespace: str, name: str) -> dict[str, WorkFact]:
        """Works owned by an intent, by cluster."""
        return {w.cluster: w for w in _store(self.ix["manifest_works"], ("owner", kind,
                                                                        namespace, name))}

    def works_on(self, cluster: str, kind: str) -> list[WorkFact]:
        """Works of one owner kind on one cluster."""
        return _store(self.ix["manifest_works"], ("on", cluster, kind))

    def foreign_work(self, cluster: str, name: str) -> bool:
        """Whether a ManifestWork of that name exists there and is not the add-on's."""
        return any(o is None for o in _store(self.ix["manifest_works"], ("name", cluster, name)))

    def claims(self) -> list[conflicts.Claim]:
        """Every ModelServing with the clusters its Placement selects."""
        return [
            conflicts.Claim(ns, name, created, self.placement_clusters(ns, placement))
            for ns, name, created, placement, _ in _store(
                self.ix["modelservings_index"], ("all",))
        ]

    def storage_clusters(self, exclude: tuple[str, str] | None = None) -> frozenset[str]:
        """Clusters selected by any StorageConnection (but ``exclude``, being deleted)."""
        out: set[str] = set()
        for ns, name, _, placement, _ in _store(self.ix["storageconnections_index"], ("all",)):
            if (ns, name) != exclude:
                out.update(self.placement_clusters(ns, placement))
        return frozenset(out)

    def secret(self, namespace: str, name: str) -> SecretFact | None:
        """A hub Secret as its namespace's watch last saw it (never its data)."""
        return SETTINGS.secrets.get(namespace, name) if SETTINGS.secrets else None

    def secret_access(self, namespace: str) -> SecretAccess:
        """Whether the manager may read the Secrets of a namespace."""
        return SETTINGS.secrets.access(namespace) if SETTINGS.secrets else PENDING

    def addon_exists(self, cluster: str) -> bool:
        """Whether the ManagedClusterAddOn model-serving exists in the cluster namespace."""
        return cluster in self.ix["addons_index"]

    def agent_namespace(self, cluster: str) -> str:
        """The agent's install namespace on a cluster (OCM's default without an add-on)."""
        found = _store(self.ix["addons_index"], cluster)
        return str(found[0]) if found else agent_namespace(None)

    def intents_of_kind(self, kind: str) -> list[tuple[str, str, str]]:
        """Keys of every intent of a kind."""
        return [(kind, ns, name) for ns, name, *_ in _store(
            self.ix[f"{PLURALS[kind]}_index"], ("all",))]

    def intents_using(self, namespace: str, placement: str) -> list[tuple[str, str, str]]:
        """Keys of every intent that uses a Placement."""
        out: list[tuple[str, str, str]] = []
        for plural in PLURALS.values():
            out.extend(_store(self.ix[f"{plural}_index"], ("placement", namespace, placement)))
        return out

    def intents_reading_secret(self, namespace: str, name: str) -> list[tuple[str, str, str]]:
        """Keys of the StorageConnections whose credentials are in a Secret."""
        return _store(self.ix["storageconnections_index"], ("secret", namespace, name))


def _mark_ready() -> None:
    """Record readiness: kopf calls handlers only once every index is populated."""
    if not SETTINGS.ready:
        SETTINGS.ready = True
        metrics.READY.set(1)
        log.info("indexes populated; reconciling")


def _reconciler(indexes: Mapping[str, Any]) -> Reconciler:
    global _RECONCILER
    if _RECONCILER is None:
        assert SETTINGS.writer is not None, "main() sets the writer"
        _RECONCILER = Reconciler(
            IndexWorld(indexes), SETTINGS.writer, addons=SETTINGS.addons,
            stale_after=SETTINGS.stale_after, admin=SETTINGS.policy,
            unavailable_grace=SETTINGS.unavailable_grace, sealer=SETTINGS.sealer,
        )
    return _RECONCILER


# Startup and login -------------------------------------------------------------------------------


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Our finalizer, progress kept in annotations, only warnings posted as Events."""
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=c.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=c.GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    if SETTINGS.sealer is not None:
        _BACKGROUND.add(asyncio.get_running_loop().create_task(_watch_pins(SETTINGS.sealer)))


_BACKGROUND: set[asyncio.Task[None]] = set()


async def _watch_pins(sealer: Sealer) -> None:
    """Read the pins and approvals every ``sealing_refresh`` seconds; wake what they concern.

    About once a minute the verify key is also written into the add-on's configuration again.

    A hub admin approves an agent key by editing the manager's ConfigMap (see
    :mod:`addon_manager.pinning`); the StorageConnections are reconciled then.
    """
    rounds = 0
    republish = max(1, int(60 / max(SETTINGS.sealing_refresh, 0.1)))
    while True:
        await asyncio.sleep(SETTINGS.sealing_refresh)
        rounds += 1
        try:
            if sealer.publish is not None and rounds % republish == 0:
                await asyncio.get_running_loop().run_in_executor(None, sealer.publish)
            changed = await sealer.refresh()
        except Exception as err:  # the API server is away: try again next time
            log.warning("reading the sealing ConfigMap failed: %s", err)
            continue
        if changed and _RECONCILER is not None and isinstance(_RECONCILER.world, IndexWorld):
            log.info("pins or approvals changed for %s", ", ".join(sorted(changed)))
            WAKEUPS.poke(_RECONCILER.world.intents_of_kind(c.KIND_STORAGE_CONNECTION))


@kopf.on.login()
async def login(logger: Any, **kwargs: Any) -> kopf.ConnectionInfo | None:
    """The connection main() built from --kubeconfig; in-cluster credentials otherwise."""
    if SETTINGS.connection is not None:
        return SETTINGS.connection
    return kopf.login_via_client(logger=logger, **kwargs)


# Indexes -----------------------------------------------------------------------------------------


@kopf.index(CLUSTER_GROUP, "v1beta1", "placementdecisions")
async def placement_decisions(body: kopf.Body, **_: Any) -> dict[Any, Any]:
    """(namespace, placement) -> clusters of one decision object."""
    key = decision_key(body)
    return {key: decided_clusters(body)} if key else {}


@kopf.index(CLUSTER_GROUP, "v1beta1", "placements")
async def placements(namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    """(namespace, name) of every Placement."""
    return {(namespace, name): True}


@kopf.index(CLUSTER_GROUP, "v1", "managedclusters")
async def managed_clusters(body: kopf.Body, name: str, **_: Any) -> dict[Any, Any]:
    """Cluster name -> labels and availability."""
    return {name: parse_cluster(body)}


@kopf.index(WORK_GROUP, "v1", "manifestworks")
async def manifest_works(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    """Our works by owner and by (cluster, kind); every work's owner by (cluster, name)."""
    fact = parse_work(body)
    if fact is None:
        return {("name", namespace, name): None}
    return {
        ("owner", *fact.owner): fact,
        ("on", fact.cluster, fact.kind): fact,
        ("name", namespace, name): fact.owner,
    }


@kopf.index(ADDON_GROUP, "v1alpha1", "managedclusteraddons")
async def addons_index(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> dict[Any, Any]:
    """Cluster namespace -> agent install namespace, for the model-serving add-on only."""
    return {namespace: agent_namespace(body)} if name == c.ADDON_NAME else {}


def _secrets_named(spec: Mapping[str, Any]) -> set[str]:
    """Secrets a StorageConnection spec reads: its secretRef and any its overrides set."""
    refs = [spec.get("secretRef")]
    refs += [(o.get("patch") or {}).get("secretRef") for o in spec.get("overrides") or []
             if isinstance(o, Mapping)]
    return {str(r["name"]) for r in refs if isinstance(r, Mapping) and r.get("name")}


def _intent_index(kind: str) -> Any:
    async def index(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
        spec = body.get("spec") or {}
        placement = str((spec.get("placementRef") or {}).get("name", ""))
        created = str(body.get("metadata", {}).get("creationTimestamp", ""))
        secret = str((spec.get("secretRef") or {}).get("name", ""))
        out: dict[Any, Any] = {
            ("all",): (namespace, name, created, placement, secret),
            ("placement", namespace, placement): (kind, namespace, name),
        }
        for read in _secrets_named(spec):
            out[("secret", namespace, read)] = (kind, namespace, name)
        return out

    return index


for _kind, _plural in PLURALS.items():
    kopf.index(c.GROUP, c.VERSION, _plural, id=f"{_plural}_index")(_intent_index(_kind))


# Wake-ups ----------------------------------------------------------------------------------------


@kopf.on.event(CLUSTER_GROUP, "v1beta1", "placementdecisions")
async def decision_changed(body: kopf.Body, **kwargs: Any) -> None:
    """A decision changed: wake the intents of its Placement."""
    _mark_ready()
    key = decision_key(body)
    if key:
        WAKEUPS.poke(IndexWorld(kwargs).intents_using(*key))


@kopf.on.event(CLUSTER_GROUP, "v1beta1", "placements")
async def placement_changed(namespace: str | None, name: str, **kwargs: Any) -> None:
    """A Placement appeared or went away: wake the intents that use it."""
    _mark_ready()
    WAKEUPS.poke(IndexWorld(kwargs).intents_using(str(namespace), name))


@kopf.on.event(CLUSTER_GROUP, "v1", "managedclusters")
async def cluster_changed(body: kopf.Body, name: str, **kwargs: Any) -> None:
    """A cluster's labels or availability changed: wake every intent.

    Overrides may select it differently now; its entries may turn stale or current.
    """
    _mark_ready()
    new = parse_cluster(body)
    if _CLUSTERS.get(name) == new:
        return
    _CLUSTERS[name] = new
    world = IndexWorld(kwargs)
    for kind in PLURALS:
        WAKEUPS.poke(world.intents_of_kind(kind))


@kopf.on.event(ADDON_GROUP, "v1alpha1", "managedclusteraddons")
async def addon_changed(
    type: str | None, body: kopf.Body, namespace: str | None, name: str, **kwargs: Any
) -> None:
    """A cluster's agent install namespace changed: wake the StorageConnections.

    Its identity work and sealed objects are rendered for that namespace (and sealed for it).
    """
    _mark_ready()
    if name != c.ADDON_NAME:
        return
    cluster = str(namespace)
    new = agent_namespace(None if type == "DELETED" else body)
    if _AGENT_NAMESPACES.get(cluster, agent_namespace(None)) == new:
        _AGENT_NAMESPACES[cluster] = new
        return
    _AGENT_NAMESPACES[cluster] = new
    log.info("agent namespace of %s is now %s", cluster, new)
    WAKEUPS.poke(IndexWorld(kwargs).intents_of_kind(c.KIND_STORAGE_CONNECTION))


@kopf.on.event(WORK_GROUP, "v1", "manifestworks", labels={c.LABEL_MANAGED_BY: c.FIELD_MANAGER})
async def work_changed(labels: Mapping[str, str], **kwargs: Any) -> None:
    """A work of ours changed: wake its owner and the intents gated on it."""
    _mark_ready()
    owner = owner_of(labels)
    if owner is None:
        return
    world = IndexWorld(kwargs)
    kind = owner[0]
    if kind in PLURALS:
        WAKEUPS.poke([owner])
    if kind == c.KIND_MODEL_SERVING:
        WAKEUPS.poke(world.intents_of_kind(c.KIND_SERVING_RUNTIME))
        WAKEUPS.poke(world.intents_of_kind(c.KIND_INFERENCE_SERVICE))
    elif kind in (c.KIND_INFERENCE_SERVICE, c.KIND_SERVING_RUNTIME):
        # A removal of a stack held back by these works proceeds once they are gone.
        WAKEUPS.poke(world.intents_of_kind(c.KIND_MODEL_SERVING))
    elif kind == c.KIND_STORAGE_CONNECTION:
        WAKEUPS.poke(world.intents_of_kind(c.KIND_INFERENCE_SERVICE))
    elif kind == tenancy.ACCESS_KIND:  # a tenant's identity applied (or gone): its works
        WAKEUPS.poke([key for tenant in TENANT_KINDS for key in world.intents_of_kind(tenant)
                      if key[1] == owner[1]])
    elif kind == naming.KIND_IDENTITY:
        WAKEUPS.poke(world.intents_of_kind(c.KIND_STORAGE_CONNECTION))
        cluster = str(kwargs.get("namespace"))
        if cluster not in world.storage_clusters():  # e.g. left over from before a restart
            await _reconciler(kwargs).gc_identity()


def secret_changed(namespace: str, name: str | None) -> None:
    """Wake the StorageConnections that read a Secret that changed.

    ``name`` None: the manager's access to the namespace's Secrets changed (all of them there).
    Called on the event loop by :class:`~addon_manager.secrets.SecretWatches`.
    """
    if _RECONCILER is None:
        return  # nothing reconciled yet: each first reconcile reads the store anyway
    world = _RECONCILER.world
    if not isinstance(world, IndexWorld):
        return
    if name is not None:
        WAKEUPS.poke(world.intents_reading_secret(namespace, name))
    else:
        WAKEUPS.poke([k for k in world.intents_of_kind(c.KIND_STORAGE_CONNECTION)
                      if k[1] == namespace])


# Intents -----------------------------------------------------------------------------------------


def _register_intent(kind: str, plural: str) -> None:
    @kopf.on.event(c.GROUP, c.VERSION, plural, id=f"{plural}_event")
    async def changed(namespace: str | None, name: str, **kwargs: Any) -> None:
        _mark_ready()
        WAKEUPS.poke([(kind, str(namespace), name)])
        if kind == c.KIND_MODEL_SERVING:  # claims changed: other ModelServings may win/lose
            WAKEUPS.poke(IndexWorld(kwargs).intents_of_kind(kind))

    @kopf.daemon(c.GROUP, c.VERSION, plural, id=f"{plural}_daemon", cancellation_timeout=10)
    async def run(
        body: kopf.Body, namespace: str | None, name: str, stopped: kopf.DaemonStopped,
        logger: logging.Logger | logging.LoggerAdapter[Any], **kwargs: Any,
    ) -> None:
        key = (kind, str(namespace), name)
        wake = WAKEUPS.get(key)
        reconciler = _reconciler(kwargs)
        while not stopped:
            wake.clear()
            if (kind == c.KIND_STORAGE_CONNECTION and SETTINGS.secrets is not None
                    and _secrets_named(body.get("spec") or {})):
                await SETTINGS.secrets.settled(str(namespace))  # its namespace's watch
            try:
                outcome = await reconciler.reconcile(kind, body)
            except Exception:
                logger.exception("reconcile of %s %s/%s failed", kind, str(namespace), name)
                await asyncio.sleep(5)
                continue
            if outcome.phase_after and outcome.phase_after != outcome.phase_before:
                kopf.event(
                    body, type="Warning" if outcome.phase_after == "Degraded" else "Normal",
                    reason=outcome.phase_after,
                    message=f"phase {outcome.phase_before or 'unset'} -> {outcome.phase_after}",
                )
            if outcome.conflicts and outcome.status_written:
                kopf.event(body, type="Warning", reason="Conflict",
                           message="another ModelServing serves " + ", ".join(outcome.conflicts))
            await asyncio.sleep(SETTINGS.min_interval)
            # A work waiting for its work agent turns stale by the clock alone, and the grace of
            # a cluster that left while unavailable ends by the clock: look again then.
            timeout = min(SETTINGS.resync, (outcome.recheck_after or SETTINGS.resync) + 1)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=timeout)

    @kopf.on.delete(c.GROUP, c.VERSION, plural, id=f"{plural}_cleanup")
    async def delete(
        body: kopf.Body, namespace: str | None, name: str, runtime: datetime.timedelta,
        **kwargs: Any,
    ) -> None:
        reconciler = _reconciler(kwargs)
        overdue = runtime.total_seconds() >= SETTINGS.deletion_blocked_after
        if kind == c.KIND_MODEL_SERVING:
            # The status is kept current while the stacks go; a stack that add-on intents
            # still use is not removed (DeletionBlocked names them) until they are gone.
            outcome = await reconciler.reconcile(kind, body, overdue=overdue)
            if outcome.phase_after == "Invalid":  # spec unreadable: cleanup keeps the rule
                outcome.remaining = await reconciler.cleanup(kind, str(namespace), name)
            if outcome.blocked:
                raise kopf.TemporaryError(
                    "add-on intents use the stack on " + ", ".join(sorted(outcome.blocked)),
                    delay=2,
                )
            remaining = outcome.remaining
        else:
            remaining = await reconciler.cleanup(kind, str(namespace), name)
        for _ in range(10):  # works usually go within seconds: wait here, quietly
            if not remaining:
                break
            await asyncio.sleep(1)
            if kind == c.KIND_MODEL_SERVING:  # deletes were sent; just look
                remaining = sorted(reconciler.world.works_of(kind, str(namespace), name))
            else:
                remaining = await reconciler.cleanup(kind, str(namespace), name)
        if remaining and kind == c.KIND_MODEL_SERVING:
            raise kopf.TemporaryError(  # the next run writes WorksRemain once overdue
                f"waiting for ManifestWorks to go on {len(remaining)} cluster(s)", delay=2
            )
        if remaining:
            if runtime.total_seconds() >= SETTINGS.deletion_blocked_after:
                await reconciler.write_deletion_blocked(kind, str(namespace), name, body, remaining)
            raise kopf.TemporaryError(
                f"waiting for ManifestWorks to go on {len(remaining)} cluster(s)", delay=2
            )
        metrics.forget_intent(kind, str(namespace), name)
        WAKEUPS.events.pop((kind, str(namespace), name), None)
        if kind == c.KIND_MODEL_SERVING:
            WAKEUPS.poke(IndexWorld(kwargs).intents_of_kind(kind))

    del changed, run, delete


for _kind, _plural in PLURALS.items():
    _register_intent(_kind, _plural)
