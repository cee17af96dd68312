"""Waiting for a fact instead of sleeping: :func:`eventually`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def eventually(fn: Callable[[], T], timeout: float = 60, interval: float = 0.5) -> T:
    """Call ``fn`` until it returns a truthy value without raising; return that value.

    On timeout, re-raise the last AssertionError/exception, or fail with the last value.
    """
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    value: T | None = None
    while time.monotonic() < deadline:
        try:
            value = fn()
            if value:
                return value
            last_exc = None
        except Exception as exc:
            last_exc = exc
        time.sleep(interval)
    if last_exc is not None:
        raise AssertionError(f"not true after {timeout}s: {last_exc!r}") from last_exc
    raise AssertionError(f"not true after {timeout}s; last value: {value!r}")


def on_fleet(bed: Any, step: Callable[[], None], check: Callable[[], Any],
             timeout: float = 240) -> Any:
    """:func:`eventually` ``check`` on a running fleet, one poll a second.

    Each poll first checks that none of the fleet's processes died and runs ``step`` (say,
    starting KServe's controller once its stack is there).
    """

    def poll() -> Any:
        bed.check_processes()
        step()
        return check()

    return eventually(poll, timeout=timeout, interval=1)
