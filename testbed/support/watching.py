"""Every change of some objects of a cluster, in the order the cluster made them (tests).

A test that polls sees a state only if it lasts longer than one round of its reads: a Job
that is Complete for a moment before OCM's garbage collection deletes it can fall between
two rounds on a loaded machine. :class:`Recorder` watches instead: the API server sends each
change of the watched objects, so none is missed, and each carries the resourceVersion of its
write. The testbed's API servers keep every cluster in one etcd, whose revision numbers all of
a cluster's writes in order, so the events of different kinds can be put in one order (an
API client may not rely on that on any cluster; a test of the testbed may).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]


@dataclass(frozen=True)
class Event:
    """One change: ADDED, MODIFIED or DELETED, of the object as the change left it."""

    revision: int
    kind: str
    type: str
    object: Obj

    @property
    def name(self) -> str:
        """The object's name."""
        return str(self.object["metadata"]["name"])


@dataclass
class Recorder:
    """The events of the watches started by :func:`recording`, in the cluster's order."""

    events: list[Event] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    errors: list[BaseException] = field(default_factory=list)

    def ordered(self) -> list[Event]:
        """Every event so far, oldest write first."""
        with self.lock:
            return sorted(self.events, key=lambda e: e.revision)

    def first(self, kind: str, test: Callable[[Obj], bool]) -> Event | None:
        """The first event of ``kind`` whose object passes ``test``."""
        return next((e for e in self.ordered() if e.kind == kind and e.type != "DELETED"
                     and test(e.object)), None)

    def state_at(self, revision: int, kind: str, name: str) -> Obj | None:
        """The object as it was once the cluster's write ``revision`` was made (None: absent)."""
        state: Obj | None = None
        for event in self.ordered():
            if event.revision > revision:
                break
            if event.kind == kind and event.name == name:
                state = None if event.type == "DELETED" else event.object
        return state

    def deleted(self, kind: str, name: str) -> Event | None:
        """The DELETED event of ``kind`` ``name``, if it came."""
        return next((e for e in self.ordered()
                     if e.kind == kind and e.name == name and e.type == "DELETED"), None)


Lister = Callable[..., Any]
"""A kubernetes client ``list_...`` method (what ``watch.Watch().stream`` calls)."""


@contextlib.contextmanager
def recording(watches: dict[str, tuple[Lister, dict[str, Any]]]) -> Iterator[Recorder]:
    """Watch each ``kind: (list method, its arguments)`` while the block runs.

    Each kind is listed (its objects recorded as ADDED) and watched from that list's
    resourceVersion before the block begins, so every later write is recorded; a watch the
    server ends resumes from its last event. An error of a watch fails the block's end.
    """
    from kubernetes import watch

    watcher: Any = watch.Watch  # the client is untyped

    recorder = Recorder()
    stop = threading.Event()
    started = threading.Barrier(len(watches) + 1)

    def follow(kind: str, lister: Lister, kwargs: dict[str, Any]) -> None:
        try:
            # The state first (a list), then every change after it (a watch from the list's
            # resourceVersion): nothing written once the block begins can be missed.
            listed = json.loads(lister(**kwargs, _preload_content=False).data)
            version = str(listed["metadata"]["resourceVersion"])
            with recorder.lock:
                recorder.events.extend(
                    Event(int(item["metadata"]["resourceVersion"]), kind, "ADDED", item)
                    for item in listed.get("items") or [])
            started.wait(timeout=30)
            while not stop.is_set():
                stream = watcher()
                for raw in stream.stream(lister, **kwargs, resource_version=version,
                                         timeout_seconds=2):
                    obj = raw["raw_object"]
                    if raw["type"] == "ERROR":
                        raise AssertionError(f"watch of {kind}: {obj}")
                    version = obj["metadata"]["resourceVersion"]
                    if raw["type"] == "BOOKMARK":
                        continue
                    with recorder.lock:
                        recorder.events.append(
                            Event(int(version), kind, str(raw["type"]), obj))
                    if stop.is_set():
                        stream.stop()
        except BaseException as err:  # surfaced at the block's end
            recorder.errors.append(err)
            started.abort()

    threads = [threading.Thread(target=follow, args=(kind, lister, kwargs), daemon=True,
                                name=f"watch {kind}")
               for kind, (lister, kwargs) in watches.items()]
    for thread in threads:
        thread.start()
    with contextlib.suppress(threading.BrokenBarrierError):  # a watch failed: raised below
        started.wait(timeout=30)
    try:
        yield recorder
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
    if recorder.errors:
        raise AssertionError(f"a watch failed: {recorder.errors[0]!r}") from recorder.errors[0]
