"""The manager's kopf handlers are registered explicitly, in the registry main() runs kopf with."""

from __future__ import annotations

import kopf

from addon_manager.kinds.registry import KINDS
from addon_manager.shell import handlers


def _ids(registry: kopf.OperatorRegistry) -> dict[str, list[str]]:
    return {name: [str(h.id) for h in getattr(registry, name).get_all_handlers()]
            for name in ("_activities", "_indexing", "_watching", "_spawning", "_changing")}


def test_register_puts_every_handler_and_each_kinds_four_in_the_registry() -> None:
    registry = kopf.OperatorRegistry()
    handlers.register(registry, KINDS.values())
    ids = _ids(registry)
    assert ids["_activities"] == ["configure", "close_connections", "login"]
    assert ids["_indexing"] == ["placement_decisions", "intent_revisions", "placements",
                                *(f"{s.plural}_index" for s in KINDS.values())]
    assert sorted(ids["_indexing"]) == sorted(handlers.INDEX_NAMES)
    assert ids["_watching"] == ["decision_changed", "placement_changed",
                                *(f"{s.plural}_event" for s in KINDS.values())]
    assert ids["_spawning"] == [f"{s.plural}_daemon" for s in KINDS.values()]
    assert ids["_changing"] == [f"{s.plural}_cleanup" for s in KINDS.values()]


def test_importing_the_handlers_registers_nothing() -> None:
    ours = {h for names in _ids(kopf.OperatorRegistry()).values() for h in names}
    default = {h for names in _ids(kopf.get_default_registry()).values() for h in names}
    assert not ours
    assert not default & {"configure", "placements", "modelservings_daemon"}
