"""The add-on's ManifestWorks, watched outside kopf: one paged list, then one watch.

kopf's per-object machinery (diff-base deep copies, one worker per object, the operator-wide
"indexes populated" gate) cost most of the manager's CPU at 1,000-3,000 clusters
(``docs/benchmarks.md``, "What limits us"). ManifestWorks are the one resource with
N clusters x intents objects, so they get a thin informer of their own:

- :class:`HubSource` talks to the hub with aiohttp (:mod:`addon_manager.shell.hubhttp`) under the
  manager's identity (the kubeconfig or in-cluster configuration ``main()`` loads). It lists
  ``manifestworks.work.open-cluster-management.io/v1`` in every namespace in pages
  (``limit``/``continue``) and watches from the list's ``resourceVersion`` with bookmarks,
  both with the server-side label selector :data:`SELECTOR`: works of other add-ons never
  reach the process. It needs ``list`` and ``watch`` on ManifestWorks, nothing more.
- :class:`WorkInformer` keeps a :class:`WorkStore` of :class:`~addon_manager.facts.records.WorkFact`
  current (each event is parsed straight into a fact; no body is kept), calls ``on_change``
  once per change, resumes a broken watch from the last ``resourceVersion`` (with backoff),
  and relists when the server answers 410 Gone. A relist is diffed against the store
  (:func:`diff`), so a work that changed or vanished while nothing was watched still reaches
  ``on_change``: no change is lost, only changes that cancel out are never seen.
- :class:`WorkStore` answers the queries the reconciler's ``World`` asks about works:
  :meth:`WorkStore.works_of`, :meth:`WorkStore.works_on` and :meth:`WorkStore.facts_of_kind`.

A work of another owner with the name the manager wants is invisible here (the selector
filters it out): the non-forced server-side apply of a new work fails with 409 on it, which
the reconcile reports as ``ForeignWork`` (see ``tests/integration/test_informers.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import aiohttp
from kubernetes import client

from addon_api import constants as c
from addon_manager.facts.records import WorkFact
from addon_manager.kinds.registry import parse as parse_work
from addon_manager.shell import metrics
from addon_manager.shell.hubhttp import HubHttp, loads

log = logging.getLogger(__name__)

WORKS_PATH = "/apis/work.open-cluster-management.io/v1/manifestworks"
"""Every ManifestWork of the hub, in all namespaces."""
SELECTOR = f"{c.LABEL_MANAGED_BY}={c.FIELD_MANAGER}"
"""Label selector the API server applies: only the add-on's works are listed and watched."""

PAGE_SIZE = 500
"""Works per list page."""
WATCH_SECONDS = 300
"""Seconds one watch request lasts at most (``timeoutSeconds``, jittered down by up to 20 %);
the informer then watches again from where it was."""
HOLD_LIMIT = 30.0
"""Seconds the first full list waits at most for a prefetch and its intent's first writes."""
READ_SLACK = 60.0
"""Seconds of silence beyond ``timeoutSeconds`` after which a watch counts as dead (an API
server that vanished without closing the connection)."""

Key = tuple[str, str]
"""(cluster namespace, work name): one ManifestWork."""
Owner = tuple[str, str, str]
"""(kind, namespace, name) of the intent that owns a work."""
Change = tuple[WorkFact | None, WorkFact | None]
"""(old, new): None as old for a work that appeared, None as new for one that went."""
OnChange = Callable[[WorkFact | None, WorkFact | None], None]
T = TypeVar("T")


def prefetch_selectors(owner: tuple[str, str, str], kinds_read: Iterable[str]) -> list[str]:
    """Label selectors of an intent's own works and of every work of ``kinds_read``.

    ``kinds_read`` is what its plan reads (:func:`addon_manager.kinds.registry.works_read`). [] when
    that is every work of the intent's kind anyway (no gain over the full list).

    ``owner`` is (kind, namespace, name).
    """
    kind, namespace, name = owner
    others = sorted(set(kinds_read))
    if kind in others:
        return []
    own = (f"{SELECTOR},{c.LABEL_INTENT_KIND}={kind},{c.LABEL_INTENT_NAMESPACE}={namespace},"
           f"{c.LABEL_INTENT_NAME}={name}")
    return [own, f"{SELECTOR},{c.LABEL_INTENT_KIND} in ({','.join(others)})"] if others else [own]


# The store ---------------------------------------------------------------------------------------


def lean(fact: WorkFact) -> WorkFact:
    """``fact`` with its repeated strings interned.

    Thousands of works share their name (one per cluster), owner, kind, condition statuses
    and usually reasons and messages, while JSON decoding makes a new string for every
    occurrence; interned, each distinct string is held once.
    """
    def intern(value: str) -> str:  # an enum member (a str subclass) becomes its value
        return sys.intern(str(value))

    return dataclasses.replace(
        fact,
        name=intern(fact.name),
        cluster=intern(fact.cluster),
        kind=intern(fact.kind),
        intent_namespace=intern(fact.intent_namespace),
        intent_name=intern(fact.intent_name),
        render_hash=intern(fact.render_hash),
        applied=intern(fact.applied),
        available=intern(fact.available),
        reason=intern(fact.reason),
        message=intern(fact.message),
        feedback=tuple(
            (intern(k), intern(v) if isinstance(v, str) else v) for k, v in fact.feedback
        ),
        identity_source=intern(fact.identity_source),
    )


def diff(current: Mapping[Key, T], listed: Mapping[Key, T]) -> list[tuple[T | None, T | None]]:
    """What turns ``current`` into ``listed``: every work that appeared, changed or went.

    A work whose fact is equal in both is no change (whatever else changed in its body).
    """
    changes: list[tuple[T | None, T | None]] = []
    for key, new in listed.items():
        old = current.get(key)
        if old != new:
            changes.append((old, new))
    changes.extend((old, None) for key, old in current.items() if key not in listed)
    return changes


class WorkStore:
    """The add-on's works as :class:`WorkFact`, indexed by cluster and by owner.

    Held once each: per cluster ``name -> fact``, per owner ``(cluster, name) -> fact``, and
    per owner kind the set of owners. Not thread-safe: one event loop reads and writes it.
    """

    def __init__(self) -> None:
        self._by_cluster: dict[str, dict[str, WorkFact]] = {}
        self._by_owner: dict[Owner, dict[Key, WorkFact]] = {}
        self._owners: dict[str, set[Owner]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[WorkFact]:
        for works in self._by_cluster.values():
            yield from works.values()

    def key(self, fact: WorkFact) -> Key:
        """Where a work is kept: (cluster namespace, name)."""
        return fact.cluster, fact.name

    def get(self, cluster: str, name: str) -> WorkFact | None:
        """The work ``cluster/name``, None when the store has no such work."""
        return self._by_cluster.get(cluster, {}).get(name)

    def works_of(self, kind: str, namespace: str, name: str) -> dict[str, WorkFact]:
        """Works owned by an intent, by cluster (a fresh dict the caller may keep)."""
        return {w.cluster: w for w in self._by_owner.get((kind, namespace, name), {}).values()}

    def works_on(self, cluster: str, kind: str) -> list[WorkFact]:
        """Works of one owner kind on one cluster."""
        return [w for w in self._by_cluster.get(cluster, {}).values() if w.kind == kind]

    def owners(self, kind: str) -> frozenset[Owner]:
        """Every intent of ``kind`` that owns at least one work."""
        return frozenset(self._owners.get(kind, ()))

    def facts_of_kind(self, kind: str) -> Iterator[WorkFact]:
        """Every work whose owner is of ``kind``."""
        for owner in list(self._owners.get(kind, ())):
            yield from list(self._by_owner.get(owner, {}).values())

    def kept(self, fact: WorkFact) -> WorkFact:
        """The fact to hold for a listed work: the stored one when equal, else interned.

        A relist of 100,000 works holds every listed fact until the list ends: kept as
        decoded (no string shared with another fact), those copies set the manager's peak
        memory. Interned (:func:`lean`), or the stored object itself, they cost little.
        """
        old = self.get(fact.cluster, fact.name)
        return old if old is not None and old == fact else lean(fact)

    def snapshot(self) -> dict[Key, WorkFact]:
        """Every work by (cluster, name): a copy."""
        return {(w.cluster, w.name): w for w in self}

    def put(self, fact: WorkFact, *, interned: bool = False) -> Change | None:
        """Store ``fact`` (replacing the work's previous one); the change, None if equal.

        The stored fact is interned (:func:`lean`) unless ``interned`` says it already is
        (as :meth:`kept` returns it): at 100,000 works a second pass cost seconds.

        A fact older than the one kept (a smaller resourceVersion: a list that began before a
        :meth:`WorkInformer.prefetch`, or the watch replaying what came before it) is no
        change either: the store never goes back in a work's history.
        """
        old = self.get(fact.cluster, fact.name)
        if old == fact or (old is not None and fact.resource_version
                           and fact.resource_version < old.resource_version):
            return None
        if old is not None:
            self._unindex(old)
        if not interned:
            fact = lean(fact)
        self._by_cluster.setdefault(fact.cluster, {})[fact.name] = fact
        self._by_owner.setdefault(fact.owner, {})[(fact.cluster, fact.name)] = fact
        self._owners.setdefault(fact.kind, set()).add(fact.owner)
        self._count += 1
        return old, fact

    def remove(self, cluster: str, name: str) -> Change | None:
        """Forget the work ``cluster/name``; the change, None if the store did not have it."""
        old = self.get(cluster, name)
        if old is None:
            return None
        self._unindex(old)
        return old, None

    def replace_all(self, listed: Mapping[Key, WorkFact], version: int = 0) -> list[Change]:
        """Make the store hold ``listed`` (a relist at ``version``); the changes, as :func:`diff`.

        The listed facts are held as they are: each is what :meth:`kept` returned.

        What the store learnt after the list's version stays: a fact newer than the listed
        one (see :meth:`put`), and a work the list does not have but the store saw at a later
        version (created after the list's snapshot).
        """
        changes: list[Change] = []
        for old, new in diff(self.snapshot(), listed):
            if new is not None:
                change = self.put(new, interned=True)
            elif old is not None and not (version and old.resource_version > version):
                change = self.remove(old.cluster, old.name)
            else:
                change = None
            if change is not None:
                changes.append(change)
        return changes

    def _unindex(self, fact: WorkFact) -> None:
        works = self._by_cluster[fact.cluster]
        del works[fact.name]
        if not works:
            del self._by_cluster[fact.cluster]
        owned = self._by_owner[fact.owner]
        del owned[(fact.cluster, fact.name)]
        if not owned:
            del self._by_owner[fact.owner]
            owners = self._owners[fact.kind]
            owners.discard(fact.owner)
            if not owners:
                del self._owners[fact.kind]
        self._count -= 1


class KeyedStore(Generic[T]):
    """Facts of another resource by (namespace, name): a store for :class:`WorkInformer`.

    ``key`` says where a fact is kept; a fact equal to the one kept is no change.
    """

    def __init__(self, key: Callable[[T], Key]) -> None:
        self._key = key
        self._items: dict[Key, T] = {}

    def __len__(self) -> int:
        return len(self._items)

    def key(self, item: T) -> Key:
        """Where ``item`` is kept."""
        return self._key(item)

    def get(self, namespace: str, name: str) -> T | None:
        """The fact of ``namespace/name`` ("" namespace: cluster-scoped), None when unknown."""
        return self._items.get((namespace, name))

    def values(self) -> list[T]:
        """Every fact kept."""
        return list(self._items.values())

    def kept(self, item: T) -> T:
        """The fact to hold for a listed object: the stored one when equal, else ``item``."""
        old = self._items.get(self._key(item))
        return old if old is not None and old == item else item

    def put(self, item: T) -> tuple[T | None, T | None] | None:
        """Keep ``item``; the change, None if it equals the one kept."""
        key = self._key(item)
        old = self._items.get(key)
        if old == item:
            return None
        self._items[key] = item
        return old, item

    def remove(self, namespace: str, name: str) -> tuple[T | None, T | None] | None:
        """Forget ``namespace/name``; the change, None if it was not kept."""
        old = self._items.pop((namespace, name), None)
        return None if old is None else (old, None)

    def replace_all(self, listed: Mapping[Key, T], version: int = 0
                    ) -> list[tuple[T | None, T | None]]:
        """Keep exactly ``listed`` (a relist); the changes, as :func:`diff`.

        ``version`` is not used: these stores are never prefetched.
        """
        del version
        changes = diff(self._items, listed)
        self._items = dict(listed)
        return changes


# Talking to the hub ------------------------------------------------------------------------------


class Gone(Exception):
    """410 Gone: the resourceVersion (or continue token) is too old; list again."""


class ApiError(Exception):
    """The API server refused a list or watch (``status`` is the HTTP code)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


@dataclass(frozen=True)
class Page:
    """One page of a list."""

    items: list[dict[str, Any]]
    resource_version: str
    cont: str


class WorkSource(Protocol):
    """Where the informer reads works from (the hub, or a fake in tests)."""

    async def list_page(self, cont: str, limit: int, selector: str | None = None) -> Page:
        """One page of the add-on's works (``cont`` "" for the first).

        ``selector``: a label selector to list by instead of the source's own (a prefetch's).
        """

    def watch(self, resource_version: str, timeout: int) -> AsyncIterator[dict[str, Any]]:
        """Watch events (``type``, ``object``) after ``resource_version``, bookmarks included.

        Ends when the server ends the watch; raises :class:`Gone` on 410 (as HTTP status or
        as an ERROR event) and :class:`ApiError` on any other refusal.
        """


def _status_error(status: int, body: Mapping[str, Any] | str) -> Exception:
    message = str(body.get("message", body)) if isinstance(body, Mapping) else body[:300]
    return Gone(message) if status == 410 else ApiError(status, message)


async def _lines(stream: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """The lines of a watch stream, however long (aiohttp's own readline stops at 128 KiB)."""
    buffer = bytearray()
    async for chunk in stream.iter_any():
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            if end > start:
                yield bytes(buffer[start:end])
            start = end + 1
        del buffer[:start]
    if buffer.strip():
        yield bytes(buffer)


class HubSource:
    """One hub resource over aiohttp, as the identity of a kubernetes client config.

    ``cfg`` is what ``main()`` loads (kubeconfig or in-cluster); the connection is a
    :class:`~addon_manager.shell.hubhttp.HubHttp`.
    """

    def __init__(self, cfg: client.Configuration, selector: str = SELECTOR, *,
                 path: str = WORKS_PATH, field_selector: str = "") -> None:
        self.http = HubHttp(cfg)
        self.selector = selector
        self.field_selector = field_selector
        self.path = path

    def _selectors(self, selector: str | None = None) -> dict[str, str]:
        selector = self.selector if selector is None else selector
        out = {"labelSelector": selector} if selector else {}
        if self.field_selector:
            out["fieldSelector"] = self.field_selector
        return out

    async def close(self) -> None:
        """Close the HTTP session."""
        await self.http.close()

    async def list_page(self, cont: str, limit: int, selector: str | None = None) -> Page:
        """One page of the add-on's works (see :meth:`WorkSource.list_page`)."""
        params = {**self._selectors(selector), "limit": str(limit)}
        if cont:
            params["continue"] = cont
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=15, sock_read=120)
        async with self.http.session().get(
            self.http.base + self.path, params=params, timeout=timeout, **self.http.options(),
        ) as resp:
            if resp.status != 200:
                raise _status_error(resp.status, await resp.text())
            body = loads(await resp.read())
        meta = body.get("metadata") or {}
        return Page(list(body.get("items") or []), str(meta.get("resourceVersion", "")),
                    str(meta.get("continue") or ""))

    async def watch(self, resource_version: str, timeout: int) -> AsyncIterator[dict[str, Any]]:
        """Watch events after ``resource_version`` (see :meth:`WorkSource.watch`)."""
        params = {
            **self._selectors(), "watch": "1", "allowWatchBookmarks": "true",
            "resourceVersion": resource_version, "timeoutSeconds": str(timeout),
        }
        limits = aiohttp.ClientTimeout(total=None, sock_connect=15, sock_read=timeout + READ_SLACK)
        async with self.http.session().get(
            self.http.base + self.path, params=params, timeout=limits, **self.http.options(),
        ) as resp:
            if resp.status != 200:
                raise _status_error(resp.status, await resp.text())
            async for line in _lines(resp.content):
                yield loads(line)


# The informer ------------------------------------------------------------------------------------


@dataclass
class Backoff:
    """Exponential delays with jitter between attempts that fail in a row."""

    first: float = 0.5
    cap: float = 30.0
    _next: float = 0.0

    def next(self) -> float:
        """The delay before the next attempt (and double the one after)."""
        self._next = min(self.cap, self._next * 2) if self._next else self.first
        return self._next * (0.5 + random.random() / 2)

    def reset(self) -> None:
        """An attempt worked: start from ``first`` again."""
        self._next = 0.0


@dataclass
class Stats:
    """What the informer did (for logs, metrics and tests)."""

    lists: int = 0
    """Complete lists (the first and every relist)."""
    gone: int = 0
    """410 Gone answers (each leads to a relist)."""
    watches: int = 0
    """Watch requests made."""
    events: int = 0
    """ADDED, MODIFIED and DELETED events received."""
    bookmarks: int = 0
    errors: int = 0
    """Failed lists or watches (retried with backoff)."""
    changes: int = 0
    """Calls of ``on_change``."""
    prefetched: int = 0
    """Objects listed by :meth:`WorkInformer.prefetch`."""


class WorkInformer:
    """List, then watch the add-on's ManifestWorks into a :class:`WorkStore`.

    ``on_change(old, new)`` is called on the event loop for every work that appears (old
    None), changes (its fact differs) or goes (new None), after the store holds the change;
    the first list reports every work as appeared. ``synced`` is set once the first list is
    stored. Run :meth:`run` as a task; cancel it to stop.
    """

    def __init__(
        self,
        source: WorkSource,
        on_change: Callable[[Any, Any], None] | None = None,
        *,
        store: Any = None,
        page_size: int = PAGE_SIZE,
        watch_seconds: int = WATCH_SECONDS,
        backoff: Backoff | None = None,
        parse: Callable[[Mapping[str, Any]], Any] = parse_work,
        what: str = "ManifestWork",
    ) -> None:
        self.source = source
        self.on_change = on_change
        self.store: Any = store if store is not None else WorkStore()
        """A :class:`WorkStore` (the default), or a :class:`KeyedStore` of what ``parse``
        makes of another resource's objects (None: not kept)."""
        self.parse = parse
        self.what = what
        self.page_size = page_size
        self.watch_seconds = watch_seconds
        self.backoff = backoff or Backoff()
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.stats = Stats()
        self.hold_limit = HOLD_LIMIT
        """Longest the full list waits for holds (:meth:`hold`) before it goes on anyway."""
        self._holds = 0
        self._full_list_may_go = asyncio.Event()
        """Clear while held: the full list waits between its pages."""
        self._full_list_may_go.set()

    async def run(self) -> None:
        """List and watch until cancelled; never returns otherwise.

        Run again after a cancel, it resumes the watch from the last resourceVersion (the
        events missed meanwhile arrive as events; a server that no longer has that version
        answers 410 and the informer relists).
        """
        must_list = not self.resource_version
        while True:
            try:
                if must_list:
                    await self.relist()
                    must_list = False
                    self.backoff.reset()
                if await self.watch_once():
                    self.backoff.reset()
            except Gone as err:
                self.stats.gone += 1
                log.info("%s watch: %s; listing again", self.what, err)
                must_list = True
            except asyncio.CancelledError:
                raise
            except (aiohttp.ClientError, OSError, TimeoutError, ApiError, ValueError) as err:
                self.stats.errors += 1
                delay = self.backoff.next()
                log.warning("%s %s failed (%s: %s); again in %.1fs", self.what,
                            "list" if must_list else "watch", type(err).__name__, err, delay)
                await asyncio.sleep(delay)
            except Exception:  # a bug must not end the informer silently: log, list again
                self.stats.errors += 1
                delay = self.backoff.next()
                log.exception("%s %s failed; listing again in %.1fs", self.what,
                              "list" if must_list else "watch", delay)
                must_list = True
                await asyncio.sleep(delay)

    async def _list(self, selector: str | None = None) -> tuple[dict[Key, Any], str]:
        """Every object (all pages; by ``selector`` when given), parsed; the list's version."""
        listed: dict[Key, Any] = {}
        cont, version = "", ""
        while True:
            if selector is None:
                await self._wait_for_holds()
                page = await self.source.list_page(cont, self.page_size)
            else:
                page = await self.source.list_page(cont, self.page_size, selector)
            version = version or page.resource_version
            for item in page.items:
                fact = self.parse(item)
                if fact is not None:
                    listed[self.store.key(fact)] = self.store.kept(fact)
            if not page.cont:
                break
            cont = page.cont
        return listed, version

    async def prefetch(self, selectors: Iterable[str]) -> int:
        """Before the first list ends, list what ``selectors`` select into the store.

        For a start at thousands of clusters: the works one intent's plan reads are a small
        part of all works, and listing them first lets that intent reconcile seconds before
        the full list is in. Each object is stored and reported as the watch would report
        it. The full list waits between its pages meanwhile (see :meth:`hold`), then keeps
        what is newer (see :meth:`WorkStore.replace_all`).
        Nothing is done once the informer is synced. Returns the objects listed.
        """
        count = 0
        self.hold()
        try:
            for selector in selectors:
                if self.synced.is_set():
                    break
                listed, _ = await self._list(selector)
                count += len(listed)
                self.stats.prefetched += len(listed)
                for fact in listed.values():
                    change = self.store.put(fact, interned=True)
                    if change is not None:
                        self._emit(*change)
        finally:
            self.release()
        return count

    def hold(self) -> None:
        """Make the first full list wait between its pages until :meth:`release`.

        While a changed intent prefetches and then writes, the API server and this process
        serve it alone: on two cores, overlapping them with the full list made both slower
        than one after the other. A hold lasts at most :attr:`hold_limit` seconds.
        """
        self._holds += 1
        self._full_list_may_go.clear()

    def release(self) -> None:
        """End one :meth:`hold`."""
        self._holds = max(0, self._holds - 1)
        if not self._holds:
            self._full_list_may_go.set()

    async def _wait_for_holds(self) -> None:
        if self._full_list_may_go.is_set():
            return
        try:
            await asyncio.wait_for(self._full_list_may_go.wait(), self.hold_limit)
        except TimeoutError:
            log.warning("%s list held for %.0fs; going on", self.what, self.hold_limit)
            self._holds = 0
            self._full_list_may_go.set()

    async def relist(self) -> None:
        """List every object (all pages), make the store match, report the differences."""
        listed, version = await self._list()
        self.stats.lists += 1
        changes = self.store.replace_all(listed, int(version) if version.isdigit() else 0)
        self.resource_version = version
        self.synced.set()
        metrics.INFORMER_SYNCED.labels(self.what).set(1)
        log.info("%s listed: %d at resourceVersion %s, %d changed", self.what,
                 len(listed), version, len(changes))
        for old, new in changes:
            self._emit(old, new)

    async def watch_once(self) -> bool:
        """One watch request from the current resourceVersion; whether it got any event."""
        self.stats.watches += 1
        seconds = max(1, int(self.watch_seconds * (0.8 + random.random() / 5)))
        got = False
        async for event in self.source.watch(self.resource_version, seconds):
            got = True
            self.apply_event(event)
        return got

    def apply_event(self, event: Mapping[str, Any]) -> None:
        """Apply one watch event to the store (raises :class:`Gone`/:class:`ApiError`)."""
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            raise _status_error(int(obj.get("code") or 0), obj)
        meta = obj.get("metadata") or {}
        version = meta.get("resourceVersion")
        if kind == "BOOKMARK":
            self.stats.bookmarks += 1
        elif kind in ("ADDED", "MODIFIED", "DELETED"):
            self.stats.events += 1
            fact = self.parse(obj) if kind != "DELETED" else None
            if fact is not None:
                change = self.store.put(fact)
            else:  # gone, or no longer carries the owner labels
                change = self.store.remove(str(meta.get("namespace", "")),
                                           str(meta.get("name", "")))
            if change is not None:
                self._emit(*change)
        else:
            raise ValueError(f"unknown watch event type {kind!r}")
        if version:
            self.resource_version = str(version)

    def _emit(self, old: Any, new: Any) -> None:
        self.stats.changes += 1
        if self.on_change is None:
            return
        try:
            self.on_change(old, new)
        except Exception:
            fact = new if new is not None else old
            where = "/".join(self.store.key(fact)) if fact is not None else "?"
            log.exception("on_change of %s %s failed", self.what, where)


def informer_for(cfg: client.Configuration, on_change: OnChange | None = None,
                 **kwargs: Any) -> WorkInformer:
    """A :class:`WorkInformer` of the hub that ``cfg`` (the manager's identity) reaches."""
    return WorkInformer(HubSource(cfg), on_change, **kwargs)


async def run_until_synced(informer: WorkInformer, timeout: float) -> asyncio.Task[None]:
    """Start ``informer`` as a task and wait until it is synced; return the task.

    Raises TimeoutError (and cancels the task) when it is not synced after ``timeout`` s.
    """
    task = asyncio.create_task(informer.run(), name="manifestwork-informer")
    try:
        await asyncio.wait_for(informer.synced.wait(), timeout)
    except BaseException:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise
    return task


def facts_by_key(facts: Iterable[WorkFact]) -> dict[Key, WorkFact]:
    """``facts`` keyed by (cluster, name), as :meth:`WorkStore.replace_all` takes them."""
    return {(f.cluster, f.name): f for f in facts}
