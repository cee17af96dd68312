"""The namespace policy: which spoke namespaces a hub namespace's intents may target.

The pure policy (mapping, default, always-denied namespaces), the manager's refusal naming
each field, the per-tenant executor its works run as on the spoke (and the access work that
creates it), and the agent's own check of a sealed connection's targets.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from typing import Any

import kopf
import pytest

from addon_agent.config import AgentConfig
from addon_agent.io import delivery
from addon_agent.io.namespace_waits import NamespaceWaits
from addon_agent.main import parse as agent_parse
from addon_agent.pure import tenancy as agent_tenancy
from addon_agent.shell.sealed import SealedConnections
from addon_api import constants as c
from addon_api import tenancy
from addon_manager.engine import policy
from addon_manager.facts import canonical, naming
from addon_manager.facts.records import WorkFact
from addon_manager.kinds import tenant_access as mt
from addon_manager.shell import main
from addon_manager.shell.reconcile import Reconciler
from testbed.support.fake_hub import FakeHub
from testbed.support.sealing import memory_sealer
from tests.unit.test_agent_namespace import FakeKube
from tests.unit.test_manager_reconcile import msv_body, platform_ready

TEAM_A = policy.Policy(namespaces=tenancy.parse("team-a=team-a,models"))

# The pure policy -----------------------------------------------------------------------------


def test_default_allows_only_the_namespace_of_the_same_name() -> None:
    default = tenancy.NamespacePolicy()
    assert default.refusal("team-a", "team-a", c.AGENT_NAMESPACE) == ""
    why = default.refusal("team-a", "team-b", c.AGENT_NAMESPACE)
    assert "'team-b' is not allowed for hub namespace 'team-a', which may target only team-a" in why


def test_mapping_and_the_star_entry() -> None:
    pol = tenancy.parse("team-a=team-a,models;*=shared")
    assert pol.refusal("team-a", "models", c.AGENT_NAMESPACE) == ""
    assert pol.refusal("team-a", "shared", c.AGENT_NAMESPACE) != ""
    assert pol.refusal("team-z", "shared", c.AGENT_NAMESPACE) == ""  # not listed: '*' entry
    assert pol.refusal("team-z", "team-z", c.AGENT_NAMESPACE) != ""
    anywhere = tenancy.parse("*=*")
    assert anywhere.refusal("x", "whatever", c.AGENT_NAMESPACE) == ""
    assert anywhere.executor("x") is None
    assert pol.executor("team-a") == "model-serving-tenant-team-a"
    assert tenancy.parse(pol.render()) == pol


@pytest.mark.parametrize(
    "spoke",
    ["kube-system", "kube-public", "openshift-monitoring", "open-cluster-management",
     "open-cluster-management-agent", c.AGENT_NAMESPACE, "ml-agent"],
)
def test_system_and_agent_namespaces_are_always_denied(spoke: str) -> None:
    """Even a mapping that lists them, even '*'."""
    for pol in (tenancy.parse(f"team-a={spoke}"), tenancy.parse("*=*")):
        assert "always denied" in pol.refusal("team-a", spoke, "ml-agent")
    assert tenancy.NamespacePolicy().refusal(spoke, spoke, "ml-agent") != ""


@pytest.mark.parametrize("text", ["team-a", "Team_A=x", "a=b;a=c", "a=b c"])
def test_a_malformed_policy_is_refused_naming_the_entry(text: str) -> None:
    with pytest.raises(ValueError, match="--target-namespaces entry"):
        tenancy.parse(text)


def test_the_command_line_sets_the_policy() -> None:
    args = main.parse_args(["--target-namespaces=team-a=team-a,models",
                            "--stack-owner-namespaces=*"])
    assert main.policy_from_args(args) == TEAM_A
    assert main.policy_from_args(main.parse_args([])).namespaces == tenancy.NamespacePolicy()
    with pytest.raises(SystemExit):
        main.policy_from_args(main.parse_args(["--target-namespaces=Bad"]))


# The manager: every field that names a spoke namespace ----------------------------------------


def _body(kind: str, ns: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION, "kind": kind,
        "metadata": {"name": "x", "namespace": ns, "generation": 1,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"placementRef": {"name": "p"}, **spec},
    }


RUNTIME = {"containers": [{"name": "c", "image": "img:1"}],
           "supportedModelFormats": [{"name": "sklearn"}]}
SC = {"type": "uri", "uri": {"uri": "https://example.com/m"}}

CASES = [
    (c.KIND_STORAGE_CONNECTION, {**SC, "targetNamespaces": ["team-a", "team-b"]},
     "spec.targetNamespaces[1]", "team-b"),
    (c.KIND_SERVING_RUNTIME, {"targetNamespace": "kube-system", "template": RUNTIME},
     "spec.targetNamespace", "kube-system"),
    (c.KIND_INFERENCE_SERVICE, {"targetNamespace": "team-b", "template": {"predictor": {}}},
     "spec.targetNamespace", "team-b"),
    (c.KIND_MODEL_SERVING, {"platform": "KServe", "servingNamespaces": ["team-b"]},
     "spec.servingNamespaces[0]", "team-b"),
    (c.KIND_INFERENCE_SERVICE,
     {"targetNamespace": "team-a", "template": {"predictor": {}},
      "overrides": [{"clusterNames": ["c1"], "patch": {"targetNamespace": "openshift-config"}}]},
     "spec.overrides[0].patch.targetNamespace", "openshift-config"),
    (c.KIND_STORAGE_CONNECTION,
     {**SC, "targetNamespaces": ["team-a"],
      "overrides": [{"clusterNames": ["c1"], "patch": {"targetNamespaces": ["team-b"]}}]},
     "spec.overrides[0].patch.targetNamespaces[0]", "team-b"),
]


@pytest.mark.parametrize(("kind", "spec", "field", "target"), CASES)
def test_out_of_policy_target_is_refused_naming_field_and_namespace(
    kind: str, spec: dict[str, Any], field: str, target: str
) -> None:
    hub = FakeHub(placements={("team-a", "p"): frozenset({"c1", "c2"})})
    platform_ready(hub, "c1", "c2")
    out = asyncio.run(Reconciler(hub, hub, memory_sealer()).reconcile(
                                 kind, _body(kind, "team-a", **spec)))
    assert out.applied == 0 and [w for w in hub.writes if w[0] == "apply"] == []
    status = hub.statuses["x"]
    ready = next(x for x in status["conditions"] if x["type"] == c.CONDITION_READY)
    assert (status["phase"], ready["reason"]) == ("Invalid", "NamespaceNotAllowed")
    assert f"{field}: spoke namespace {target!r}" in ready["message"], ready["message"]


def test_in_policy_targets_are_sent() -> None:
    hub = FakeHub(placements={("team-a", "p"): frozenset({"c1"})})
    platform_ready(hub, "c1")
    body = _body(c.KIND_MODEL_SERVING, "team-a", platform="KServe",
                 servingNamespaces=["team-a", "models"])
    asyncio.run(Reconciler(hub, hub, memory_sealer(),
                           admin=TEAM_A).reconcile(c.KIND_MODEL_SERVING, body))
    assert set(hub.works_of(c.KIND_MODEL_SERVING, "team-a", "x")) == {"c1"}


def test_a_clusters_own_agent_namespace_is_denied_on_that_cluster() -> None:
    """The agent may run in another namespace on some clusters: that one is denied there."""
    hub = FakeHub(placements={("team-a", "p"): frozenset({"c1", "c2"})},
                  agent_namespaces={"c2": "ml-agent"})
    admin = policy.Policy(namespaces=tenancy.parse("team-a=*"))
    body = _body(c.KIND_MODEL_SERVING, "team-a", platform="KServe", servingNamespaces=["ml-agent"])
    asyncio.run(Reconciler(hub, hub, memory_sealer(),
                           admin=admin).reconcile(c.KIND_MODEL_SERVING, body))
    assert set(hub.works_of(c.KIND_MODEL_SERVING, "team-a", "x")) == {"c1"}
    entry = next(e for e in hub.statuses["x"]["clusters"] if e["cluster"] == "c2")
    assert entry["reason"] == "NamespaceNotAllowed"
    assert "spec.servingNamespaces[0]" in entry["message"] and "'ml-agent'" in entry["message"]


def test_deleting_a_refused_intent_still_removes_its_works() -> None:
    hub = FakeHub(placements={("team-a", "p"): frozenset({"c1"})})
    platform_ready(hub, "c1")
    body = _body(c.KIND_SERVING_RUNTIME, "team-a", targetNamespace="models", template=RUNTIME)
    open_admin = policy.Policy(namespaces=tenancy.parse("*=*"))
    asyncio.run(Reconciler(hub, hub, memory_sealer(),
                           admin=open_admin).reconcile(c.KIND_SERVING_RUNTIME, body))
    assert hub.works_of(c.KIND_SERVING_RUNTIME, "team-a", "x")
    asyncio.run(Reconciler(hub, hub, memory_sealer()).cleanup(
                           c.KIND_SERVING_RUNTIME, "team-a", "x"))
    assert not hub.works_of(c.KIND_SERVING_RUNTIME, "team-a", "x")


# The executor: tenant works run as the tenant's ServiceAccount ----------------------------------


def _report_applied(hub: FakeHub, cluster: str, name: str,
                    granted: frozenset[str] | None = None) -> None:
    """The work agent reports the work applied; an access work's RoleBindings applied in
    ``granted`` (default: every namespace it has one in)."""
    fact = hub.works[(cluster, name)]
    manifests = hub.bodies[(cluster, name)]["spec"]["workload"]["manifests"]
    every = frozenset(m["metadata"]["namespace"] for m in manifests
                      if m["kind"] == "RoleBinding")
    hub.works[(cluster, name)] = WorkFact(**{
        **fact.__dict__, "applied": "True", "reported": True,
        "granted": every if granted is None else granted})


def _runtime_for_team_a() -> tuple[FakeHub, dict[str, Any], Reconciler, str]:
    """Team A's runtime into "models" on c1, reconciled once (its access work written)."""
    hub = FakeHub(placements={("team-a", "p"): frozenset({"c1"})})
    platform_ready(hub, "c1")
    body = _body(c.KIND_SERVING_RUNTIME, "team-a", targetNamespace="models", template=RUNTIME)
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=TEAM_A)
    asyncio.run(reconciler.reconcile(c.KIND_SERVING_RUNTIME, body))
    return hub, body, reconciler, mt.access_work_name("team-a")


def test_tenant_work_waits_for_its_identity_then_names_it_as_executor() -> None:
    hub, body, reconciler, access = _runtime_for_team_a()
    assert [w for w in hub.writes if w[0] == "apply"] == [("apply", f"c1/{access}")]
    entry = hub.statuses["x"]["clusters"][0]
    assert (entry["phase"], entry["reason"]) == ("Waiting", "WaitingForTenantAccess")

    manifests = hub.bodies[("c1", access)]["spec"]["workload"]["manifests"]
    sa = "model-serving-tenant-team-a"
    assert {(m["kind"], m["metadata"].get("namespace")) for m in manifests} == {
        ("ServiceAccount", c.AGENT_NAMESPACE),
        *((k, ns) for k in ("Role", "RoleBinding")
          for ns in (c.AGENT_NAMESPACE, "models", "team-a")),
    }
    roles = {m["metadata"]["namespace"]: m["rules"] for m in manifests if m["kind"] == "Role"}
    assert roles["models"] == [
        {"apiGroups": ["serving.kserve.io"], "resources": ["servingruntimes", "inferenceservices"],
         "verbs": ["get", "create", "update", "patch", "delete"]},
        {"apiGroups": ["route.openshift.io"], "resources": ["routes"],
         "verbs": ["get", "create", "update", "patch", "delete"]},
        {"apiGroups": ["route.openshift.io"], "resources": ["routes/custom-host"],
         "verbs": ["create", "update"]},
        {"apiGroups": ["multicluster.x-k8s.io"], "resources": ["serviceexports"],
         "verbs": ["get", "create", "update", "patch", "delete"]}]
    assert roles[c.AGENT_NAMESPACE][0]["resources"] == ["sealedstorageconnections"]

    # Applied, but not yet where the runtime goes: OCM's work agent would refuse the runtime's
    # work (and retry only a minute later), so it is not sent yet, and the hub says where.
    _report_applied(hub, "c1", access, granted=frozenset({c.AGENT_NAMESPACE}))
    asyncio.run(reconciler.reconcile(c.KIND_SERVING_RUNTIME, body))
    runtime_work = ("c1", naming.work_name(c.KIND_SERVING_RUNTIME, "team-a", "x"))
    assert runtime_work not in hub.bodies
    entry = hub.statuses["x"]["clusters"][0]
    assert (entry["phase"], entry["reason"]) == ("Waiting", "WaitingForTenantAccess")
    assert f"{sa} granted in namespace models" in entry["message"], entry

    _report_applied(hub, "c1", access)
    asyncio.run(reconciler.reconcile(c.KIND_SERVING_RUNTIME, body))
    work = hub.bodies[runtime_work]
    assert work["spec"]["executor"] == {"subject": {"type": "ServiceAccount", "serviceAccount": {
        "namespace": c.AGENT_NAMESPACE, "name": sa}}}


def test_a_failed_grant_is_retried_at_once_then_at_most_every_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The access work failed where the runtime goes (namespace not on the cluster yet): the
    manager changes its retry label so OCM's work agent applies it again at once (a label
    change resets the work agent's backoff), at most once per GRANT_RETRY_SECONDS, and looks
    again after that interval."""
    def applies(hub: FakeHub) -> list[tuple[str, ...]]:
        return [w for w in hub.writes if w[0] == "apply"]

    hub, body, reconciler, access = _runtime_for_team_a()
    _report_applied(hub, "c1", access, granted=frozenset({c.AGENT_NAMESPACE}))
    fact = hub.works[("c1", access)]
    failed = WorkFact(**{**fact.__dict__, "applied": "False"})
    hub.works[("c1", access)] = failed
    hub.writes.clear()

    clock = [1000.0]
    monkeypatch.setattr("addon_manager.shell.reconcile.time.monotonic", lambda: clock[0])
    outcome = asyncio.run(reconciler.reconcile(c.KIND_SERVING_RUNTIME, body))
    assert applies(hub) == [("apply", f"c1/{access}")]
    labels = hub.bodies[("c1", access)]["metadata"]["labels"]
    assert mt.LABEL_GRANT_RETRY in labels
    assert outcome.recheck_after is not None and outcome.recheck_after <= mt.GRANT_RETRY_SECONDS
    # the render hash is unchanged: no other write follows from the label
    annotations = hub.bodies[("c1", access)]["metadata"]["annotations"]
    assert annotations[c.ANNOTATION_RENDER_HASH] == fact.render_hash

    clock[0] += 1
    asyncio.run(reconciler.reconcile(c.KIND_SERVING_RUNTIME, body))
    assert applies(hub) == [("apply", f"c1/{access}")]  # not again within the interval
    hub.works[("c1", access)] = failed  # the work agent tried again: still failed
    clock[0] += mt.GRANT_RETRY_SECONDS
    asyncio.run(reconciler.reconcile(c.KIND_SERVING_RUNTIME, body))
    assert applies(hub) == [("apply", f"c1/{access}")] * 2

    # granted where it is needed: no retry, the runtime's work goes out
    _report_applied(hub, "c1", access)
    hub.writes.clear()
    clock[0] += mt.GRANT_RETRY_SECONDS
    asyncio.run(reconciler.reconcile(c.KIND_SERVING_RUNTIME, body))
    runtime = naming.work_name(c.KIND_SERVING_RUNTIME, "team-a", "x")
    assert applies(hub) == [("apply", f"c1/{runtime}")]


def test_always_denied_namespaces_get_no_rolebinding_even_when_listed() -> None:
    manifests = mt.render_access(
        "team-a", "c1", c.AGENT_NAMESPACE, frozenset({"models", "kube-system"})
    ).body["spec"]["workload"]["manifests"]
    assert "kube-system" not in {m["metadata"]["namespace"] for m in manifests}


def test_a_tenant_allowed_anywhere_has_no_executor() -> None:
    hub = FakeHub(placements={("team-a", "p"): frozenset({"c1"})})
    platform_ready(hub, "c1")
    body = _body(c.KIND_SERVING_RUNTIME, "team-a", targetNamespace="models", template=RUNTIME)
    admin = policy.Policy(namespaces=tenancy.parse("*=*"))
    asyncio.run(Reconciler(hub, hub, memory_sealer(),
                           admin=admin).reconcile(c.KIND_SERVING_RUNTIME, body))
    (key,) = [k for k in hub.bodies]
    assert "executor" not in hub.bodies[key]["spec"]


def test_identity_goes_with_the_tenants_last_work_on_a_cluster() -> None:
    hub = FakeHub(placements={("team-a", "p"): frozenset({"c1"})})
    platform_ready(hub, "c1")
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=TEAM_A)
    access = mt.access_work_name("team-a")
    bodies = [_body(c.KIND_SERVING_RUNTIME, "team-a", targetNamespace="models", template=RUNTIME)
              for _ in range(2)]
    bodies[1]["metadata"]["name"] = "y"
    for body in bodies:
        asyncio.run(reconciler.reconcile(c.KIND_SERVING_RUNTIME, body))
    _report_applied(hub, "c1", access)
    for body in bodies:
        asyncio.run(reconciler.reconcile(c.KIND_SERVING_RUNTIME, body))
    asyncio.run(reconciler.cleanup(c.KIND_SERVING_RUNTIME, "team-a", "x"))
    assert ("c1", access) in hub.works  # y still runs as it
    asyncio.run(reconciler.cleanup(c.KIND_SERVING_RUNTIME, "team-a", "y"))
    assert ("c1", access) not in hub.works


def test_model_serving_works_have_no_executor() -> None:
    """The stack is the platform's: applied as the work agent itself, never a tenant."""
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    asyncio.run(Reconciler(hub, hub, memory_sealer()).reconcile(
                           c.KIND_MODEL_SERVING, msv_body("k", "2026-01-01")))
    assert all("executor" not in b["spec"] for b in hub.bodies.values()) and hub.bodies


# The agent's own check ------------------------------------------------------------------------


def test_agent_refuses_targets_out_of_its_policy() -> None:
    pol = tenancy.parse("team-a=team-a,models")
    refused = agent_tenancy.refused_targets
    assert refused(pol, "team-a.s3", "team-a", ["team-a", "models"], "agent") == ""
    assert refused(pol, "team-a.s3", None, ["team-a", "models"], "agent") == ""
    assert refused(pol, "team-a.s3", "team-a", ["models", "team-b"], "agent").startswith(
        "team-b: ")
    assert "always denied" in refused(pol, "team-a.s3", "team-a", ["agent"], "agent")
    # the tenant comes from the (sealed) object name; a source naming another is refused
    assert refused(pol, "team-b.s3", "team-a", ["team-a"], "agent") != ""
    assert refused(pol, "s3", "team-a", ["team-a"], "agent") == ""  # not the manager's name
    assert refused(pol, "s3", None, ["team-a"], "agent") != ""  # no tenant: only '*' allows
    assert refused(tenancy.parse("*=*"), "s3", None, ["team-a"], "agent") == ""


class _StatusKube(FakeKube):
    def __init__(self, *namespaces: str) -> None:
        super().__init__(*namespaces)
        self.statuses: dict[str, dict[str, Any]] = {}

    def patch_status(self, api_version: str, kind: str, name: str, status: dict[str, Any],
                     namespace: str | None = None) -> None:
        self.statuses[name] = status


def _agent(targets: str) -> tuple[SealedConnections, _StatusKube]:
    agent = object.__new__(SealedConnections)
    config = agent_parse([f"--target-namespaces={targets}", "--namespace=agent-ns"])
    assert isinstance(config, AgentConfig)
    kube = _StatusKube("team-a", "team-b")
    agent.config, agent.kube, agent.private_key = config, kube, bytes(32)  # type: ignore[assignment]
    # what the delivery would open payloads with: not reached by a refused connection
    agent.opener, agent.ledger = (lambda *_: None), None  # type: ignore[method-assign,assignment]
    agent.waits, agent.delivery_lock = NamespaceWaits(), threading.Lock()
    return agent, kube


def _sealed(source: str, targets: list[str]) -> kopf.Body:
    return kopf.Body({
        "metadata": {"name": f"{source}.s3", "namespace": "agent-ns", "generation": 1},
        "spec": {"keyId": "k1", "sealed": base64.b64encode(b"x" * 64).decode(), "type": "s3",
                 "targetNamespaces": targets, "entryName": "s3",
                 "source": {"namespace": source, "name": "s3"}},
    })


def test_agent_refuses_a_sealed_connection_into_another_tenants_namespace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def reached(*_: Any) -> None:
        raise delivery.DeliveryError("ReachedDelivery", "the check let it through")

    monkeypatch.setattr(delivery, "deliver", reached)
    agent, kube = _agent("")
    agent.deliver(_sealed("team-a", ["team-b"]))
    status = kube.statuses["team-a.s3"]
    reason = next(x for x in status["conditions"] if x["type"] == "Delivered")["reason"]
    assert (status["phase"], reason) == ("Failed", "NamespaceNotAllowed")
    assert "team-b" in status["message"]
    assert kube.get("v1", "Secret", c.STORAGE_CONFIG_SECRET, "team-b") is None
    # allowed by the policy: the check lets it through to the delivery
    agent, kube = _agent("team-a=team-b")
    agent.deliver(_sealed("team-a", ["team-b"]))
    reason = next(x for x in kube.statuses["team-a.s3"]["conditions"]
                  if x["type"] == "Delivered")["reason"]
    assert reason == "ReachedDelivery"


def test_a_sealed_work_keeps_its_keyed_render_hash_under_an_executor() -> None:
    """The executor is hashed in, and a work carrying sealed data stays HMAC-keyed."""
    from addon_manager.kinds import render

    key = b"k" * 32
    inputs = render.SealInputs(public_key="p", key_id="k", binding="b", secret_digest="",
                               hash_key=key)
    work = render.manifest_work(c.KIND_STORAGE_CONNECTION, "team-a", "s3", "c1", [], [],
                        seal_inputs=inputs, hash_key=key)
    gated = mt.with_executor(work, c.AGENT_NAMESPACE, "model-serving-tenant-team-a")
    body = {**gated.body, "metadata": {**gated.body["metadata"], "annotations": {}}}
    assert gated.render_hash != work.render_hash
    assert gated.render_hash == canonical.keyed_canonical_hash(key, body)
    assert gated.render_hash != canonical.canonical_hash(body)


def test_an_access_work_reports_where_its_rolebindings_are_applied() -> None:
    from addon_manager.kinds.registry import parse as parse_work

    def manifest(kind: str, ns: str, applied: str) -> dict[str, Any]:
        return {"resourceMeta": {"kind": kind, "namespace": ns, "name": "model-serving-tenant-a"},
                "conditions": [{"type": "Applied", "status": applied}]}

    def work(kind: str) -> dict[str, Any]:
        return {
            "metadata": {"name": "w", "namespace": "c1",
                         "labels": {c.LABEL_MANAGED_BY: c.FIELD_MANAGER,
                                    c.LABEL_INTENT_KIND: kind, c.LABEL_INTENT_NAMESPACE: "a",
                                    c.LABEL_INTENT_NAME: "access"}},
            "status": {"resourceStatus": {"manifests": [
                manifest("Role", "models", "True"),
                manifest("RoleBinding", "models", "True"),
                manifest("RoleBinding", "missing", "False"),  # namespace not on the cluster
            ]}},
        }

    fact = parse_work(work(mt.ACCESS_KIND))
    assert fact is not None and fact.granted == frozenset({"models"})
    other = parse_work(work(c.KIND_SERVING_RUNTIME))
    assert other is not None and other.granted == frozenset()
