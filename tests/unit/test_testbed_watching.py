"""The watch recorder's order and replay (testbed.support.watching), without a cluster."""

from __future__ import annotations

from testbed.support.watching import Event, Recorder


def _obj(name: str, **meta: object) -> dict[str, object]:
    return {"metadata": {"name": name, **meta}, "status": {}}


def _recorder(*events: Event) -> Recorder:
    recorder = Recorder()
    recorder.events.extend(events)  # as the watches' threads append them: out of order
    return recorder


def test_events_of_different_kinds_replay_in_the_clusters_write_order() -> None:
    done = {"metadata": {"name": "hook"}, "status": {"conditions": [
        {"type": "Complete", "status": "True"}]}}
    seen = _recorder(
        Event(30, "Deployment", "DELETED", _obj("agent")),
        Event(10, "Deployment", "ADDED", _obj("agent")),
        Event(20, "Job", "MODIFIED", done),
        Event(15, "Job", "ADDED", _obj("hook")),
        Event(25, "Deployment", "MODIFIED", _obj("agent", deletionTimestamp="now")),
    )
    assert [e.revision for e in seen.ordered()] == [10, 15, 20, 25, 30]
    complete = seen.first("Job", lambda job: bool(job["status"].get("conditions")))
    assert complete is not None and complete.revision == 20
    # At the Job's completion the Deployment was there and not being deleted ...
    assert seen.state_at(20, "Deployment", "agent") == _obj("agent")
    # ... marked for deletion at 25, gone at 30.
    assert seen.state_at(26, "Deployment", "agent") == _obj("agent", deletionTimestamp="now")
    assert seen.state_at(30, "Deployment", "agent") is None
    assert seen.state_at(5, "Deployment", "agent") is None
    deleted = seen.deleted("Deployment", "agent")
    assert deleted is not None and deleted.revision == 30
    assert seen.deleted("Job", "hook") is None


def test_a_state_that_never_came_is_none() -> None:
    seen = _recorder(Event(1, "Job", "ADDED", _obj("hook")),
                     Event(2, "Job", "DELETED", _obj("hook")))
    assert seen.first("Job", lambda job: bool(job["status"].get("conditions"))) is None
    # A DELETED event never counts as a state the object was in.
    assert seen.first("Job", lambda job: True) == Event(1, "Job", "ADDED", _obj("hook"))
