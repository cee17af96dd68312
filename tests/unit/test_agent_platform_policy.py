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
