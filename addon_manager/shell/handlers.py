"""kopf handlers: indexes over the hub, one daemon per intent, deletion with a finalizer.

Nothing registers on import: :func:`register` puts every handler in the registry main() runs
kopf with.

Handlers stay thin: kopf indexes turn watch events into small tuples, the ManifestWork
informer (:mod:`addon_manager.shell.informers`, outside kopf) keeps the works as
:class:`~addon_manager.facts.records.WorkFact`, event handlers wake the intents a change concerns,
and each intent's daemon calls :meth:`~addon_manager.shell.reconcile.Reconciler.reconcile` (at
most once a second, which also coalesces status writes).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf

from addon_api import constants as c
from addon_api.common import ShardStatus
from addon_api.hashing import short_hash
from addon_manager.engine import partition, sharding
from addon_manager.engine.policy import Policy
from addon_manager.facts import conflicts, revisions
from addon_manager.facts.placement import decided_clusters, decision_group, decision_key
from addon_manager.facts.records import AddonFact, ClusterFact, WorkFact, agent_namespace
from addon_manager.facts.revisions import RevisionFact
from addon_manager.facts.runtimes import RuntimeFact, parse_runtime
from addon_manager.facts.secrets import PENDING, SecretAccess, SecretFact
from addon_manager.kinds import registry, storage_connection
from addon_manager.kinds.base import HelperSpec, KindSpec
from addon_manager.kinds.registry import KINDS
from addon_manager.shell import firstpass, informers, metrics
from addon_manager.shell.execute import Writer
from addon_manager.shell.informers import KeyedStore, WorkInformer, WorkStore
from addon_manager.shell.metricgate import PrometheusGate
from addon_manager.shell.reconcile import GATE_REFRESH, Reconciler
from addon_manager.shell.sealkeys import Sealer
from addon_manager.shell.secrets import SecretWatches
from addon_manager.shell.shards import ShardKeeper

log = logging.getLogger(__name__)

FINALIZER = f"{c.GROUP}/cleanup"
CLUSTER_GROUP = "cluster.open-cluster-management.io"
ADDON_GROUP = "addon.open-cluster-management.io"
INDEX_NAMES = (
    "placement_decisions", "placements", "intent_revisions",
    *(f"{spec.plural}_index" for spec in KINDS.values()),
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
    """Per-namespace Secret watches (main() starts them; see addon_manager.shell.secrets)."""
    ready: bool = False
    policy: Policy = field(default_factory=Policy)
    """What the platform admin allows hub tenants (devFlags, stack owners)."""
    sealer: Sealer | None = None
    """Signing/hash keys, sequences and pinned agent keys (main() loads them from the hub)."""
    sealing_refresh: float = 10.0
    """Seconds between two reads of the pins and approvals (a hub admin's approval)."""
    gate: PrometheusGate | None = None
    """Where progressive rollouts' metric gates are queried (``--prometheus-url``)."""
    gate_refresh: float = GATE_REFRESH
    """Seconds a metric gate or spillover answer is used before its query runs again."""


@dataclass
class Wake:
    """What wakes one intent's daemon."""

    event: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when something the intent depends on changed."""
    edited: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when its generation differs from the one its latest reconcile started from."""
    generation: int | None = None
    """The generation its latest reconcile started from (None: no reconcile yet)."""


@dataclass
class Wakeups:
    """What wakes each intent's daemon (:class:`Wake`), by intent.

    An intent's daemon pauses between reconciles (at most one status write a second); an
    edit of the intent itself (a new ``metadata.generation``) ends the pause at once, so a
    user's change is never kept waiting for the coalescing of feedback.
    """

    intents: dict[tuple[str, str, str], Wake] = field(default_factory=dict)

    def of(self, key: tuple[str, str, str]) -> Wake:
        """The record of an intent (created on first use)."""
        if key not in self.intents:
            self.intents[key] = Wake()
        return self.intents[key]

    def get(self, key: tuple[str, str, str]) -> asyncio.Event:
        """The event of an intent, set when something it depends on changed."""
        return self.of(key).event

    def poke(self, keys: Iterable[tuple[str, str, str]]) -> None:
        """Wake these intents."""
        for key in keys:
            self.get(key).set()

    def reconciling(self, key: tuple[str, str, str], generation: int) -> None:
        """The intent's reconcile starts from ``generation``."""
        wake = self.of(key)
        wake.generation = generation
        wake.edited.clear()

    def seen(self, key: tuple[str, str, str], generation: int) -> None:
        """The intent was seen at ``generation``: an edit when its daemon reconciled another."""
        wake = self.intents.get(key)
        if wake is not None and wake.generation is not None and generation != wake.generation:
            wake.edited.set()

    async def pause(self, key: tuple[str, str, str], seconds: float) -> None:
        """Wait ``seconds``, or less when the intent is edited meanwhile."""
        if seconds <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.of(key).edited.wait(), timeout=seconds)

    def forget(self, key: tuple[str, str, str]) -> None:
        """The intent is gone."""
        self.intents.pop(key, None)


@dataclass
class Sharding:
    """A sharded manager's shards (``--shards``): which intents this replica writes."""

    keeper: ShardKeeper
    count: int
    replica: str
    gained: dict[int, asyncio.Event] = field(default_factory=dict)
    """Per shard, set while this replica holds it (daemons of its intents wait on it)."""
    takeover: firstpass.FirstPass = field(default_factory=firstpass.FirstPass)
    """The first reconciles after the latest gain: its changed intents plan first."""
    taken: frozenset[int] = frozenset()
    """The shards of the latest gain."""

    def shard(self, key: tuple[str, str, str]) -> int:
        """The shard of an intent."""
        return sharding.shard_of(key[1], key[2], self.count)

    def held(self, key: tuple[str, str, str]) -> ShardStatus | None:
        """The shard an intent is held by, while this replica may write it; else None."""
        shard = self.shard(key)
        epoch = self.keeper.epoch(shard)
        return None if epoch is None else ShardStatus(index=shard, replica=self.replica,
                                                      epoch=epoch)

    def holds(self, held: ShardStatus) -> Callable[[], bool]:
        """Whether this replica still holds ``held``'s shard at its epoch.

        Asked before each work write of a reconcile by it.
        """
        return lambda: self.keeper.epoch(held.index) == held.epoch

    def event(self, shard: int) -> asyncio.Event:
        """The event set while this replica holds ``shard``."""
        if shard not in self.gained:
            self.gained[shard] = asyncio.Event()
        return self.gained[shard]

    async def until_held(self, key: tuple[str, str, str], timeout: float,
                         stopped: kopf.DaemonStopped | None = None) -> None:
        """Return once this replica holds the intent's shard, or after ``timeout``.

        Also once ``stopped`` (the waiting daemon's) is set: kopf asks the daemon to stop.
        """
        event = self.event(self.shard(key))
        if event.is_set():  # set, but lapsed since: wait for the next gain
            event.clear()
        if stopped is not None:
            await until_woken(event, stopped, timeout)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    def gain(self, shards: Iterable[int]) -> None:
        """Start the first pass over newly gained shards (an earlier pass ends here)."""
        self.takeover.settled.set()
        self.takeover, self.taken = firstpass.FirstPass(), frozenset(shards)

    async def first_turn(self, key: firstpass.IntentKey,
                         changed_now: Callable[[], Iterable[firstpass.IntentKey]],
                         is_changed: bool = False) -> None:
        """Return when intent ``key``, whose shard was just gained, may plan.

        At once if its spec changed while another replica held it (``is_changed``, or in
        ``changed_now``) or its shard is not of the latest gain, else once every changed
        intent of the gained shards made its first reconcile (at most the first pass's
        limit).
        """
        taken = self.taken
        if self.shard(key) not in taken:
            return
        await self.takeover.turn(
            key, lambda: [k for k in changed_now() if self.shard(k) in taken], is_changed)


def shards_changed(state: ManagerState, gained: Mapping[int, int], lost: set[int]) -> None:
    """The keeper gained or lost shards: wake the intents they hold.

    A gain first moves sealing to a new block of sequences (the shard's previous holder may
    have sealed from a newer block than this replica's). Called on the event loop.
    """
    shards = state.sharding
    if shards is None:
        return
    for shard in lost:
        shards.event(shard).clear()
    if gained and state.settings.sealer is not None:
        state.settings.sealer.new_block()
    if gained:
        shards.gain(gained)
    for shard in gained:
        shards.event(shard).set()
    moved = [key for key in list(state.wakeups.intents) if shards.shard(key) in set(gained) | lost]
    for kind, namespace, name in moved:  # the metric says so now, not at the daemon's next turn
        shard = shards.shard((kind, namespace, name))
        metrics.intent_shard(kind, namespace, name, shard, shards.replica, shard in gained)
    state.wakeups.poke(moved)


@dataclass
class ManagerState:
    """Everything the handlers share, kept in kopf's operator memo (``memo.state``)."""

    settings: Settings = field(default_factory=Settings)
    wakeups: Wakeups = field(default_factory=Wakeups)
    reconciler: Reconciler | None = None
    """Created at the first handler call (it reads kopf's indexes)."""
    background: set[asyncio.Task[None]] = field(default_factory=set)
    """Tasks started at startup (kept referenced while they run)."""
    helper_checks: dict[str, set[str]] = field(default_factory=dict)
    """Per helper kind, the clusters whose work events wait to be judged together
    (:func:`work_changed`)."""
    works: WorkStore = field(default_factory=WorkStore)
    """The add-on's ManifestWorks as facts, kept current by ``informer`` (outside kopf)."""
    clusters: KeyedStore[ClusterFact] = field(
        default_factory=lambda: KeyedStore(lambda f: ("", f.name)))
    """ManagedClusters (labels, availability), kept current by an informer."""
    addons: KeyedStore[AddonFact] = field(
        default_factory=lambda: KeyedStore(lambda f: (f.cluster, c.ADDON_NAME)))
    """The add-on's ManagedClusterAddOns (agent install namespaces), kept by an informer."""
    informers: list[WorkInformer] = field(default_factory=list)
    """List and watch works, clusters and add-ons into the stores above, outside kopf
    (main() makes them; started at startup)."""
    informers_started: bool = False
    first_pass: firstpass.FirstPass = field(default_factory=firstpass.FirstPass)
    """Changed intents reconcile first after a start or takeover."""
    held: set[firstpass.IntentKey] = field(default_factory=set)
    """Intents whose prefetch holds the works' full list until their first reconcile."""
    kopf_seen: bool = False
    """kopf called a handler (every kopf index is populated)."""
    sharding: Sharding | None = None
    """The shards this replica holds (``--shards``); None: it writes every intent."""

    async def works_synced(self) -> None:
        """Return once works, clusters and add-ons are listed (at once without informers)."""
        for informer in self.informers:
            await informer.synced.wait()

    async def works_ready_for(self, key: firstpass.IntentKey) -> None:
        """Return once intent ``key`` may be planned.

        That is once every informer is synced or, for an intent of the first pass while the
        works are still being listed, once clusters and add-ons are synced and the works its
        plan reads are prefetched (:func:`registry.works_read`).
        """
        works = self._works_informer()
        selectors = []
        if works is not None and not works.synced.is_set() and self.first_pass.first(key):
            selectors = informers.prefetch_selectors(key, registry.works_read(key[0]))
        if works is None or not selectors:  # (None: planned from the fake hub in tests)
            await self.works_synced()
            return
        works.hold()  # until this intent's first reconcile has written (see reconciled())
        self.held.add(key)
        try:  # while the clusters and add-ons are listed: the API server lists one while
            count = await works.prefetch(selectors)  # this process decodes the other
        except Exception as err:  # the full list still comes: wait for it instead
            log.warning("%s %s/%s: prefetching its works failed (%s); waiting for the full "
                        "list", *key, err)
            self.held.discard(key)
            works.release()
            await self.works_synced()
            return
        for informer in self.informers:
            if informer is not works:
                await informer.synced.wait()
        log.info("%s %s/%s: %d works prefetched ahead of the full list", *key, count)

    def reconciled(self, key: firstpass.IntentKey) -> None:
        """Record an intent's reconcile: the first pass moves on, a hold on the list ends."""
        self.first_pass.reconciled(key)
        if self.sharding is not None:
            self.sharding.takeover.reconciled(key)
        works = self._works_informer()
        if key in self.held and works is not None:
            self.held.discard(key)
            works.release()

    def _works_informer(self) -> WorkInformer | None:
        """The informer that keeps :attr:`works` (None without informers)."""
        return next((i for i in self.informers if i.store is self.works), None)

    def mark_ready(self) -> None:
        """Record readiness once kopf's indexes and the works are both in memory."""
        if self.settings.ready or not self.kopf_seen:
            return
        if not all(informer.synced.is_set() for informer in self.informers):
            return
        self.settings.ready = True
        metrics.READY.set(1)
        log.info("indexes, ManifestWorks, clusters and add-ons in memory; reconciling")

    def memo(self) -> kopf.Memo:
        """The operator memo to run kopf with (``kopf.run(memo=...)``)."""
        return kopf.Memo(state=self)


def state_of(memo: Any) -> ManagerState:
    """The manager's state from a handler's ``memo``."""
    state = memo.state
    assert isinstance(state, ManagerState), "main() runs kopf with ManagerState.memo()"
    return state


def _store(index: Any, key: Any) -> list[Any]:
    try:
        return list(index[key])
    except KeyError:
        return []


class IndexWorld:
    """The reconciler's :class:`~addon_manager.shell.reconcile.World`, read from kopf indexes."""

    def __init__(self, indexes: Mapping[str, Any], state: ManagerState) -> None:
        self.ix = {name: indexes[name] for name in INDEX_NAMES}
        self.secrets = state.settings.secrets
        self.works, self.clusters, self.addons = state.works, state.clusters, state.addons

    def placement_exists(self, namespace: str, name: str) -> bool:
        """Whether the Placement exists."""
        return (namespace, name) in self.ix["placements"]

    def placement_clusters(self, namespace: str, name: str) -> frozenset[str]:
        """Union of the clusters of every decision object of the Placement."""
        out: set[str] = set()
        for names in _store(self.ix["placement_decisions"], (namespace, name)):
            out.update(names)
        return frozenset(out)

    def placement_groups(self, namespace: str, name: str) -> dict[str, tuple[str, int]]:
        """The decision group (name, index) of every cluster of the Placement."""
        return {cl: (group, index) for group, index, names in _store(
            self.ix["placement_decisions"], ("groups", namespace, name)) for cl in names}

    def cluster_labels(self, cluster: str) -> dict[str, str]:
        """Labels of a ManagedCluster."""
        found = self.cluster_health(cluster)
        return dict(found.labels) if found else {}

    def cluster_health(self, cluster: str) -> ClusterFact | None:
        """The ManagedCluster as last seen: labels and availability."""
        return self.clusters.get("", cluster)

    def works_of(self, kind: str, namespace: str, name: str) -> dict[str, WorkFact]:
        """Works owned by an intent, by cluster."""
        return self.works.works_of(kind, namespace, name)

    def works_on(self, cluster: str, kind: str) -> list[WorkFact]:
        """Works of one owner kind on one cluster."""
        return self.works.works_on(cluster, kind)

    def foreign_work(self, cluster: str, name: str) -> bool:
        """Never known in advance: the informer sees only the add-on's works.

        A work of that name that is not ours makes the (non-forced) apply of a new work fail
        with 409, which the executor reports as ``ForeignWork``.
        """
        del cluster, name
        return False

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
        return self.secrets.get(namespace, name) if self.secrets else None

    def secret_access(self, namespace: str) -> SecretAccess:
        """Whether the manager may read the Secrets of a namespace."""
        return self.secrets.access(namespace) if self.secrets else PENDING

    def addon_exists(self, cluster: str) -> bool:
        """Whether the ManagedClusterAddOn model-serving exists in the cluster namespace."""
        return self.addons.get(cluster, c.ADDON_NAME) is not None

    def revisions_of(self, kind: str, namespace: str, name: str) -> list[RevisionFact]:
        """The revisions kept for an intent (the ControllerRevisions the manager wrote)."""
        return _store(self.ix["intent_revisions"], (kind, namespace, name))

    def agent_namespace(self, cluster: str) -> str:
        """The agent's install namespace on a cluster (OCM's default without an add-on)."""
        found = self.addons.get(cluster, c.ADDON_NAME)
        return found.namespace if found is not None else agent_namespace(None)

    def serving_runtimes(self, namespace: str) -> list[RuntimeFact]:
        """The MultiClusterServingRuntimes of a hub namespace."""
        return _store(self.ix[f"{KINDS[c.KIND_SERVING_RUNTIME].plural}_index"],
                      ("runtime", namespace))

    def intents_of_kind(self, kind: str) -> list[tuple[str, str, str]]:
        """Keys of every intent of a kind."""
        return [(kind, ns, name) for ns, name, *_ in _store(
            self.ix[f"{KINDS[kind].plural}_index"], ("all",))]

    def intents_using(self, namespace: str, placement: str) -> list[tuple[str, str, str]]:
        """Keys of every intent that uses a Placement."""
        out: list[tuple[str, str, str]] = []
        for spec in KINDS.values():
            out.extend(_store(self.ix[f"{spec.plural}_index"],
                              ("placement", namespace, placement)))
        return out

    def intents_reading_secret(self, namespace: str, name: str) -> list[tuple[str, str, str]]:
        """Keys of the intents whose credentials are in a Secret."""
        return [key for spec in registry.where(lambda s: s.seals)
                for key in _store(self.ix[f"{spec.plural}_index"], ("secret", namespace, name))]

    def changed_intents(self) -> list[tuple[str, str, str]]:
        """Keys of the intents whose spec changed since their status was last written."""
        return [key for spec in KINDS.values()
                for key in _store(self.ix[f"{spec.plural}_index"], ("changed",))]

    def intents_of(self, specs: Iterable[KindSpec], namespace: str | None = None
                   ) -> list[tuple[str, str, str]]:
        """Keys of every intent of these kinds (in ``namespace`` only, when given)."""
        return [key for spec in specs for key in self.intents_of_kind(spec.kind)
                if namespace is None or key[1] == namespace]


def _ready(memo: Any, indexes: Mapping[str, Any]) -> tuple[ManagerState, IndexWorld]:
    """The state and the world; records readiness.

    kopf calls handlers only once every index is populated.
    """
    state = state_of(memo)
    state.kopf_seen = True
    state.mark_ready()
    return state, _world(state, indexes)


def _world(state: ManagerState, indexes: Mapping[str, Any]) -> IndexWorld:
    return IndexWorld(indexes, state)


def _reconciler(state: ManagerState, indexes: Mapping[str, Any]) -> Reconciler:
    if state.reconciler is None:
        settings = state.settings
        assert settings.writer is not None, "main() sets the writer"
        assert settings.sealer is not None, "main() loads the sealer from the hub"
        state.reconciler = Reconciler(
            _world(state, indexes), settings.writer, settings.sealer, addons=settings.addons,
            stale_after=settings.stale_after, admin=settings.policy,
            unavailable_grace=settings.unavailable_grace, gate=settings.gate,
            gate_refresh=settings.gate_refresh,
        )
    return state.reconciler


def _sealing(world: IndexWorld) -> list[tuple[str, str, str]]:
    """Intents that seal to agent keys (woken when keys, pins or agent namespaces change)."""
    return world.intents_of(registry.where(lambda s: s.seals))


STOP_BACKOFF = 2.0
"""Seconds kopf gives an intent's daemon to return by itself once asked to stop (the manager
stops, the intent goes) before cancelling it. A daemon waiting for a wakeup returns at once;
a cancelled one is logged as a warning, which kopf posts as an Event on the intent: one per
intent at every stop of the manager."""


async def until_woken(wake: asyncio.Event, stopped: kopf.DaemonStopped, timeout: float) -> None:
    """Wait until ``wake`` is set, the daemon is asked to stop, or ``timeout`` seconds pass."""
    waits = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(stopped.wait())]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()


# Startup and login -------------------------------------------------------------------------------

EVENT_BACKOFFS = (1.0, 2.0)
"""Seconds between the retries of an Event post that failed (kopf's default: eight retries
over 54 s). Events say what the status says already; a stop waits for these at most."""



async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Our finalizer, progress kept in annotations, only warnings posted as Events."""
    settings.persistence.finalizer = FINALIZER
    state = state_of(memo)
    # Sharded replicas keep their handlers' progress apart: a replica that does not hold an
    # intent being deleted retries its cleanup without ever finishing it, so only the
    # holder's finished cleanup removes the finalizer.
    prefix = c.GROUP if state.sharding is None else (
        f"r{short_hash(state.sharding.replica, length=10)}.{c.GROUP}")
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=prefix)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=c.GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    # An Event that cannot be posted (its namespace is being deleted: 403 every time) was
    # retried eight times over 54 s, and the manager's shutdown waited for it: past its
    # grace period, and with it the Lease a standby waits for.
    settings.posting.default_backoffs = settings.posting.logging_backoffs = EVENT_BACKOFFS
    settings.watching.server_timeout = 300
    loop = asyncio.get_running_loop()
    tasks = []
    if state.settings.sealer is not None:
        tasks.append(loop.create_task(_watch_pins(state, state.settings.sealer)))
    for task in tasks:
        state.background.add(task)
        task.add_done_callback(state.background.discard)
    start_informers(state, loop)


def start_informers(state: ManagerState, loop: asyncio.AbstractEventLoop) -> None:
    """Start the informers on ``loop`` (once: a standby starts them before it leads)."""
    if state.informers_started:
        return
    state.informers_started = True
    tasks = [loop.create_task(informer.run(), name=f"{informer.what}-informer")
             for informer in state.informers]
    if state.informers:
        tasks.append(loop.create_task(_ready_when_synced(state)))
    for task in tasks:
        state.background.add(task)
        task.add_done_callback(state.background.discard)


async def close_connections(memo: kopf.Memo, **_: Any) -> None:
    """Stop the informers; close their and the writer's HTTP sessions (operator stops)."""
    state = state_of(memo)
    for task in list(state.background):
        task.cancel()
    await asyncio.gather(*state.background, return_exceptions=True)
    for holder in [*(informer.source for informer in state.informers), state.settings.writer,
                   state.settings.gate]:
        close = getattr(holder, "close", None)
        if close is not None:
            await close()


async def _ready_when_synced(state: ManagerState) -> None:
    await state.works_synced()
    state.mark_ready()


async def _watch_pins(state: ManagerState, sealer: Sealer) -> None:
    """Read the pins and approvals every ``sealing_refresh`` seconds; wake what they concern.

    About once a minute the add-on's AddOnDeploymentConfig is also checked, and written when it
    is not what the chart's ConfigMap and the verify key say (made again if deleted).

    A hub admin approves an agent key by editing the manager's ConfigMap (see
    :mod:`addon_manager.kinds.pinning`); the intents that seal are reconciled then.
    """
    rounds = 0
    refresh = state.settings.sealing_refresh
    republish = max(1, int(60 / max(refresh, 0.1)))
    while True:
        await asyncio.sleep(refresh)
        rounds += 1
        try:
            if sealer.publish is not None and rounds % republish == 0:
                await asyncio.get_running_loop().run_in_executor(None, sealer.publish)
            changed = await sealer.refresh()
        except Exception as err:  # the API server is away: try again next time
            log.warning("reading the sealing ConfigMap failed: %s", err)
            continue
        world = state.reconciler.world if state.reconciler is not None else None
        if changed and isinstance(world, IndexWorld):
            log.info("pins or approvals changed for %s", ", ".join(sorted(changed)))
            state.wakeups.poke(_sealing(world))


async def login(logger: Any, memo: kopf.Memo, **kwargs: Any) -> kopf.ConnectionInfo | None:
    """The connection main() built from --kubeconfig; in-cluster credentials otherwise."""
    connection = state_of(memo).settings.connection
    if connection is not None:
        return connection
    return kopf.login_via_client(logger=logger, **kwargs)


# Indexes -----------------------------------------------------------------------------------------


async def placement_decisions(body: kopf.Body, **_: Any) -> dict[Any, Any]:
    """The clusters of one decision object, by (namespace, placement).

    Also ("groups", namespace, placement) -> (group name, group index, clusters).
    """
    key = decision_key(body)
    if not key:
        return {}
    clusters = decided_clusters(body)
    return {key: clusters, ("groups", *key): (*decision_group(body), clusters)}


async def intent_revisions(body: kopf.Body, **_: Any) -> dict[Any, Any]:
    """(kind, namespace, name) of an intent -> one of its revisions."""
    parsed = revisions.parse(body)
    return {parsed[0]: parsed[1]} if parsed else {}


async def placements(namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
    """(namespace, name) of every Placement."""
    return {(namespace, name): True}


def _intent_index(spec: KindSpec) -> Any:
    kind = spec.kind

    async def index(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
        spec = body.get("spec") or {}
        placement = str((spec.get("placementRef") or {}).get("name", ""))
        created = str(body.get("metadata", {}).get("creationTimestamp", ""))
        secret = str((spec.get("secretRef") or {}).get("name", ""))
        out: dict[Any, Any] = {
            ("all",): (namespace, name, created, placement, secret),
            ("placement", namespace, placement): (kind, namespace, name),
        }
        for read in (storage_connection.secrets_named(spec) if seals else ()):
            out[("secret", namespace, read)] = (kind, namespace, name)
        if firstpass.changed(body):
            out[("changed",)] = (kind, namespace, name)
        if kind == c.KIND_SERVING_RUNTIME:
            out[("runtime", namespace)] = parse_runtime(body)
        return out

    seals = spec.seals
    return index


# Wake-ups ----------------------------------------------------------------------------------------


async def decision_changed(body: kopf.Body, memo: kopf.Memo, **kwargs: Any) -> None:
    """A decision changed: wake the intents of its Placement."""
    state, world = _ready(memo, kwargs)
    key = decision_key(body)
    if key:
        state.wakeups.poke(world.intents_using(*key))


async def placement_changed(
    namespace: str | None, name: str, memo: kopf.Memo, **kwargs: Any
) -> None:
    """A Placement appeared or went away: wake the intents that use it."""
    state, world = _ready(memo, kwargs)
    state.wakeups.poke(world.intents_using(str(namespace), name))


def cluster_changed(state: ManagerState, old: ClusterFact | None, new: ClusterFact | None
                    ) -> None:
    """A cluster's labels or availability changed (or it came or went): wake every intent.

    Overrides may select it differently now; its entries may turn stale or current. Called on
    the event loop by the informer (main() binds ``state``).
    """
    del old, new
    world = _reconciled_world(state)
    if world is not None:
        state.wakeups.poke(world.intents_of(KINDS.values()))


def addon_changed(state: ManagerState, old: AddonFact | None, new: AddonFact | None) -> None:
    """A cluster's ManagedClusterAddOn changed: record its availability, wake sealers.

    When the agent's install namespace changed, the intents that seal are woken: their
    identity work and sealed objects are rendered for that namespace (and sealed for it). No
    ManagedClusterAddOn means OCM's default namespace.
    """
    changed = new if new is not None else old
    if changed is not None:
        metrics.addon_available(changed.cluster, new.available if new is not None else None)
    before = old.namespace if old is not None else agent_namespace(None)
    after = new.namespace if new is not None else agent_namespace(None)
    world = _reconciled_world(state)
    if before == after or world is None:
        return
    fact = new if new is not None else old
    log.info("agent namespace of %s is now %s", fact.cluster if fact else "?", after)
    state.wakeups.poke(_sealing(world))


def _reconciled_world(state: ManagerState) -> IndexWorld | None:
    """The world once the first reconcile made it.

    Before that nothing needs waking: each first reconcile reads the stores anyway.
    """
    world = state.reconciler.world if state.reconciler is not None else None
    return world if isinstance(world, IndexWorld) else None


def work_changed(state: ManagerState, old: WorkFact | None, new: WorkFact | None) -> None:
    """A work of ours appeared, changed or went: wake its owner and its dependents.

    The intents that depend on the work's kind (see :mod:`addon_manager.kinds.registry`) are
    woken too.
    Called on the event loop by the informer (main() binds ``state``).
    """
    fact = new or old
    world = _reconciled_world(state)
    reconciler = state.reconciler
    if fact is None or world is None or reconciler is None:
        return
    kind, owner_ns = fact.kind, fact.intent_namespace
    if kind in KINDS:
        state.wakeups.poke([fact.owner])
    for dependent, dep in registry.dependents(kind, gone=new is None):
        state.wakeups.poke([
            key for key in world.intents_of_kind(dependent)
            if (not dep.same_namespace or key[1] == owner_ns)
            and (not dep.gone_only or fact.cluster in reconciler.removal_waits.get(key, ()))])
    helper = registry.HELPERS.get(kind)
    if helper is not None and helper.needed_on is not None and new is not None:
        # Is it needed there (or left over from before a restart)? Judged for a whole burst
        # of events at once: the answer reads every intent's selection, and a fan-out to
        # thousands of clusters sends an event per work, twice.
        pending = state.helper_checks.setdefault(kind, set())
        if not pending:
            task = asyncio.get_running_loop().create_task(_check_helper(state, helper))
            state.background.add(task)
            task.add_done_callback(state.background.discard)
        pending.add(fact.cluster)


HELPER_CHECK_DELAY = 1.0
"""Seconds the work events of a helper kind gather before they are judged together."""


async def _check_helper(state: ManagerState, helper: HelperSpec) -> None:
    """Collect the helper's unused works when a cluster its events came from does not need it."""
    await asyncio.sleep(HELPER_CHECK_DELAY)
    clusters = state.helper_checks.pop(helper.kind, set())
    world, reconciler = _reconciled_world(state), state.reconciler
    if world is None or reconciler is None or helper.needed_on is None:
        return
    if clusters - helper.needed_on(world, clusters):
        await _collect(reconciler, helper)


async def _collect(reconciler: Reconciler, helper: HelperSpec) -> None:
    try:
        await reconciler.collect(helper)
    except Exception as err:  # the next such work's event (or a reconcile) tries again
        log.warning("deleting unused %s works failed: %s", helper.kind, err)


def secret_changed(state: ManagerState, namespace: str, name: str | None) -> None:
    """Wake the intents that read a Secret that changed.

    ``name`` None: the manager's access to the namespace's Secrets changed (all of them there).
    Called on the event loop by :class:`~addon_manager.shell.secrets.SecretWatches` (main() binds
    ``state``).
    """
    world = _reconciled_world(state)
    if world is None:
        return
    if name is not None:
        state.wakeups.poke(world.intents_reading_secret(namespace, name))
    else:
        state.wakeups.poke(world.intents_of(registry.where(lambda s: s.seals), namespace))


# Intents -----------------------------------------------------------------------------------------


def _register_intent(spec: KindSpec, registry: kopf.OperatorRegistry) -> None:
    kind, plural = spec.kind, spec.plural

    @kopf.on.event(c.GROUP, c.VERSION, plural, id=f"{plural}_event", registry=registry)
    async def changed(body: kopf.Body, namespace: str | None, name: str, memo: kopf.Memo,
                      **kwargs: Any) -> None:
        state, world = _ready(memo, kwargs)
        key = (kind, str(namespace), name)
        state.wakeups.poke([key])
        state.wakeups.seen(key, firstpass.generation(body))
        if spec.owns_stack:  # claims changed: other stack owners may win/lose clusters
            state.wakeups.poke(world.intents_of_kind(kind))

    @kopf.daemon(c.GROUP, c.VERSION, plural, id=f"{plural}_daemon", cancellation_timeout=10,
                 cancellation_backoff=STOP_BACKOFF, registry=registry)
    async def run(
        body: kopf.Body, namespace: str | None, name: str, stopped: kopf.DaemonStopped,
        logger: logging.Logger | logging.LoggerAdapter[Any], memo: kopf.Memo, **kwargs: Any,
    ) -> None:
        state = state_of(memo)
        settings = state.settings
        key = (kind, str(namespace), name)
        wake = state.wakeups.get(key)
        reconciler = _reconciler(state, kwargs)
        world = _world(state, kwargs)
        shards = state.sharding
        if shards is not None and shards.held(key) is None:
            state.first_pass.skip(key, world.changed_intents)  # another replica's to plan
        await state.first_pass.turn(key, world.changed_intents, firstpass.changed(body))
        await state.works_ready_for(key)  # never plan from an empty store
        waited = False
        while not stopped:
            wake.clear()
            held = None
            if shards is not None:
                held = shards.held(key)
                metrics.intent_shard(kind, str(namespace), name, shards.shard(key),
                                     shards.replica, held is not None)
                if held is None:  # another replica writes it: wait until this one may
                    await shards.until_held(key, settings.resync, stopped)
                    waited = True
                    continue
                if waited:  # just gained: the shards' changed intents plan first
                    waited = False
                    await shards.first_turn(key, world.changed_intents,
                                            firstpass.changed(body))
                    if (held := shards.held(key)) is None:
                        continue
            started = time.monotonic()
            state.wakeups.reconciling(key, firstpass.generation(body))
            if (spec.seals and settings.secrets is not None
                    and storage_connection.secrets_named(body.get("spec") or {})):
                await settings.secrets.settled(str(namespace))  # its namespace's watch
            try:
                outcome = await reconciler.reconcile(
                    kind, body, shard=held,
                    holds=shards.holds(held) if shards is not None and held else None)
            except Exception:
                logger.exception("reconcile of %s %s/%s failed", kind, str(namespace), name)
                await asyncio.sleep(5)
                continue
            finally:
                state.reconciled(key)
            if outcome.phase_after and outcome.phase_after != outcome.phase_before:
                kopf.event(
                    body, type="Warning" if outcome.phase_after == "Degraded" else "Normal",
                    reason=outcome.phase_after,
                    message=f"phase {outcome.phase_before or 'unset'} -> {outcome.phase_after}",
                )
            for etype, reason, message in outcome.events:
                kopf.event(body, type=etype, reason=reason, message=message)
            if outcome.conflicts and outcome.status_written:
                kopf.event(body, type="Warning", reason="Conflict",
                           message="another ModelServing serves " + ", ".join(outcome.conflicts))
            await state.wakeups.pause(
                key, outcome.pause(started, settings.min_interval, time.monotonic()))
            # A work waiting for its work agent turns stale by the clock alone, and the grace of
            # a cluster that left while unavailable ends by the clock: look again then.
            timeout = outcome.wait(settings.resync)
            if timeout > 0:
                await until_woken(wake, stopped, timeout)

    @kopf.on.delete(c.GROUP, c.VERSION, plural, id=f"{plural}_cleanup", registry=registry)
    async def delete(
        body: kopf.Body, namespace: str | None, name: str, runtime: datetime.timedelta,
        memo: kopf.Memo, **kwargs: Any,
    ) -> None:
        state = state_of(memo)
        settings = state.settings
        reconciler = _reconciler(state, kwargs)
        key = (kind, str(namespace), name)
        state.reconciled(key)  # its removal is its reconcile: a first pass waits no more for it
        await state.works_synced()
        shards = state.sharding
        held = shards.held(key) if shards is not None else None
        if shards is not None and held is None:
            # Its holder cleans up and removes the finalizer. Waited for here, quietly: a
            # retry is a patch of the intent's progress annotations, and its event reaches
            # every replica.
            await shards.until_held(key, 2.0 * shards.keeper.settings.lease_duration)
            held = shards.held(key)
            if held is None:
                raise kopf.TemporaryError(
                    f"shard {shards.shard(key)} is held by another manager replica",
                    delay=shards.keeper.settings.retry_period)
        overdue = runtime.total_seconds() >= settings.deletion_blocked_after
        if spec.owns_stack:
            # The status is kept current while the stacks go; a stack that add-on intents
            # still use is not removed (DeletionBlocked names them) until they are gone.
            outcome = await reconciler.reconcile(
                kind, body, overdue=overdue, shard=held,
                holds=shards.holds(held) if shards is not None and held else None)
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
            if spec.owns_stack:  # deletes were sent; just look
                remaining = sorted(reconciler.world.works_of(kind, str(namespace), name))
            else:
                remaining = await reconciler.cleanup(kind, str(namespace), name)
        if remaining and spec.owns_stack:
            raise kopf.TemporaryError(  # the next run writes WorksRemain once overdue
                f"waiting for ManifestWorks to go on {len(remaining)} cluster(s)", delay=2
            )
        if remaining:
            if overdue:
                await reconciler.write_deletion_blocked(kind, str(namespace), name, body, remaining)
            raise kopf.TemporaryError(
                f"waiting for ManifestWorks to go on {len(remaining)} cluster(s)", delay=2
            )
        metrics.forget_intent(kind, str(namespace), name)
        if shards is not None:
            metrics.intent_shard(kind, str(namespace), name, shards.shard(key), shards.replica,
                                 False)
        reconciler.stale.forget((kind, str(namespace), name))
        state.wakeups.forget((kind, str(namespace), name))
        reconciler.removal_waits.pop((kind, str(namespace), name), None)
        if spec.owns_stack:
            state.wakeups.poke(_world(state, kwargs).intents_of_kind(kind))

    del changed, run, delete



def register(registry: kopf.OperatorRegistry, kinds: Iterable[KindSpec]) -> None:
    """Register every handler of the manager in ``registry`` (main() runs kopf with it).

    The startup, cleanup and login handlers, the indexes over Placements, their decisions and
    the intents' revisions, the wake-ups on Placement changes, and per hub kind of ``kinds``
    its index, event handler, daemon and deletion handler.
    """
    kopf.on.startup(registry=registry)(configure)
    kopf.on.cleanup(registry=registry)(close_connections)
    kopf.on.login(registry=registry)(login)
    kopf.index(CLUSTER_GROUP, "v1beta1", "placementdecisions", registry=registry)(
        placement_decisions)
    kopf.index("apps", "v1", "controllerrevisions", registry=registry,
               labels={c.LABEL_MANAGED_BY: c.FIELD_MANAGER, c.LABEL_INTENT_KIND: kopf.PRESENT},
               )(intent_revisions)
    kopf.index(CLUSTER_GROUP, "v1beta1", "placements", registry=registry)(placements)
    kopf.on.event(CLUSTER_GROUP, "v1beta1", "placementdecisions", registry=registry)(
        decision_changed)
    kopf.on.event(CLUSTER_GROUP, "v1beta1", "placements", registry=registry)(placement_changed)
    for spec in kinds:
        kopf.index(c.GROUP, c.VERSION, spec.plural, id=f"{spec.plural}_index",
                   registry=registry)(_intent_index(spec))
        _register_intent(spec, registry)
