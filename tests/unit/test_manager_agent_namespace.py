"""The agent install namespace per cluster: read from the ManagedClusterAddOn, kept in the
index, and a change of it wakes the StorageConnections (whose works depend on it)."""

from __future__ import annotations

from typing import Any

from addon_api import constants as c
from addon_manager.facts.records import AddonFact, agent_namespace, parse_addon
from addon_manager.shell import handlers
from addon_manager.shell.reconcile import Reconciler
from testbed.support.fake_hub import FakeHub
from testbed.support.sealing import memory_sealer


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


def _state() -> handlers.ManagerState:
    """A manager whose world knows one StorageConnection and one ModelServing."""
    indexes: dict[str, Any] = {name: {} for name in handlers.INDEX_NAMES}
    indexes["storageconnections_index"] = {("all",): [("ns", "s3", "", "p", "creds")]}
    indexes["modelservings_index"] = {("all",): [("ns", "kserve", "", "p", "")]}
    state = handlers.ManagerState()
    state.reconciler = Reconciler(handlers.IndexWorld(indexes, state=state), FakeHub(),
                                  memory_sealer())
    return state


def test_the_addon_fact_keeps_the_namespace_and_the_world_reads_it() -> None:
    assert parse_addon(addon(status_ns="custom-ns")) == AddonFact("c1", "custom-ns")
    other = addon(status_ns="x")
    other["metadata"]["name"] = "another-addon"
    assert parse_addon(other) is None
    state = _state()
    state.addons.put(AddonFact("c1", "custom-ns"))
    world = handlers.IndexWorld({n: {} for n in handlers.INDEX_NAMES}, state=state)
    assert world.agent_namespace("c1") == "custom-ns"
    assert world.addon_exists("c1")
    assert world.agent_namespace("c2") == c.AGENT_NAMESPACE and not world.addon_exists("c2")


def test_a_changed_namespace_wakes_the_storage_connections_only_when_it_changes() -> None:
    state = _state()
    sconn = (c.KIND_STORAGE_CONNECTION, "ns", "s3")
    msv = (c.KIND_MODEL_SERVING, "ns", "kserve")

    def event(body: dict[str, Any], type_: str | None = "MODIFIED") -> bool:
        for key in (sconn, msv):
            state.wakeups.get(key).clear()
        fact = parse_addon(body)
        if type_ == "DELETED":
            change = state.addons.remove("c1", c.ADDON_NAME)
        else:
            change = state.addons.put(fact) if fact is not None else None
        if change is not None:  # the informer calls back on a change only
            handlers.addon_changed(state, *change)
        assert not state.wakeups.get(msv).is_set()
        return state.wakeups.get(sconn).is_set()

    assert event(addon(spec_ns=c.AGENT_NAMESPACE), None) is False  # the default: nothing new
    assert event(addon(status_ns="custom-ns")) is True
    assert event(addon(status_ns="custom-ns")) is False  # status churn, same namespace
    other = addon(status_ns="elsewhere")
    other["metadata"]["name"] = "another-addon"
    assert event(other) is False
    assert event(addon(status_ns="custom-ns"), "DELETED") is True  # back to the default
