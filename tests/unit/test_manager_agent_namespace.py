"""The agent install namespace per cluster: read from the ManagedClusterAddOn, kept in the
index, and a change of it wakes the StorageConnections (whose works depend on it)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from addon_api import constants as c
from addon_manager import handlers
from addon_manager.facts import agent_namespace


def addon(status_ns: str | None = None, spec_ns: str | None = None) -> dict[str, Any]:
    """A ManagedClusterAddOn model-serving in cluster namespace c1."""
    body: dict[str, Any] = {
        "metadata": {"name": c.ADDON_NAME, "namespace": "c1"},
        "spec": {} if spec_ns is None else {"installNamespace": spec_ns},
    }
    if status_ns is not None:
        body["status"] = {"namespace": status_ns}
    return body


def test_status_namespace_wins_then_spec_then_the_default() -> None:
    assert agent_namespace(addon(status_ns="custom-ns", spec_ns=c.AGENT_NAMESPACE)) == "custom-ns"
    assert agent_namespace(addon(spec_ns="legacy-ns")) == "legacy-ns"
    assert agent_namespace(addon(status_ns="", spec_ns="legacy-ns")) == "legacy-ns"
    assert agent_namespace(addon()) == c.AGENT_NAMESPACE
    assert agent_namespace(None) == c.AGENT_NAMESPACE  # no ManagedClusterAddOn at all


def _indexes(addons: dict[str, list[str]]) -> dict[str, Any]:
    out: dict[str, Any] = {name: {} for name in handlers.INDEX_NAMES}
    out["addons_index"] = addons
    out["storageconnections_index"] = {("all",): [("ns", "s3", "", "p", "creds")]}
    out["modelservings_index"] = {("all",): [("ns", "kserve", "", "p", "")]}
    return out


def test_index_keeps_the_namespace_and_the_world_reads_it() -> None:
    index = cast(Any, handlers.addons_index)  # kopf's signature wants every kwarg it passes
    entry = asyncio.run(index(body=addon(status_ns="custom-ns"), namespace="c1",
                              name=c.ADDON_NAME))
    assert entry == {"c1": "custom-ns"}
    other = asyncio.run(index(body=addon(status_ns="x"), namespace="c1", name="another-addon"))
    assert other == {}
    world = handlers.IndexWorld(_indexes({"c1": ["custom-ns"]}))
    assert world.agent_namespace("c1") == "custom-ns"
    assert world.addon_exists("c1")
    assert world.agent_namespace("c2") == c.AGENT_NAMESPACE and not world.addon_exists("c2")


def test_a_changed_namespace_wakes_the_storage_connections_only_when_it_changes() -> None:
    state = handlers.ManagerState()
    state.settings.ready = True
    sconn = (c.KIND_STORAGE_CONNECTION, "ns", "s3")
    msv = (c.KIND_MODEL_SERVING, "ns", "kserve")

    def event(body: dict[str, Any], type_: str | None = "MODIFIED") -> bool:
        for key in (sconn, msv):
            state.wakeups.get(key).clear()
        asyncio.run(cast(Any, handlers.addon_changed)(
            type=type_, body=body, namespace="c1", name=str(body["metadata"]["name"]),
            memo=state.memo(), **_indexes({"c1": [agent_namespace(body)]}),
        ))
        assert not state.wakeups.get(msv).is_set()
        return state.wakeups.get(sconn).is_set()

    assert event(addon(spec_ns=c.AGENT_NAMESPACE), None) is False  # the default: nothing new
    assert event(addon(status_ns="custom-ns")) is True
    assert event(addon(status_ns="custom-ns")) is False  # status churn, same namespace
    other = addon(status_ns="elsewhere")
    other["metadata"]["name"] = "another-addon"
    assert event(other) is False
    assert event(addon(status_ns="custom-ns"), "DELETED") is True  # back to the default
