"""The ManifestWork informer (addon_manager.shell.informers) against the testbed hub's API server,
as the chart's manager ServiceAccount: labelled and unlabelled works created, changed and
deleted, a relist forced by a too-old resourceVersion, and what a foreign work of the same
name does to the manager's non-forced apply (the 409 the reconcile reports as ForeignWork)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client, config

from addon_api import constants as c
from addon_manager.facts.records import WorkFact
from addon_manager.shell import informers
from addon_manager.shell.apply import HubWriter, WriteError
from testbed.fleet import Testbed
from testbed.support.manager import manager_identity

WORK = ("work.open-cluster-management.io", "v1", "manifestworks")
ISVC = c.KIND_INFERENCE_SERVICE


def body(ns: str, name: str, *, ours: bool = True, value: str = "a",
         intent: str = "iris") -> dict[str, Any]:
    labels = {"test": "informers"}
    if ours:
        labels.update({
            c.LABEL_MANAGED_BY: c.FIELD_MANAGER, c.LABEL_INTENT_KIND: ISVC,
            c.LABEL_INTENT_NAMESPACE: "team", c.LABEL_INTENT_NAME: intent,
        })
    return {
        "apiVersion": "work.open-cluster-management.io/v1",
        "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": ns, "labels": labels,
                     "annotations": {c.ANNOTATION_RENDER_HASH: value}},
        "spec": {"workload": {"manifests": [{
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"}, "data": {"v": value},
        }]}},
    }


def status(available: str) -> dict[str, Any]:
    now = "2026-12-01T00:00:00Z"
    return {"status": {"conditions": [
        {"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete",
         "message": "applied", "lastTransitionTime": now},
        {"type": "Available", "status": available, "reason": "ResourcesAvailable",
         "message": "available", "lastTransitionTime": now},
    ]}}


class Hub:
    """Admin writes to the hub, run in a thread so the informer's loop keeps going."""

    def __init__(self, api: client.ApiClient) -> None:
        self.custom = client.CustomObjectsApi(api)

    async def create(self, work: dict[str, Any]) -> None:
        meta = work["metadata"]
        await asyncio.to_thread(self.custom.create_namespaced_custom_object, *WORK[:2],
                                meta["namespace"], WORK[2], work)

    async def report(self, ns: str, name: str, available: str) -> None:
        await asyncio.to_thread(self.custom.patch_namespaced_custom_object_status, *WORK[:2],
                                ns, WORK[2], name, status(available))

    async def patch(self, ns: str, name: str, patch: dict[str, Any]) -> None:
        await asyncio.to_thread(self.custom.patch_namespaced_custom_object, *WORK[:2], ns,
                                WORK[2], name, patch)

    async def delete(self, ns: str, name: str) -> None:
        await asyncio.to_thread(self.custom.delete_namespaced_custom_object, *WORK[:2], ns,
                                WORK[2], name)


async def until(pred: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not pred():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not after {timeout}s: {what}")
        await asyncio.sleep(0.05)


def manager_config(testbed: Testbed) -> client.Configuration:
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(manager_identity(testbed)),  # type: ignore[no-untyped-call]
                            client_configuration=cfg)
    return cfg


@pytest.fixture
def namespaces(testbed: Testbed) -> Any:
    names = [f"ww-{uuid.uuid4().hex[:6]}-{i}" for i in (1, 2)]
    testbed.hub.apply_objects(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in names])
    yield names
    for n in names:
        testbed.hub.kubectl("delete", "namespace", n, "--wait=false", check=False)


def test_informer_follows_the_addons_works_as_the_manager(
    testbed: Testbed, namespaces: list[str]
) -> None:
    ns1, ns2 = namespaces
    hub = Hub(testbed.hub.api_client())
    cfg = manager_config(testbed)
    changes: list[tuple[str | None, str | None]] = []

    def on_change(old: WorkFact | None, new: WorkFact | None) -> None:
        # Only the test's namespaces: other tests may write works elsewhere on this hub.
        if (old or new) and (old or new).cluster in namespaces:  # type: ignore[union-attr]
            changes.append((f"{old.cluster}/{old.name}:{old.available}" if old else None,
                            f"{new.cluster}/{new.name}:{new.available}" if new else None))

    async def main() -> None:
        await hub.create(body(ns1, "ours-1"))
        await hub.create(body(ns1, "foreign-1", ours=False))
        informer = informers.informer_for(cfg, on_change, page_size=1)
        task = await informers.run_until_synced(informer, 30)
        store = informer.store
        try:
            # The first list (one work per page): ours only.
            assert changes == [(None, f"{ns1}/ours-1:Unknown")]
            assert informer.stats.lists == 1
            assert set(store.works_of(ISVC, "team", "iris")) == {ns1}

            # Created, reported, changed, unlabelled, deleted: one callback each; unlabelled
            # works never show.
            await hub.create(body(ns2, "ours-2"))
            await hub.create(body(ns2, "foreign-2", ours=False))
            await hub.report(ns1, "ours-1", "True")
            await hub.report(ns2, "foreign-2", "True")
            await hub.patch(ns2, "foreign-2", {"metadata": {"annotations": {"x": "y"}}})
            await until(lambda: len(changes) == 3, f"3 changes, got {changes}")
            assert changes[1:] == [(None, f"{ns2}/ours-2:Unknown"),
                                   (f"{ns1}/ours-1:Unknown", f"{ns1}/ours-1:True")]
            assert set(store.works_of(ISVC, "team", "iris")) == {ns1, ns2}
            assert [w.name for w in store.works_on(ns1, ISVC)] == ["ours-1"]
            assert store.get(ns2, "foreign-2") is None and store.get(ns1, "foreign-1") is None

            await hub.patch(ns2, "ours-2", {"metadata": {"labels": {c.LABEL_MANAGED_BY: None}}})
            await until(lambda: len(changes) == 4, f"4 changes, got {changes}")
            assert changes[3] == (f"{ns2}/ours-2:Unknown", None)  # left the selector
            await hub.patch(ns2, "ours-2",
                            {"metadata": {"labels": {c.LABEL_MANAGED_BY: c.FIELD_MANAGER}}})
            await hub.delete(ns2, "ours-2")
            await until(lambda: len(changes) == 6, f"6 changes, got {changes}")
            assert changes[4:] == [(None, f"{ns2}/ours-2:Unknown"),
                                   (f"{ns2}/ours-2:Unknown", None)]
            assert set(store.works_of(ISVC, "team", "iris")) == {ns1}

            # Stopped: what happens meanwhile arrives as events when the watch resumes from
            # where it stopped (no relist).
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await hub.create(body(ns2, "ours-3"))
            await hub.report(ns1, "ours-1", "False")
            task = asyncio.create_task(informer.run())
            await until(lambda: len(changes) == 8, f"8 changes, got {changes}")
            assert sorted(changes[6:], key=repr) == sorted(
                [(None, f"{ns2}/ours-3:Unknown"), (f"{ns1}/ours-1:True", f"{ns1}/ours-1:False")],
                key=repr)
            assert informer.stats.lists == 1

            # Stopped again, and resumed from a resourceVersion the server no longer has: 410,
            # a relist, and every difference reported (changed, vanished, new).
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await hub.report(ns1, "ours-1", "True")
            await hub.delete(ns2, "ours-3")
            await hub.create(body(ns2, "ours-4"))
            await hub.create(body(ns2, "foreign-4", ours=False))
            informer.resource_version = "1"
            task = asyncio.create_task(informer.run())
            await until(lambda: informer.stats.lists == 2, "a relist")
            await until(lambda: len(changes) == 11, f"11 changes, got {changes}")
            assert informer.stats.gone == 1
            assert sorted(changes[8:], key=repr) == sorted([
                (f"{ns1}/ours-1:False", f"{ns1}/ours-1:True"),
                (f"{ns2}/ours-3:Unknown", None),
                (None, f"{ns2}/ours-4:Unknown"),
            ], key=repr)
            mine = {(w.cluster, w.name) for w in store if w.cluster in namespaces}
            assert mine == {(ns1, "ours-1"), (ns2, "ours-4")}
            # And the watch goes on after the relist.
            await hub.delete(ns1, "ours-1")
            await until(lambda: len(changes) == 12, f"12 changes, got {changes}")
            assert changes[11] == (f"{ns1}/ours-1:True", None)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await informer.source.close()  # type: ignore[attr-defined]

    asyncio.run(main())


def test_a_foreign_work_of_the_same_name_refuses_the_managers_apply(
    testbed: Testbed, namespaces: list[str]
) -> None:
    """A work of that name that is not the add-on's is invisible to the informer; the
    manager's first apply of a work it does not know (``force=False``) gets 409, which the
    reconcile reports as ForeignWork. ``spec.workload.manifests`` is an atomic list in OCM's
    schema, so different manifests conflict as a whole."""
    ns = namespaces[0]
    hub = Hub(testbed.hub.api_client())
    api = client.ApiClient(manager_config(testbed))
    writer = HubWriter(manager_config(testbed), concurrency=1, attempts=1)

    async def main() -> None:
        foreign = body(ns, "w", ours=False, value="theirs")
        del foreign["metadata"]["annotations"]
        await hub.create(foreign)
        with pytest.raises(WriteError) as refused:
            await writer.apply_work(body(ns, "w", value="ours"), force=False)
        assert refused.value.status == 409
        assert "conflict with" in str(refused.value)
        assert ".spec.workload.manifests" in str(refused.value)  # the list as a whole
        got = await asyncio.to_thread(
            client.CustomObjectsApi(api).get_namespaced_custom_object, *WORK[:2], ns,
            WORK[2], "w")
        assert c.LABEL_MANAGED_BY not in got["metadata"]["labels"]  # left as it was

        # A foreign work whose manifests equal ours is no conflict: the apply shares the
        # fields and adds the add-on's labels, so the work turns into one of ours. The
        # store's foreign-work check (IndexWorld.foreign_work) refused it before any write;
        # without it, only a foreign value of a field the manager sets (a label, the
        # manifests) stops the apply.
        twin = body(ns, "twin", ours=False, value="ours")
        del twin["metadata"]["annotations"]
        await hub.create(twin)
        await writer.apply_work(body(ns, "twin", value="ours"), force=False)
        got = await asyncio.to_thread(
            client.CustomObjectsApi(api).get_namespaced_custom_object, *WORK[:2], ns,
            WORK[2], "twin")
        assert got["metadata"]["labels"][c.LABEL_MANAGED_BY] == c.FIELD_MANAGER

        # A foreign work that says who manages it (its own managed-by label) conflicts on
        # that label even with equal manifests.
        other = body(ns, "other", ours=False, value="ours")
        other["metadata"]["labels"][c.LABEL_MANAGED_BY] = "someone-else"
        await hub.create(other)
        with pytest.raises(WriteError) as refused:
            await writer.apply_work(body(ns, "other", value="ours"), force=False)
        assert refused.value.status == 409
        assert "app.kubernetes.io/managed-by" in str(refused.value)

    async def run() -> None:
        try:
            await main()
        finally:
            await writer.close()

    asyncio.run(run())
