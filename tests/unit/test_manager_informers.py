"""The ManifestWork informer outside kopf: the store, the relist diff, the list/watch loop
(on a fake source) and the HTTP source (on a local aiohttp server)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from prometheus_client import REGISTRY

from addon_api import constants as c
from addon_manager.facts.records import WorkFact
from addon_manager.kinds import registry
from addon_manager.kinds.registry import parse as parse_work
from addon_manager.shell import informers
from addon_manager.shell.informers import Backoff, Gone, Page, WorkInformer, WorkStore, diff

MS, ISVC = c.KIND_MODEL_SERVING, c.KIND_INFERENCE_SERVICE


def work(cluster: str, name: str, kind: str = ISVC, intent: str = "iris", *, ns: str = "team",
         rv: int = 1, available: str = "True", ours: bool = True, **extra: Any) -> dict[str, Any]:
    labels = {c.LABEL_INTENT_KIND: kind, c.LABEL_INTENT_NAMESPACE: ns, c.LABEL_INTENT_NAME: intent}
    if ours:
        labels[c.LABEL_MANAGED_BY] = c.FIELD_MANAGER
    return {
        "apiVersion": "work.open-cluster-management.io/v1",
        "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": cluster, "labels": labels,
                     "resourceVersion": str(rv), "generation": 1,
                     "annotations": {c.ANNOTATION_RENDER_HASH: "h1"}, **extra},
        "spec": {"workload": {"manifests": [{"kind": "ConfigMap", "data": {"x": "y" * 10}}]}},
        "status": {"conditions": [
            {"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete",
             "observedGeneration": 1},
            {"type": "Available", "status": available, "reason": "ResourcesAvailable",
             "observedGeneration": 1},
        ]},
    }


def fact(*args: Any, **kwargs: Any) -> WorkFact:
    parsed = parse_work(work(*args, **kwargs))
    assert parsed is not None
    return parsed


# The store -----------------------------------------------------------------------------------


def test_store_answers_the_worlds_queries() -> None:
    store = WorkStore()
    for cl in ("c1", "c2", "c3"):
        store.put(fact(cl, "isvc-iris"))
        store.put(fact(cl, "msv-stack", MS, "stack"))
    store.put(fact("c1", "isvc-other", intent="other"))
    assert len(store) == 7
    assert set(store.works_of(ISVC, "team", "iris")) == {"c1", "c2", "c3"}
    assert store.works_of(ISVC, "team", "iris")["c2"].name == "isvc-iris"
    assert store.works_of(ISVC, "team", "nope") == {}
    assert sorted(w.name for w in store.works_on("c1", ISVC)) == ["isvc-iris", "isvc-other"]
    assert [w.name for w in store.works_on("c1", MS)] == ["msv-stack"]
    assert store.works_on("c9", MS) == []
    assert store.owners(ISVC) == {(ISVC, "team", "iris"), (ISVC, "team", "other")}
    assert sorted((w.cluster, w.name) for w in store.facts_of_kind(MS)) == [
        ("c1", "msv-stack"), ("c2", "msv-stack"), ("c3", "msv-stack")]
    assert store.get("c2", "msv-stack") == fact("c2", "msv-stack", MS, "stack")
    assert store.get("c2", "nope") is None


def test_store_put_reports_changes_only_and_remove_cleans_every_index() -> None:
    store = WorkStore()
    first = fact("c1", "w")
    assert store.put(first) == (None, first)
    assert store.put(fact("c1", "w")) is None  # equal fact: no change
    second = fact("c1", "w", available="False")
    assert store.put(second) == (first, second)
    assert store.works_of(ISVC, "team", "iris") == {"c1": second}
    assert store.remove("c1", "w") == (second, None)
    assert store.remove("c1", "w") is None
    assert len(store) == 0
    assert store.owners(ISVC) == frozenset()
    assert list(store.facts_of_kind(ISVC)) == []
    assert store._by_cluster == {} and store._by_owner == {} and store._owners == {}


def test_store_moving_a_work_to_another_owner_reindexes_it() -> None:
    store = WorkStore()
    store.put(fact("c1", "w", intent="a"))
    store.put(fact("c1", "w", intent="b"))
    assert store.works_of(ISVC, "team", "a") == {}
    assert set(store.works_of(ISVC, "team", "b")) == {"c1"}
    assert store.owners(ISVC) == {(ISVC, "team", "b")}
    assert len(store) == 1


def test_store_interns_repeated_strings() -> None:
    store = WorkStore()
    store.put(fact("c1", "w"))
    store.put(fact("c2", "w"))
    a, b = store.get("c1", "w"), store.get("c2", "w")
    assert a is not None and b is not None
    assert a.name is b.name and a.kind is b.kind and a.reason is b.reason


def test_diff_reports_appeared_changed_and_gone_works_only() -> None:
    same, old_changed = fact("c1", "same"), fact("c1", "changed")
    gone = fact("c2", "gone")
    new_changed, appeared = fact("c1", "changed", available="False"), fact("c3", "new")
    current = {("c1", "same"): same, ("c1", "changed"): old_changed, ("c2", "gone"): gone}
    listed = {("c1", "same"): fact("c1", "same"), ("c1", "changed"): new_changed,
              ("c3", "new"): appeared}
    assert sorted(diff(current, listed), key=repr) == sorted(
        [(old_changed, new_changed), (None, appeared), (gone, None)], key=repr)
    assert diff(current, current) == []


def test_replace_all_makes_the_store_match_the_list() -> None:
    store = WorkStore()
    for name in ("a", "b", "c"):
        store.put(fact("c1", name))
    listed = informers.facts_by_key([fact("c1", "a"), fact("c1", "b", available="False"),
                                     fact("c2", "d")])
    changes = store.replace_all(listed)
    assert {(o.name if o else None, n.name if n else None) for o, n in changes} == {
        ("b", "b"), (None, "d"), ("c", None)}
    assert store.snapshot() == listed


def test_a_relist_holds_the_facts_kept_returned_without_interning_them_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = WorkStore()
    store.put(fact("c1", "a"))
    listed = {(f.cluster, f.name): store.kept(f)
              for f in (fact("c1", "a"), fact("c1", "b", available="False"))}
    calls: list[str] = []
    monkeypatch.setattr(informers, "lean", lambda f: calls.append(f.name) or f)
    store.replace_all(listed)
    assert calls == []
    assert store.get("c1", "b") is listed[("c1", "b")]
    store.put(fact("c1", "c"))  # a watch event is interned as it is stored
    assert calls == ["c"]


def test_the_store_never_takes_an_older_view_of_a_work() -> None:
    store = WorkStore()
    newer = fact("c1", "w", rv=50, available="False")
    assert store.put(newer) == (None, newer)
    assert store.put(fact("c1", "w", rv=40)) is None  # e.g. a list that began earlier
    assert store.get("c1", "w") == newer
    assert store.put(fact("c1", "w", rv=60)) is not None
    unknown = fact("c1", "w", available="False")
    object.__setattr__(unknown, "resource_version", 0)
    assert store.put(unknown) is not None  # no version to compare: taken


def test_replace_all_keeps_what_the_store_saw_after_the_lists_version() -> None:
    store = WorkStore()
    store.put(fact("c1", "prefetched", rv=150, available="False"))
    store.put(fact("c1", "created-after-the-list", rv=160))
    store.put(fact("c1", "deleted-before-the-list", rv=90))
    listed = informers.facts_by_key([fact("c1", "prefetched", rv=80), fact("c2", "new", rv=70)])
    changes = store.replace_all(listed, 100)
    assert {(o.name if o else None, n.name if n else None) for o, n in changes} == {
        (None, "new"), ("deleted-before-the-list", None)}
    kept = store.get("c1", "prefetched")
    assert kept is not None and kept.available == "False" and kept.resource_version == 150
    assert store.get("c1", "created-after-the-list") is not None
    assert store.get("c1", "deleted-before-the-list") is None


def test_what_a_plan_reads_is_its_own_works_and_the_kinds_it_depends_on() -> None:
    assert registry.works_read(ISVC) == {MS, c.KIND_STORAGE_CONNECTION, c.KIND_SERVING_RUNTIME,
                                         registry.ACCESS}
    assert registry.IDENTITY in registry.works_read(c.KIND_STORAGE_CONNECTION)
    assert informers.prefetch_selectors((ISVC, "team", "iris"), registry.works_read(ISVC)) == [
        f"{informers.SELECTOR},{c.LABEL_INTENT_KIND}={ISVC},{c.LABEL_INTENT_NAMESPACE}=team,"
        f"{c.LABEL_INTENT_NAME}=iris",
        f"{informers.SELECTOR},{c.LABEL_INTENT_KIND} in "
        f"({','.join(sorted(registry.works_read(ISVC)))})",
    ]
    # A stack's plan reads every work that holds a stack, its own kind included: no gain.
    assert MS in registry.works_read(MS) and ISVC in registry.works_read(MS)
    assert informers.prefetch_selectors((MS, "team", "stack"), registry.works_read(MS)) == []


# The informer on a fake source -------------------------------------------------------------


Script = list[dict[str, Any] | BaseException | Callable[[], dict[str, Any]]]


class FakeSource:
    """A hub in memory: works for lists, and one scripted stream per watch request."""

    def __init__(self) -> None:
        self.works: dict[tuple[str, str], dict[str, Any]] = {}
        self.version = 100
        self.scripts: list[Script] = []
        self.list_calls: list[tuple[str, int]] = []
        self.watch_calls: list[str] = []
        self.idle = asyncio.Event()

        self.full_list_snapshot: dict[tuple[str, str], dict[str, Any]] | None = None
        """What a held full list serves (taken at its first page)."""
        self.hold_full_list: asyncio.Event | None = None
        """Set: the full list waits for this event after its first request."""
        self.selector_calls: list[str] = []

    def add(self, body: dict[str, Any]) -> None:
        self.works[(body["metadata"]["namespace"], body["metadata"]["name"])] = body

    async def list_page(self, cont: str, limit: int, selector: str | None = None) -> Page:
        works = self.works
        if selector is not None:
            self.selector_calls.append(selector)
            works = {k: w for k, w in works.items()
                     if selects(selector, w["metadata"].get("labels") or {})}
        else:
            self.list_calls.append((cont, limit))
            if self.hold_full_list is not None:
                if self.full_list_snapshot is None:
                    self.full_list_snapshot = dict(self.works)
                await self.hold_full_list.wait()
                works = self.full_list_snapshot
        keys = sorted(works)
        start = int(cont or 0)
        end = start + limit
        return Page([works[k] for k in keys[start:end]], str(self.version),
                    str(end) if end < len(keys) else "")

    async def watch(self, resource_version: str, timeout: int) -> AsyncIterator[dict[str, Any]]:
        self.watch_calls.append(resource_version)
        if not self.scripts:
            self.idle.set()
            await asyncio.Event().wait()
        for item in self.scripts.pop(0):
            if callable(item):
                item = item()
            if isinstance(item, BaseException):
                raise item
            yield item


def selects(selector: str, labels: dict[str, str]) -> bool:
    """Whether a label selector of ``k=v`` and ``k in (a,b)`` terms selects ``labels``."""
    for term in re.findall(r"[^,()]+ in \([^)]*\)|[^,]+", selector):
        if " in (" in term:
            key, values = term.split(" in (")
            if labels.get(key) not in values.rstrip(")").split(","):
                return False
        else:
            key, value = term.split("=")
            if labels.get(key) != value:
                return False
    return True


def event(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": body}


def bookmark(rv: int) -> dict[str, Any]:
    return event("BOOKMARK", {"kind": "ManifestWork", "metadata": {"resourceVersion": str(rv)}})


def gone() -> dict[str, Any]:
    return event("ERROR", {"kind": "Status", "status": "Failure", "code": 410,
                           "reason": "Expired", "message": "too old resource version: 1 (200)"})


Changes = list[tuple[str | None, str | None]]


def run_informer(
    source: FakeSource, check: Callable[[WorkInformer, Changes], Awaitable[None]], **kw: Any
) -> None:
    changes: Changes = []

    def on_change(old: WorkFact | None, new: WorkFact | None) -> None:
        assert old is not None or new is not None
        changes.append((f"{old.cluster}/{old.name}:{old.available}" if old else None,
                        f"{new.cluster}/{new.name}:{new.available}" if new else None))

    async def main() -> None:
        informer = WorkInformer(source, on_change, page_size=2,
                                backoff=Backoff(first=0.01, cap=0.02), **kw)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(source.idle.wait(), 5)
            await check(informer, changes)
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())


def test_first_list_is_paged_reports_every_work_and_sets_synced() -> None:
    src = FakeSource()
    for i in range(5):
        src.add(work(f"c{i}", "w"))
    src.add(work("c9", "foreign", ours=False))  # what the label selector would have kept out

    async def check(inf: WorkInformer, changes: Changes) -> None:
        assert inf.synced.is_set()
        assert REGISTRY.get_sample_value("model_serving_manager_informer_synced",
                                         {"resource": "PagedThing"}) == 1
        assert src.list_calls == [("", 2), ("2", 2), ("4", 2)]
        assert sorted(n or "" for _, n in changes) == [f"c{i}/w:True" for i in range(5)]
        assert len(inf.store) == 5
        assert inf.resource_version == "100"
        assert src.watch_calls == ["100"]
        # A list holds, until it ends, the stored fact of every unchanged work (not a second
        # copy of it) and the others interned: its peak memory.
        src.add(work("c9", "w", rv=150))
        listed, _ = await inf._list()
        assert all(listed[(f"c{i}", "w")] is inf.store.get(f"c{i}", "w") for i in range(5))
        assert listed[("c9", "w")].name is listed[("c0", "w")].name

    assert REGISTRY.get_sample_value("model_serving_manager_informer_synced",
                                     {"resource": "PagedThing"}) is None
    run_informer(src, check, what="PagedThing")


def test_watch_events_update_the_store_and_the_resource_version() -> None:
    src = FakeSource()
    src.add(work("c1", "a"))
    src.add(work("c1", "b"))
    unlabelled = work("c1", "b", rv=104)
    del unlabelled["metadata"]["labels"][c.LABEL_INTENT_KIND]
    src.scripts = [[
        event("ADDED", work("c2", "a", rv=101)),
        event("MODIFIED", work("c1", "a", rv=102, available="False")),
        event("MODIFIED", work("c1", "a", rv=103, available="False")),  # same fact
        bookmark(150),
        event("MODIFIED", unlabelled),  # lost its owner labels: not ours any more
        event("DELETED", work("c2", "a", rv=160)),
    ], [bookmark(170)]]

    async def check(inf: WorkInformer, changes: Changes) -> None:
        assert changes[2:] == [(None, "c2/a:True"), ("c1/a:True", "c1/a:False"),
                               ("c1/b:True", None), ("c2/a:True", None)]
        assert {(w.cluster, w.name) for w in inf.store} == {("c1", "a")}
        # The server ended the first watch: the next one starts where it stopped.
        assert src.watch_calls == ["100", "160", "170"]
        assert inf.stats.bookmarks == 2 and inf.stats.events == 5 and inf.stats.lists == 1

    run_informer(src, check)


def test_gone_relists_and_reports_what_changed_or_vanished_meanwhile() -> None:
    src = FakeSource()
    for name in ("keep", "change", "vanish"):
        src.add(work("c1", name))

    def meanwhile() -> dict[str, Any]:
        # Changes while no watch ran, never seen as events: only the relist can tell.
        del src.works[("c1", "vanish")]
        src.add(work("c1", "change", rv=180, available="False"))
        src.add(work("c2", "new", rv=190))
        src.version = 200
        return gone()

    # The second watch answers 410 after the hub changed.
    src.scripts = [[bookmark(120)], [meanwhile]]

    async def check(inf: WorkInformer, changes: Changes) -> None:
        assert sorted(changes[3:], key=repr) == sorted(
            [("c1/change:True", "c1/change:False"), (None, "c2/new:True"),
             ("c1/vanish:True", None)], key=repr)
        assert {(w.cluster, w.name) for w in inf.store} == {
            ("c1", "keep"), ("c1", "change"), ("c2", "new")}
        assert inf.stats.gone == 1 and inf.stats.lists == 2
        assert src.watch_calls == ["100", "120", "200"]

    run_informer(src, check)


def test_http_gone_and_expired_continue_token_relist_too() -> None:
    src = FakeSource()
    src.add(work("c1", "a"))
    src.scripts = [[Gone("too old resource version")]]

    async def check(inf: WorkInformer, changes: Changes) -> None:
        assert inf.stats.gone == 1 and inf.stats.lists == 2
        assert changes == [(None, "c1/a:True")]  # the relist found nothing new

    run_informer(src, check)


def test_errors_back_off_and_resume_from_the_last_version_without_relisting() -> None:
    src = FakeSource()
    src.add(work("c1", "a"))
    src.scripts = [
        [bookmark(130), ConnectionResetError("reset")],
        [informers.ApiError(403, "forbidden")],
        [OSError("refused")],
        [event("MODIFIED", work("c1", "a", rv=140, available="False"))],
    ]

    async def check(inf: WorkInformer, changes: Changes) -> None:
        assert src.watch_calls == ["100", "130", "130", "130", "140"]
        assert inf.stats.errors == 3 and inf.stats.lists == 1
        assert changes[-1] == ("c1/a:True", "c1/a:False")

    run_informer(src, check)


def test_a_failing_callback_does_not_stop_the_informer() -> None:
    src = FakeSource()
    src.add(work("c1", "a"))
    src.scripts = [[event("ADDED", work("c2", "b", rv=101))]]
    seen: list[str] = []

    def on_change(old: WorkFact | None, new: WorkFact | None) -> None:
        seen.append(new.cluster if new else "-")
        raise RuntimeError("boom")

    async def main() -> None:
        inf = WorkInformer(src, on_change)
        task = asyncio.create_task(inf.run())
        await asyncio.wait_for(src.idle.wait(), 5)
        task.cancel()
        assert seen == ["c1", "c2"] and len(inf.store) == 2

    asyncio.run(main())


def test_backoff_grows_to_its_cap_and_resets() -> None:
    b = Backoff(first=1, cap=4)
    delays = [b.next() for _ in range(5)]
    assert 0.5 <= delays[0] <= 1
    assert all(d <= 4 for d in delays) and delays[-1] >= 2
    b.reset()
    assert b.next() <= 1


# The HTTP source on a local server ---------------------------------------------------------


def test_hub_source_pages_watches_long_lines_and_maps_410() -> None:
    big = work("c1", "big")
    big["spec"]["workload"]["manifests"][0]["data"]["x"] = "y" * 300_000  # > aiohttp's readline
    requests: list[dict[str, str]] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        q = dict(request.query)
        requests.append({**q, "auth": request.headers.get("Authorization", "")})
        if q.get("watch"):
            if q["resourceVersion"] == "1":
                return web.json_response({"kind": "Status", "code": 410, "message": "gone"},
                                         status=410)
            resp = web.StreamResponse()
            await resp.prepare(request)
            for ev in (event("ADDED", big), bookmark(7)):
                data = json.dumps(ev).encode() + b"\n"
                await resp.write(data[:1000])  # one event split over chunks
                await resp.write(data[1000:])
            return resp
        if q.get("continue"):
            return web.json_response({"items": [work("c2", "w")],
                                      "metadata": {"resourceVersion": "5"}})
        return web.json_response({"items": [work("c1", "w")],
                                  "metadata": {"resourceVersion": "5", "continue": "tok"}})

    async def main() -> None:
        app = web.Application()
        app.router.add_get(informers.WORKS_PATH, handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = f"http://127.0.0.1:{port}"
        cfg.api_key = {"authorization": "t0k"}
        cfg.api_key_prefix = {"authorization": "Bearer"}
        source = informers.HubSource(cfg)
        try:
            first = await source.list_page("", 1)
            second = await source.list_page(first.cont, 1)
            assert (len(first.items), first.cont, first.resource_version) == (1, "tok", "5")
            assert (len(second.items), second.cont) == (1, "")
            events = [e async for e in source.watch("5", 30)]
            assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
            assert len(events[0]["object"]["spec"]["workload"]["manifests"][0]["data"]["x"]) \
                == 300_000
            with pytest.raises(Gone):
                [e async for e in source.watch("1", 30)]
        finally:
            await source.close()
            await runner.cleanup()
        assert {r["labelSelector"] for r in requests} == {informers.SELECTOR}
        assert {r["auth"] for r in requests} == {"Bearer t0k"}
        assert requests[2]["allowWatchBookmarks"] == "true"
        assert requests[2]["timeoutSeconds"] == "30"
        assert requests[1]["continue"] == "tok" and requests[0]["limit"] == "1"

    asyncio.run(main())


def test_a_work_whose_manifest_failed_is_stored_with_plain_strings() -> None:
    """parse_work names the failure with the manager's reason (an enum member): the store
    keeps its plain value (sys.intern refuses str subclasses; that once ended the informer)."""
    body = work("c1", "a")
    body["status"]["conditions"][0].update(status="False", reason="AppliedManifestWorkFailed")
    body["status"]["resourceStatus"] = {"manifests": [{
        "resourceMeta": {"kind": "ConfigMap", "name": "x", "namespace": "models"},
        "conditions": [{"type": "Applied", "status": "False", "reason": "AppliedManifestFailed",
                        "message": "namespaces \"models\" not found"}]}]}
    parsed = parse_work(body)
    assert parsed is not None and parsed.reason
    store = WorkStore()
    assert store.put(parsed) is not None
    kept = store.get("c1", "a")
    assert kept is not None and type(kept.reason) is str and kept.reason == parsed.reason


def test_an_unexpected_error_is_logged_and_the_informer_lists_again() -> None:
    src = FakeSource()
    src.add(work("c1", "a"))
    src.scripts = [[RuntimeError("a bug")], []]

    async def check(inf: WorkInformer, changes: Changes) -> None:
        assert inf.stats.errors == 1 and inf.stats.lists == 2  # listed again, still running
        assert len(inf.store) == 1

    run_informer(src, check)


def test_prefetch_lists_what_one_intent_reads_while_the_full_list_is_still_running() -> None:
    src = FakeSource()
    for cl in ("c1", "c2"):
        src.add(work(cl, "isvc-iris"))
        src.add(work(cl, "isvc-other", intent="other"))
        src.add(work(cl, "msv-stack", MS, "stack"))
    src.add(work("c3", "foreign", ours=False))
    src.hold_full_list = asyncio.Event()
    seen: Changes = []

    def on_change(old: WorkFact | None, new: WorkFact | None) -> None:
        seen.append((f"{old.cluster}/{old.name}" if old else None,
                     f"{new.cluster}/{new.name}:{new.available}" if new else None))

    async def main() -> None:
        inf = WorkInformer(src, on_change, page_size=2)
        task = asyncio.create_task(inf.run())
        while src.full_list_snapshot is None:  # the full list took its snapshot and waits
            await asyncio.sleep(0)
        # The hub moves on after the full list's snapshot: the prefetch sees the newer work.
        src.add(work("c1", "isvc-iris", rv=120, available="False"))
        selectors = informers.prefetch_selectors((ISVC, "team", "iris"), registry.works_read(ISVC))
        assert await inf.prefetch(selectors) == 4
        assert not inf.synced.is_set()
        assert {(w.cluster, w.name) for w in inf.store} == {
            (cl, n) for cl in ("c1", "c2") for n in ("isvc-iris", "msv-stack")}
        assert sorted(seen) == sorted([(None, "c1/isvc-iris:False"), (None, "c2/isvc-iris:True"),
                                       (None, "c1/msv-stack:True"), (None, "c2/msv-stack:True")])
        seen.clear()
        src.hold_full_list.set()  # type: ignore[union-attr]
        await asyncio.wait_for(inf.synced.wait(), 5)
        # The full list adds what was not prefetched and keeps the newer view of iris on c1.
        assert sorted(seen) == [(None, "c1/isvc-other:True"), (None, "c2/isvc-other:True")]
        kept = inf.store.get("c1", "isvc-iris")
        assert kept is not None and kept.available == "False"
        assert len(inf.store) == 6 and inf.stats.prefetched == 4
        assert await inf.prefetch(selectors) == 0  # synced: nothing more to do
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


async def _until(check: Callable[[], bool]) -> None:
    while not check():
        await asyncio.sleep(0.01)


def test_a_changed_intent_plans_from_a_prefetch_and_the_others_wait_for_the_full_list() -> None:
    from addon_manager.shell.handlers import ManagerState

    changed, unchanged = (ISVC, "team", "iris"), (ISVC, "team", "other")
    src = FakeSource()
    for cl in ("c1", "c2"):
        src.add(work(cl, "isvc-iris"))
        src.add(work(cl, "isvc-other", intent="other"))
        src.add(work(cl, "msv-stack", MS, "stack"))
    src.hold_full_list = asyncio.Event()
    clusters = FakeSource()  # stands for the clusters' informer: synced at once

    async def main() -> None:
        state = ManagerState()
        state.informers = [WorkInformer(src, store=state.works, page_size=2),
                           WorkInformer(clusters, store=WorkStore(), what="ManagedCluster")]
        clusters.hold_full_list = asyncio.Event()  # the clusters are still being listed
        tasks = [asyncio.create_task(i.run()) for i in state.informers]
        await state.first_pass.turn(changed, lambda: [changed])
        ready = asyncio.create_task(state.works_ready_for(changed))
        # its works are prefetched meanwhile, but it plans only once the clusters are in
        await asyncio.wait_for(_until(lambda: len(src.selector_calls) == 2), 5)
        await asyncio.sleep(0.05)
        assert not ready.done()
        clusters.hold_full_list.set()
        await asyncio.wait_for(ready, 5)
        assert set(state.works.works_of(ISVC, "team", "iris")) == {"c1", "c2"}
        assert state.works.works_of(ISVC, "team", "other") == {}
        assert not state.informers[0].synced.is_set()
        # An intent that did not change waits for the full list, which waits until the
        # changed intent's first reconcile (its writes) is done.
        waiting = asyncio.create_task(state.works_ready_for(unchanged))
        src.hold_full_list.set()  # type: ignore[union-attr]
        await asyncio.sleep(0.05)
        assert not waiting.done() and len(src.list_calls) == 1
        state.reconciled(changed)
        await asyncio.wait_for(waiting, 5)
        assert set(state.works.works_of(ISVC, "team", "other")) == {"c1", "c2"}
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())


def test_the_full_list_waits_between_its_pages_while_a_prefetch_runs() -> None:
    src = FakeSource()
    for cl in ("c1", "c2", "c3"):
        src.add(work(cl, "isvc-iris"))
        src.add(work(cl, "msv-stack", MS, "stack"))
    release = asyncio.Event()
    plain = src.list_page

    async def list_page(cont: str, limit: int, selector: str | None = None) -> Page:
        if selector is not None:
            await release.wait()  # a slow prefetch
        return await plain(cont, limit, selector)

    src.list_page = list_page  # type: ignore[method-assign]

    async def main() -> None:
        inf = WorkInformer(src, page_size=2)
        prefetch = asyncio.create_task(inf.prefetch([informers.SELECTOR]))
        await asyncio.sleep(0)
        task = asyncio.create_task(inf.run())
        for _ in range(20):
            await asyncio.sleep(0)
        assert src.list_calls == [] and not inf.synced.is_set()
        release.set()
        assert await prefetch == 6
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert len(src.list_calls) == 3
        await _stopped(task)

    asyncio.run(main())


async def _stopped(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_a_hold_on_the_full_list_ends_by_itself_after_its_limit() -> None:
    src = FakeSource()
    src.add(work("c1", "isvc-iris"))

    async def main() -> None:
        inf = WorkInformer(src, page_size=2)
        inf.hold_limit = 0.05
        inf.hold()  # never released (say the intent went before its first reconcile)
        task = asyncio.create_task(inf.run())
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert len(inf.store) == 1
        await _stopped(task)

    asyncio.run(main())
