"""The agent's record of sealed connections waiting for a target namespace."""

from __future__ import annotations

from addon_agent.io.namespace_waits import NamespaceWaits


def test_a_namespace_appearing_hands_over_exactly_the_connections_waiting_for_it() -> None:
    waits = NamespaceWaits()
    waits.wait(("hub", "a"), ["models", "team-b"])
    waits.wait(("hub", "b"), ["models"])
    waits.wait(("hub", "c"), ["other"])
    assert waits.waiting_for("models") and not waits.waiting_for("kube-system")
    assert waits.take("models") == [("hub", "a"), ("hub", "b")]
    assert not waits.waiting_for("models")
    assert waits.take("models") == []  # handed over once
    assert waits.take("team-b") == [("hub", "a")]
    assert waits.take("other") == [("hub", "c")]


def test_a_new_wait_replaces_the_old_one_and_done_forgets_it() -> None:
    waits = NamespaceWaits()
    waits.wait(("hub", "a"), ["old"])
    waits.wait(("hub", "a"), ["new"])  # retargeted while pending
    assert not waits.waiting_for("old")
    assert waits.waiting_for("new")
    waits.done(("hub", "a"))  # delivered (or deleted)
    assert not waits.waiting_for("new")
    assert waits.take("new") == []
