"""Waiting for a fact instead of sleeping: :func:`eventually`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

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
