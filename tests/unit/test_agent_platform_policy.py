"""The agent judges a ServingPlatform again (issue 29, defence in depth): devFlags it was not
allowed and serving namespaces the policy denies are refused on the spoke, whatever the hub
sent; a removal is never refused."""

from __future__ import annotations

from typing import Any

import pytest

from addon_agent.main import parse
from addon_agent.pure import tenancy as agent_tenancy
from addon_api import constants as c
from addon_api import tenancy
from addon_api.spoke import ServingPlatformSpec

OPEN = tenancy.parse("*=*")


def spec(**fields: Any) -> ServingPlatformSpec:
    return ServingPlatformSpec.from_wire({"platform": "KServe",
                                          "source": {"namespace": "platform", "name": "k"},
                                          **fields})


def test_dev_flags_are_refused_unless_the_agent_allows_them() -> None:
    flagged = spec(devFlags={"images": {"kserve-controller-manager": "evil.example/k:1"}})
    refused = agent_tenancy.platform_refusal(flagged, OPEN, False, c.AGENT_NAMESPACE)
    assert refused is not None and refused[0] == "DevFlagsNotAllowed"
    assert agent_tenancy.platform_refusal(flagged, OPEN, True, c.AGENT_NAMESPACE) is None
    assert agent_tenancy.platform_refusal(spec(), OPEN, False, c.AGENT_NAMESPACE) is None


@pytest.mark.parametrize("namespace", ["kube-system", "kserve", c.AGENT_NAMESPACE, "team-b"])
def test_a_denied_serving_namespace_is_refused_naming_it(namespace: str) -> None:
    policy = tenancy.NamespacePolicy({"platform": frozenset({"models", "kserve", "kube-system",
                                                             c.AGENT_NAMESPACE})})
    refused = agent_tenancy.platform_refusal(
        spec(servingNamespaces=["models", namespace]), policy, False, c.AGENT_NAMESPACE)
    assert refused is not None and refused[0] == "NamespaceNotAllowed"
    assert f"spec.servingNamespaces[1]: spoke namespace {namespace!r}" in refused[1]
    assert agent_tenancy.platform_refusal(spec(servingNamespaces=["models"]), policy, False,
                                          c.AGENT_NAMESPACE) is None


@pytest.mark.parametrize(("argv", "allowed"), [([], False), (["--allow-dev-flags"], True),
                                                (["--allow-dev-flags=true"], True),
                                                (["--allow-dev-flags=false"], False),
                                                (["--allow-dev-flags="], False)])
def test_the_flag_takes_the_add_on_deployment_configs_value(argv: list[str],
                                                            allowed: bool) -> None:
    assert parse(argv, {}).allow_dev_flags is allowed
    with pytest.raises(SystemExit):
        parse(["--allow-dev-flags=yes"], {})


# The policy the manager delivers (ConfigMap model-serving-namespace-policy, issue 32) ----------

WAITING = agent_tenancy.PolicyRead(None, "waiting for the namespace policy: ConfigMap ...")


def test_serving_namespaces_wait_for_the_policy_and_the_wait_is_installing() -> None:
    from addon_agent.pure import decisions
    from addon_api.reasons import ServingPlatformPhase

    waiting = agent_tenancy.platform_refusal(spec(servingNamespaces=["models"]), WAITING, False,
                                             c.AGENT_NAMESPACE)
    assert waiting == ("WaitingForNamespacePolicy", WAITING.problem)
    reading = decisions.Reading(name="model-serving", generation=1, previous=[])
    status = decisions.route(reading, spec(servingNamespaces=["models"]), waiting)
    assert not isinstance(status, decisions.Route)
    assert status.phase == ServingPlatformPhase.INSTALLING
    # Nothing to judge: no wait. devFlags are judged without any namespace policy.
    assert agent_tenancy.platform_refusal(spec(), WAITING, False, c.AGENT_NAMESPACE) is None
    flagged = spec(servingNamespaces=["models"],
                   devFlags={"images": {"kserve-controller-manager": "evil.example/k:1"}})
    refused = agent_tenancy.platform_refusal(flagged, WAITING, False, c.AGENT_NAMESPACE)
    assert refused is not None and refused[0] == "DevFlagsNotAllowed"


def test_an_unreadable_policy_refuses_and_a_sealed_connection_waits_as_pending() -> None:
    from addon_api.reasons import SEALED_WAITS, SealedReason

    bad = agent_tenancy.PolicyRead(None, "ConfigMap a/b: key targetNamespaces: ...", invalid=True)
    refused = agent_tenancy.platform_refusal(spec(servingNamespaces=["models"]), bad, False,
                                             c.AGENT_NAMESPACE)
    assert refused == ("NamespaceNotAllowed", f"{bad.problem}; nothing is changed")
    sealed = agent_tenancy.without_policy(WAITING, ["models"], sealed=True)
    assert sealed is not None and sealed[0] == SealedReason.WAITING_FOR_NAMESPACE_POLICY
    assert sealed[0] in SEALED_WAITS
    assert agent_tenancy.without_policy(agent_tenancy.PolicyRead(OPEN), ["models"]) is None


class _ConfigMaps:
    def __init__(self, data: dict[str, str] | None) -> None:
        self.data = data

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        assert (kind, name, namespace) == ("ConfigMap", c.NAMESPACE_POLICY_CONFIGMAP, "agent")
        return None if self.data is None else {"data": self.data}


def test_the_configmap_wins_over_the_flag_which_counts_only_without_one() -> None:
    from addon_agent.io import policy_source

    flag = tenancy.parse("platform=flagged")
    found = policy_source.read(_ConfigMaps({c.POLICY_KEY_TARGETS: "platform=models"}),  # type: ignore[arg-type]
                               "agent", flag)
    assert found.policy is not None and found.policy.targets("platform") == {"models"}
    assert policy_source.read(_ConfigMaps(None), "agent", flag).policy == flag  # type: ignore[arg-type]
    none = policy_source.read(_ConfigMaps(None), "agent", None)  # type: ignore[arg-type]
    assert none.policy is None and not none.invalid
    assert f"ConfigMap agent/{c.NAMESPACE_POLICY_CONFIGMAP} is not there yet" in none.problem
    bad = policy_source.read(_ConfigMaps({c.POLICY_KEY_TARGETS: "x"}), "agent", flag)  # type: ignore[arg-type]
    assert bad.invalid and "key targetNamespaces" in bad.problem


def test_the_flag_is_only_a_fallback_and_absent_by_default() -> None:
    assert parse([], {}).target_namespaces is None
    assert parse(["--target-namespaces="], {}).target_namespaces == tenancy.NamespacePolicy()
