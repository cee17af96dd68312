"""HubWriter: retries with backoff on throttling, server errors and conflicts; counts writes."""

from __future__ import annotations

import asyncio
from http.client import RemoteDisconnected
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError, ProtocolError

from addon_manager import apply, metrics


def _writes() -> float:
    return sum(
        s.value
        for m in metrics.API_WRITES.collect()
        for s in m.samples
        if s.name.endswith("_total")
    )


def _writer() -> apply.HubWriter:
    return apply.HubWriter(client.ApiClient(client.Configuration()), concurrency=2, attempts=4)


def _flaky(statuses: list[int]) -> Any:
    calls = {"n": 0}

    def fn() -> str:
        calls["n"] += 1
        if statuses:
            raise ApiException(status=statuses.pop(0), reason="x")
        return "ok"

    return fn, calls


def test_retries_throttling_and_server_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apply.asyncio, "sleep", _no_sleep)
    writer = _writer()
    fn, calls = _flaky([429, 503, 409])
    before = _writes()
    assert asyncio.run(writer._call("apply", "manifestworks", fn)) == "ok"
    assert calls["n"] == 4 and _writes() - before == 4  # every attempt is a write
    writer.close()


def test_gives_up_and_does_not_retry_client_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apply.asyncio, "sleep", _no_sleep)
    writer = _writer()
    fn, calls = _flaky([422])
    with pytest.raises(apply.WriteError) as err:
        asyncio.run(writer._call("apply", "manifestworks", fn))
    assert err.value.status == 422 and calls["n"] == 1
    fn, calls = _flaky([500] * 10)
    with pytest.raises(apply.WriteError):
        asyncio.run(writer._call("apply", "manifestworks", fn))
    assert calls["n"] == 4
    fn, calls = _flaky([409])  # a conflict on a non-forced apply is someone else's work
    with pytest.raises(apply.WriteError):
        asyncio.run(writer._call("apply", "manifestworks", fn, retry_conflict=False))
    assert calls["n"] == 1
    writer.close()


def test_retries_a_dropped_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the client raises while the hub's API server restarts is retried, then reported
    as a WriteError (never an unexpected exception that aborts a whole reconcile)."""
    monkeypatch.setattr(apply.asyncio, "sleep", _no_sleep)
    writer = _writer()
    errors: list[Exception] = [
        ProtocolError("Connection aborted.", RemoteDisconnected("closed")),
        MaxRetryError(None, "/apis", reason=ConnectionRefusedError()),  # type: ignore[arg-type]
        ConnectionResetError(),
    ]
    calls = {"n": 0}

    def fn() -> str:
        calls["n"] += 1
        if errors:
            raise errors.pop(0)
        return "ok"

    assert asyncio.run(writer._call("apply", "manifestworks", fn)) == "ok"
    assert calls["n"] == 4

    def down() -> str:
        raise ProtocolError("Connection aborted.", RemoteDisconnected("closed"))

    with pytest.raises(apply.WriteError):
        asyncio.run(writer._call("apply", "manifestworks", down))
    writer.close()


def test_reads_are_not_counted_as_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    writer = _writer()
    before = _writes()
    assert asyncio.run(writer._call("get", "secrets", lambda: 1, write=False)) == 1
    assert _writes() == before
    writer.close()


async def _no_sleep(_: float) -> None:
    return None
