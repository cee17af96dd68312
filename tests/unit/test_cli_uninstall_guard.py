"""The chart's uninstall guard (``model-serving-addon uninstall-guard``): its verdict (pure),
and the command on a stand-in hub whose intents change between reads."""

from __future__ import annotations

from typing import Any

import pytest

from addon_api import constants as c
from addon_cli import guard
from addon_cli.hub import CliError


def _intent(kind: str, ns: str, name: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": ns, "name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-05T16:00:00Z"
    return {"kind": kind, "metadata": meta}


def test_no_intent_lets_the_uninstall_proceed() -> None:
    assert guard.verdict([]) == guard.Verdict(
        True, False, "no intents on the hub: the uninstall may proceed")


def test_a_live_intent_refuses_naming_it_and_what_to_do() -> None:
    found = guard.verdict([_intent(c.KIND_INFERENCE_SERVICE, "team-a", "iris"),
                           _intent("ModelServing", "team-a", "kserve", deleting=True)])
    assert (found.proceed, found.wait) == (False, False)
    assert "1 intent(s) still exist (mcisvc team-a/iris)" in found.message
    assert "kserve" not in found.message  # the one being deleted is not the reason
    assert "helm uninstall --no-hooks" in found.message


def test_only_intents_being_deleted_are_waited_for() -> None:
    found = guard.verdict([_intent("ModelServing", "b", "x", deleting=True),
                           _intent("StorageConnection", "a", "s3", deleting=True)])
    assert (found.proceed, found.wait) == (False, True)
    assert found.message.startswith("waiting for 2 intent(s) being deleted (msv b/x, ")


def test_a_long_refusal_names_ten_and_counts_the_rest() -> None:
    many = [_intent("ModelServing", "ns", f"m{i:02d}") for i in range(13)]
    found = guard.verdict(many)
    assert "m09" in found.message and "m10" not in found.message
    assert "and 3 more" in found.message


class _Hub:
    """The hub as reads see it: each read of all kinds returns the next state."""

    def __init__(self, *states: list[dict[str, Any]], refuse: str = "",
                 unserved: tuple[str, ...] = ()) -> None:
        self.states = list(states)
        self.reads = 0
        self.refuse = refuse
        self.unserved = unserved

    def intents(self, kind: str, namespace: str | None) -> list[dict[str, Any]]:
        if self.refuse:
            raise CliError(4, self.refuse)
        if kind in self.unserved:
            if kind == "MultiClusterInferenceService":
                self.reads += 1
            raise CliError(5, f"not found: list {kind} (Not Found)")
        assert namespace is None  # every namespace
        state = self.states[min(self.reads, len(self.states) - 1)]
        if kind == "MultiClusterInferenceService":  # the last kind read: one round done
            self.reads += 1
        return [i for i in state if i["kind"] == kind]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Any:
    from addon_cli import main as cli_main

    monkeypatch.setattr(cli_main.time, "sleep", lambda seconds: None)
    return cli_main


def test_the_command_waits_for_deletions_then_exits_0(
    cli: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    deleting = [_intent("ModelServing", "team-a", "kserve", deleting=True)]
    hub = _Hub(deleting, deleting, [])
    monkeypatch.setattr(cli, "_hub", lambda args: hub)
    assert cli.main(["uninstall-guard", "--interval=1s"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["waiting for 1 intent(s) being deleted (msv team-a/kserve): the manager "
                       "removes their works, then their finalizer"] * 2
    assert out[2] == "no intents on the hub: the uninstall may proceed"


def test_the_command_refuses_live_intents_and_deletions_past_the_timeout(
    cli: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(cli, "_hub", lambda args: _Hub([_intent("ModelServing", "a", "m")]))
    assert cli.main(["uninstall-guard"]) == 1
    assert capsys.readouterr().out.startswith("refusing to uninstall: 1 intent(s)")
    stuck = [_intent("ModelServing", "a", "m", deleting=True)]
    monkeypatch.setattr(cli, "_hub", lambda args: _Hub(stuck))
    assert cli.main(["uninstall-guard", "--timeout=0s"]) == 1
    assert "were not gone after 0s" in capsys.readouterr().out


def test_a_hub_it_cannot_read_refuses(
    cli: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(cli, "_hub", lambda args: _Hub([], refuse="the hub refused: list"))
    assert cli.main(["uninstall-guard"]) == 4
    assert "the hub refused" in capsys.readouterr().err


def test_kinds_the_hub_does_not_serve_have_none_left(
    cli: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """CRDs deleted before the uninstall (docs/operations.md's step 4 done first): not a
    refusal; the kinds still served are read as usual."""
    from addon_cli import views

    kinds = tuple(views.KINDS)
    monkeypatch.setattr(cli, "_hub", lambda args: _Hub([], unserved=kinds))
    assert cli.main(["uninstall-guard"]) == 0
    left = [_intent("StorageConnection", "a", "s3")]
    monkeypatch.setattr(cli, "_hub", lambda args: _Hub(left, unserved=kinds[:1]))
    assert cli.main(["uninstall-guard"]) == 1
    assert "(sconn a/s3)" in capsys.readouterr().out
