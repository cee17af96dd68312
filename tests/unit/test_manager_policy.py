"""The admin's policy: devFlags and stack owners are refused unless configuration allows."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from addon_api import constants as c
from addon_manager.engine import policy
from addon_manager.facts import conflicts
from addon_manager.shell import main
from addon_manager.shell.reconcile import Reconciler
from testbed.support.sealing import memory_sealer
from tests.unit.test_manager_reconcile import FakeHub, msv_body

DIGEST = "0" * 64


def with_dev_flags(body: dict[str, Any], **flags: Any) -> dict[str, Any]:
    body["spec"]["devFlags"] = flags
    return body


def reconcile(hub: FakeHub, body: dict[str, Any], admin: policy.Policy | None = None) -> Any:
    return asyncio.run(Reconciler(hub, hub, memory_sealer(),
                                  admin=admin).reconcile(c.KIND_MODEL_SERVING, body))


def ready_condition(hub: FakeHub, name: str) -> dict[str, Any]:
    conds = hub.statuses[name]["conditions"]
    return next(x for x in conds if x["type"] == c.CONDITION_READY)


@pytest.mark.parametrize(
    ("flags", "fields"),
    [
        ({"images": {"kserve-controller-manager": "example.com/k:1"}}, ["spec.devFlags.images"]),
        ({"manifests": {"uri": "https://example.com/b.tgz", "sha256": DIGEST}},
         ["spec.devFlags.manifests"]),
        ({"images": {"kserve-controller-manager": "example.com/k:1"},
          "manifests": {"uri": "file:///bundle"}},
         ["spec.devFlags.images", "spec.devFlags.manifests"]),
    ],
)
def test_dev_flags_are_refused_by_default_naming_the_field(
    flags: dict[str, Any], fields: list[str]
) -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    out = reconcile(hub, with_dev_flags(msv_body("kserve", "2026-01-01T00:00:00Z"), **flags))
    assert hub.works == {} and hub.addons == set() and out.applied == 0
    assert hub.statuses["kserve"]["phase"] == "Invalid"
    cond = ready_condition(hub, "kserve")
    assert cond["reason"] == "DevFlagsNotAllowed"
    for name in fields:
        assert name in cond["message"]


def test_dev_flags_in_an_override_patch_are_refused_too() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    body = msv_body("kserve", "2026-01-01T00:00:00Z")
    body["spec"]["overrides"] = [
        {"clusterNames": ["c2"], "patch": {"monitoring": {"enabled": True}}},
        {"clusterNames": ["c1"],
         "patch": {"devFlags": {"manifests": {"uri": "file:///bundle"}}}},
    ]
    reconcile(hub, body)
    assert hub.works == {}
    cond = ready_condition(hub, "kserve")
    assert cond["reason"] == "DevFlagsNotAllowed"
    assert "spec.overrides[1].patch.devFlags.manifests" in cond["message"]


def test_dev_flags_are_sent_when_the_admin_allows_them() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    body = with_dev_flags(msv_body("kserve", "2026-01-01T00:00:00Z"),
                          images={"kserve-controller-manager": "example.com/k:1"})
    reconcile(hub, body, policy.Policy(allow_dev_flags=True))
    assert set(hub.works_of(c.KIND_MODEL_SERVING, "ns", "kserve")) == {"c1"}


def test_a_model_serving_without_dev_flags_is_not_affected_by_the_default() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    reconcile(hub, msv_body("kserve", "2026-01-01T00:00:00Z"))
    assert set(hub.works_of(c.KIND_MODEL_SERVING, "ns", "kserve")) == {"c1"}


def test_refused_model_serving_leaves_works_sent_earlier_alone() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    body = with_dev_flags(msv_body("kserve", "2026-01-01T00:00:00Z"),
                          images={"kserve-controller-manager": "example.com/k:1"})
    reconcile(hub, body, policy.Policy(allow_dev_flags=True))
    hub.writes.clear()
    reconcile(hub, body)  # the admin turned devFlags off
    assert hub.writes == [("status", "kserve")]
    assert ready_condition(hub, "kserve")["reason"] == "DevFlagsNotAllowed"


def test_namespace_not_on_the_allowlist_gets_no_stack() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    admin = policy.Policy(stack_owner_namespaces=frozenset({"platform"}))
    reconcile(hub, msv_body("kserve", "2026-01-01T00:00:00Z"), admin)
    assert hub.works == {} and hub.addons == set()
    cond = ready_condition(hub, "kserve")
    assert cond["reason"] == "NamespaceNotAllowed" and "'ns'" in cond["message"]
    # on the list: sent
    reconcile(hub, msv_body("kserve", "2026-01-01T00:00:00Z"),
              policy.Policy(stack_owner_namespaces=frozenset({"ns", "platform"})))
    assert set(hub.works_of(c.KIND_MODEL_SERVING, "ns", "kserve")) == {"c1"}


def test_an_older_claim_from_a_refused_namespace_does_not_win_the_cluster() -> None:
    clusters = frozenset({"c1"})
    hub = FakeHub(
        placements={("ns", "p"): clusters},
        msv_claims=[
            conflicts.Claim("tenant", "old", "2026-01-01T00:00:00Z", clusters),
            conflicts.Claim("ns", "new", "2026-02-01T00:00:00Z", clusters),
        ],
    )
    reconcile(hub, msv_body("new", "2026-02-01T00:00:00Z"),
              policy.Policy(stack_owner_namespaces=frozenset({"ns"})))
    assert set(hub.works_of(c.KIND_MODEL_SERVING, "ns", "new")) == {"c1"}


def test_deleting_a_refused_model_serving_still_removes_its_works() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    body = msv_body("kserve", "2026-01-01T00:00:00Z")
    reconcile(hub, body)
    assert hub.works
    body["metadata"]["deletionTimestamp"] = "2026-03-01T00:00:00Z"
    reconcile(hub, body, policy.Policy(stack_owner_namespaces=frozenset({"platform"})))
    assert hub.works == {}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--namespace=admin"], policy.Policy(stack_owner_namespaces=frozenset({"admin"}))),
        (["--allow-dev-flags", "--stack-owner-namespaces=*"],
         policy.Policy(allow_dev_flags=True)),
        (["--stack-owner-namespaces=a, b"], policy.Policy(stack_owner_namespaces=frozenset("ab"))),
        (["--stack-owner-namespaces=*"], policy.Policy()),
    ],
)
def test_policy_from_the_command_line(argv: list[str], expected: policy.Policy) -> None:
    assert main.policy_from_args(main.parse_args(argv)) == expected
