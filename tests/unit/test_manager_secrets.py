"""The manager's per-namespace Secret store: what wakes whom, what is kept (never the data)."""

from __future__ import annotations

import asyncio
import base64

from kubernetes import client

from addon_manager.facts.secrets import (
    PENDING,
    READABLE,
    decode_value,
    forbidden_detail,
    parse_secret,
)
from addon_manager.shell.secrets import SecretWatches, _Namespace


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_decode_value_refuses_bad_base64_and_non_utf8() -> None:
    assert decode_value(_b64("sk-1")) == "sk-1"
    assert decode_value(base64.b64encode(b"\xff\xfe").decode()) is None
    assert decode_value("not base64!") is None


def test_forbidden_detail_names_the_namespace_and_the_grant() -> None:
    text = forbidden_detail("team-a", "HTTP 403 Forbidden")
    assert "namespace team-a (HTTP 403 Forbidden)" in text
    assert "add team-a to the chart's manager.secretNamespaces" in text


def test_store_wakes_on_changes_and_access_only() -> None:
    woken: list[tuple[str, str | None]] = []

    async def scenario() -> None:
        watches = SecretWatches(client.ApiClient(), lambda ns, name: woken.append((ns, name)))
        watches._ns["team-a"] = _Namespace()  # as ensure() does, without the thread
        assert watches.access("team-a") == PENDING and watches.access("other") == PENDING
        watches._denied("team-a", forbidden_detail("team-a"))
        watches._denied("team-a", forbidden_detail("team-a"))  # unchanged: no second wake
        assert watches.access("team-a").state == "forbidden"
        assert woken == [("team-a", None)]
        woken.clear()
        creds = parse_secret({"key": _b64("v1")})
        watches._listed("team-a", {"creds": creds})  # granted: access and the Secret changed
        assert watches.access("team-a") == READABLE
        assert woken == [("team-a", None), ("team-a", "creds")]
        woken.clear()
        watches._event("team-a", "MODIFIED", "creds", creds)  # same data: nobody woken
        assert woken == []
        watches._event("team-a", "MODIFIED", "creds", parse_secret({"key": _b64("v2")}))
        watches._event("team-a", "DELETED", "creds", creds)
        assert woken == [("team-a", "creds"), ("team-a", "creds")]
        assert watches.get("team-a", "creds") is None
        await watches.settled("team-a", timeout=0.1)  # already settled: returns at once

    asyncio.run(scenario())
