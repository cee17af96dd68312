"""The ServingPlatform reconcile as a table: each decision and the status it returns.

Two halves. The pure decisions (:mod:`addon_agent.pure.decisions`): what was read goes in, the
phase, reason and message to write come out. Then the reconcile itself
(:class:`addon_agent.shell.agent.Agent`) with the cluster's readers and writers replaced by
fakes: every way a reconcile can end writes exactly one status, the one its decision
returned (a removal also writes ``Removing`` before it deletes anything).
"""

from __future__ import annotations

import copy
from typing import Any

import kopf
import pytest
from kubernetes.client.exceptions import ApiException

from addon_agent.io import namespaces
from addon_agent.io.applier import NotReady
from addon_agent.io.bundle_source import BundleError
from addon_agent.io.inventory import Ref
from addon_agent.main import parse
from addon_agent.pure import decisions, ownership, planning, removal
from addon_agent.pure.decisions import Failure, Outcome, Reading, Route, Upgrade
from addon_agent.shell.platform import REMOVAL_RECHECK, WEBHOOK_RECHECK, Platforms
from addon_agent.stacks import KSERVE, UnknownVersion
from addon_api import constants as c
from addon_api.reasons import ServingPlatformPhase as Phase
from addon_api.reasons import ServingPlatformReason as Reason
from addon_api.spoke import ServingPlatformSpec, ServingPlatformStatus

Obj = dict[str, Any]
READING = Reading("default", 3, [])


def _spec(**fields: Any) -> ServingPlatformSpec:
    return ServingPlatformSpec.model_validate({"platform": "KServe", **fields})


def _reason(status: ServingPlatformStatus) -> str:
    return next(str(x.reason) for x in status.conditions if x.type == "Available")


def _ready_deployment(name: str, available: bool = True) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "kserve", "generation": 1},
            "spec": {"replicas": 1},
            "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                       "conditions": [{"type": "Available",
                                       "status": "True" if available else "False"},
                                      {"type": "Progressing", "status": "True",
                                       "reason": "NewReplicaSetAvailable"}]}}


def _crd(name: str) -> Obj:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "status": {"conditions": [{"type": "Established", "status": "True"}]}}


def _plan() -> planning.Plan:
    return planning.Plan(stack=KSERVE, objects=[
        _crd("inferenceservices.serving.kserve.io"),
        _ready_deployment(KSERVE.controller),
    ])


# The pure decisions -------------------------------------------------------------------------


def test_reading_of_a_body() -> None:
    body = {"metadata": {"name": "p", "generation": 7},
            "status": {"conditions": [{"type": "Available", "status": "True"}]}}
    assert Reading.of(body) == Reading("p", 7, [{"type": "Available", "status": "True"}])
    assert Reading.of({"metadata": {"name": "p"}}) == Reading("p", None, [])


def test_another_platform_owns_the_stack() -> None:
    assert decisions.another_owns(READING, "default") is None
    status = decisions.another_owns(READING, "older")
    assert status is not None
    assert (status.phase, _reason(status)) == (Phase.DEGRADED, "AnotherPlatformOwns")
    assert status.message == "ServingPlatform older manages the serving stack of this cluster"
    assert status.observed_generation == 3


@pytest.mark.parametrize(("state", "denied", "way"), [
    ("Managed", None, Route.MANAGED),
    ("Unmanaged", None, Route.UNMANAGED),
    ("Removed", None, Route.REMOVE),
    # a removal is never refused
    ("Removed", (Reason.DEV_FLAGS_NOT_ALLOWED, "no"), Route.REMOVE),
])
def test_route(state: str, denied: tuple[Reason, str] | None, way: Route) -> None:
    assert decisions.route(READING, _spec(managementState=state), denied) is way


@pytest.mark.parametrize("state", ["Managed", "Unmanaged"])
def test_route_refused_by_the_agents_policy(state: str) -> None:
    status = decisions.route(READING, _spec(managementState=state),
                             (Reason.NAMESPACE_NOT_ALLOWED, "kube-system: denied"))
    assert isinstance(status, ServingPlatformStatus)
    assert (status.phase, _reason(status), status.message) == (
        Phase.DEGRADED, "NamespaceNotAllowed", "kube-system: denied")


def test_owned_elsewhere() -> None:
    ours = ownership.Installation(KSERVE, controllers=(_ready_deployment(KSERVE.controller),))
    assert decisions.owned_elsewhere(READING, ours) is None
    theirs = copy.deepcopy(_ready_deployment(KSERVE.controller))
    theirs["metadata"]["labels"] = {c.LABEL_MANAGED_BY: "opendatahub-operator"}
    status = decisions.owned_elsewhere(READING, ownership.Installation(
        KSERVE, controllers=(theirs,)))
    assert status is not None
    assert (status.phase, _reason(status)) == (Phase.DEGRADED, "OwnedByAnotherOperator")
    assert "opendatahub-operator" in status.message


@pytest.mark.parametrize(("failure", "phase", "reason"), [
    (Failure.VERSION_NOT_CARRIED, Phase.DEGRADED, "VersionNotCarried"),
    (Failure.BUNDLE_ERROR, Phase.DEGRADED, "BundleError"),
    (Failure.NOT_READY, Phase.INSTALLING, "Installing"),
    (Failure.APPLY_FAILED, Phase.DEGRADED, "ApplyFailed"),
])
def test_failed(failure: Failure, phase: Phase, reason: str) -> None:
    status = decisions.failed(READING, failure, "what happened")
    assert (status.phase, _reason(status), status.message) == (phase, reason, "what happened")
    assert "stackVersion" not in status.to_patch()  # the version last reported stays


def test_apply_failed_message() -> None:
    assert decisions.apply_failed_message(403, "Forbidden", "x" * 500) == (
        "apply failed: 403 Forbidden: " + "x" * 400)


def test_upgrading() -> None:
    status = decisions.upgrading(
        READING, Upgrade("v0.17.0", "v0.20.0", "upgrading KServe"),
        {KSERVE.controller: _ready_deployment(KSERVE.controller)})
    assert (status.phase, _reason(status)) == (Phase.UPGRADING, "UpgradingControllers")
    assert (status.stack_version, status.target_version) == ("v0.17.0", "v0.20.0")
    assert (status.ready_components, status.total_components) == (1, 1)


def test_managed_available_installing_and_kept_namespaces() -> None:
    the_plan = _plan()
    crds = {"inferenceservices.serving.kserve.io": _crd("inferenceservices.serving.kserve.io")}
    up = decisions.managed(READING, the_plan,
                           {KSERVE.controller: _ready_deployment(KSERVE.controller)}, crds,
                           {"team-a": ["PersistentVolumeClaim team-a/data"]})
    assert (up.phase, _reason(up), up.stack_version) == (
        Phase.AVAILABLE, "AllComponentsAvailable", KSERVE.version)
    assert [k.name for k in up.kept_namespaces] == ["team-a"]
    assert up.leftovers.startswith("namespace team-a kept")
    waiting = decisions.managed(READING, the_plan, {KSERVE.controller: None}, crds, {})
    assert (waiting.phase, _reason(waiting)) == (Phase.INSTALLING, "Installing")
    assert (waiting.kept_namespaces, waiting.leftovers) == ([], "")  # cleared by the patch


def test_a_refreshed_status_is_written_only_when_more_than_its_conditions_changed() -> None:
    the_plan = _plan()
    crds = {n: _crd(n) for n in the_plan.crd_names()}
    up = decisions.managed(READING, the_plan,
                           {KSERVE.controller: _ready_deployment(KSERVE.controller)}, crds, {})
    assert decisions.refreshed(up, None)
    current = up.to_patch()
    assert not decisions.refreshed(up, current)
    assert not decisions.refreshed(up, {**current, "conditions": []})
    down = decisions.managed(READING, the_plan, {
        KSERVE.controller: _ready_deployment(KSERVE.controller, available=False)}, crds, {})
    assert decisions.refreshed(down, current)


def test_unmanaged_without_a_stack() -> None:
    check = decisions.unmanaged(READING, ownership.Installation(KSERVE), {})
    assert (check.status.phase, _reason(check.status)) == (Phase.DEGRADED, "StackNotFound")
    assert check.status.leftovers == ""


def test_removal_decisions() -> None:
    held = decisions.removal_held(READING, removal.Hold(
        Phase.REMOVAL_BLOCKED, removal.REASON_FOREIGN, "1 InferenceService"))
    assert (held.phase, _reason(held)) == (Phase.REMOVAL_BLOCKED, "ForeignObjectsPresent")
    going = decisions.removing(READING)
    assert (going.phase, _reason(going), going.message) == (
        Phase.REMOVING, "Removing", "uninstalling the stack")
    waiting = decisions.removal_waiting(READING, [("ConfigMap", f"c{i}") for i in range(12)])
    assert waiting.message == "waiting for removal of " + ", ".join(
        f"ConfigMap c{i}" for i in range(10))
    gone = decisions.removed(READING, removal.Leftovers())
    assert (gone.phase, _reason(gone), gone.message) == (
        Phase.REMOVED, "Removed", "the stack is not installed")
    left = decisions.removed(READING, removal.Leftovers(
        crds=frozenset({"x.example.com"}), message="CRD x.example.com kept"))
    assert (left.phase, _reason(left), left.message) == (
        Phase.REMOVED, "RemovedWithLeftovers", "CRD x.example.com kept")


# The reconcile: one status per way it can end -------------------------------------------------


class _Kube:
    """The platform list and the status writes; nothing else is asked of it here."""

    def __init__(self, *platforms: Obj) -> None:
        self.platforms = list(platforms)
        self.written: list[tuple[str, Obj]] = []

    def list(self, api_version: str, kind: str, **_: Any) -> list[Obj]:
        assert kind == c.KIND_SERVING_PLATFORM
        return self.platforms

    def patch_status(self, api_version: str, kind: str, name: str, status: Obj,
                     namespace: str | None = None) -> None:
        self.written.append((name, status))
        for platform in self.platforms:
            if platform["metadata"]["name"] == name:
                platform["status"] = status

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        if kind == "ConfigMap":  # the manager's namespace policy: open
            assert (name, namespace) == (c.NAMESPACE_POLICY_CONFIGMAP, "agent-ns")
            return {"data": {c.POLICY_KEY_TARGETS: "*=*"}}
        assert kind == c.KIND_SERVING_PLATFORM
        return next((copy.deepcopy(p) for p in self.platforms if p["metadata"]["name"] == name),
                    None)

    def metadata(self, api_version: str, kind: str, name: str,
                 namespace: str | None = None) -> Obj | None:
        return None  # the Deployment is gone


class _Planner:
    def __init__(self, outcome: Exception | None) -> None:
        self.outcome = outcome

    def build_plan(self, spec: ServingPlatformSpec) -> planning.Plan:
        if self.outcome is not None:
            raise self.outcome
        return _plan()


class _Observer:
    def __init__(self, installation: ownership.Installation, available: bool) -> None:
        self.installation = installation
        self.available = available

    def find_installation(self, stack: Any) -> ownership.Installation:
        return self.installation

    def controllers(self, the_plan: planning.Plan) -> dict[str, Obj | None]:
        return {KSERVE.controller: _ready_deployment(KSERVE.controller, self.available)}

    def crds_of(self, the_plan: planning.Plan) -> dict[str, Obj | None]:
        return {n: _crd(n) for n in the_plan.crd_names()}

    def components(self, controllers: list[tuple[str, str]]) -> dict[str, bool]:
        return {name: self.available for _, name in controllers}

    def stack_instances(self, refs: list[Ref]) -> list[removal.Instance]:
        return [removal.Instance("InferenceService", "models", "iris",
                                 removal.ISVC_CRD)] if self.installation.crd else []

    def namespaces_to_delete(self, refs: list[Ref]) -> list[str]:
        return []


class _Applier:
    def __init__(self, outcome: Exception | Upgrade | None, remaining: list[Ref],
                 webhook_unreachable: bool = False) -> None:
        self.outcome = outcome
        self.remaining = remaining
        self.webhook_unreachable = webhook_unreachable
        self.installed = 0
        self.redeployed: list[str] = []

    def install(self, the_plan: planning.Plan) -> Upgrade | None:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        self.installed += 1
        if self.webhook_unreachable:
            the_plan.runtime_errors.append("ClusterServingRuntime x: failed calling webhook")
            the_plan.webhook_unreachable = True
        return self.outcome

    def uninstall(self, keep: frozenset[str] = frozenset()) -> list[Ref]:
        return self.remaining

    def redeploy(self, the_plan: planning.Plan, name: str) -> None:
        self.redeployed.append(name)


class _Inventory:
    def load(self) -> list[Ref]:
        return [Ref("v1", "ConfigMap", "kserve", "inferenceservice-config")]


def _refused_write() -> ApiException:
    err = ApiException(status=409, reason="Conflict")
    err.body = "the object has been modified"
    return err


def _agent(kube: _Kube, *, plan: Exception | None = None,
           install: Exception | Upgrade | None = None, available: bool = True,
           installation: ownership.Installation | None = None,
           remaining: list[Ref] | None = None, flags: tuple[str, ...] = (),
           webhook_unreachable: bool = False) -> Platforms:
    return Platforms(
        parse(["--namespace=agent-ns", *flags]),
        kube,  # type: ignore[arg-type]
        _Planner(plan),  # type: ignore[arg-type]
        _Observer(installation or ownership.Installation(KSERVE), available),  # type: ignore[arg-type]
        _Applier(install, remaining or [], webhook_unreachable),  # type: ignore[arg-type]
        _Inventory(),  # type: ignore[arg-type]
    )


def _platform(name: str = "default", created: str = "2026-01-01T00:00:00Z", **spec: Any) -> Obj:
    return {"apiVersion": f"{c.GROUP}/{c.VERSION}", "kind": c.KIND_SERVING_PLATFORM,
            "metadata": {"name": name, "generation": 2, "creationTimestamp": created},
            "spec": {"platform": "KServe", **spec}}


@pytest.fixture(autouse=True)
def _no_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(namespaces, "reconcile", lambda *_: {})
    monkeypatch.setattr(namespaces, "created_by_agent", lambda *_: [])
    monkeypatch.setattr(namespaces, "kept", lambda *_: [])
    monkeypatch.setattr(namespaces, "contents", lambda *_: {})
    monkeypatch.setattr(namespaces, "disable_all", lambda *_, **__: None)


def _written(kube: _Kube) -> list[tuple[str, str]]:
    return [(s["phase"], next(x["reason"] for x in s["conditions"] if x["type"] == "Available"))
            for _, s in kube.written]


MARKED = copy.deepcopy(_ready_deployment(KSERVE.controller))
MARKED["metadata"]["labels"] = {c.LABEL_MANAGED_BY: "opendatahub-operator",
                                "app.kubernetes.io/version": KSERVE.version}


@pytest.mark.parametrize(("spec", "setup", "written"), [
    ({}, {}, [("Available", "AllComponentsAvailable")]),
    ({}, {"available": False}, [("Degraded", "ComponentsUnavailable")]),
    ({}, {"plan": UnknownVersion(KSERVE, "v9.9.9")}, [("Degraded", "VersionNotCarried")]),
    ({}, {"plan": BundleError("no bundle")}, [("Degraded", "BundleError")]),
    ({}, {"install": NotReady("CRDs not Established: x")}, [("Installing", "Installing")]),
    ({}, {"install": Upgrade("v0.17.0", "v0.20.0", "upgrading")},
     [("Upgrading", "UpgradingControllers")]),
    ({}, {"installation": ownership.Installation(KSERVE, controllers=(MARKED,))},
     [("Degraded", "OwnedByAnotherOperator")]),
    ({"devFlags": {"images": {"x": "y"}}}, {}, [("Degraded", "DevFlagsNotAllowed")]),
    ({"managementState": "Unmanaged"}, {}, [("Degraded", "StackNotFound")]),
    ({"managementState": "Unmanaged"},
     {"installation": ownership.Installation(KSERVE, crd=_crd(removal.ISVC_CRD),
                                             controllers=(MARKED,))},
     [("Available", "UsingExistingStack")]),
    ({"managementState": "Removed"}, {}, [("Removing", "Removing"), ("Removed", "Removed")]),
    ({"managementState": "Removed"},
     {"installation": ownership.Installation(KSERVE, crd=_crd(removal.ISVC_CRD))},
     [("RemovalBlocked", "ForeignObjectsPresent")]),
])
def test_each_way_a_reconcile_ends_writes_its_one_status(
    spec: Obj, setup: dict[str, Any], written: list[tuple[str, str]],
) -> None:
    kube = _Kube(_platform(**spec))
    agent = _agent(kube, **setup)
    agent.reconcile(kopf.Body(_platform(**spec)))  # type: ignore[arg-type]
    assert _written(kube) == written
    assert {name for name, _ in kube.written} == {"default"}


def _due(agent: Platforms) -> dict[str, float]:
    """The reconciles :meth:`Platforms.again_soon` scheduled, by name: their delays (the
    timers are cancelled and forgotten: the test runs what they would run itself)."""
    due = {name: timer.interval for name, timer in agent.due_again.items()}
    for timer in agent.due_again.values():
        timer.cancel()
    agent.due_again.clear()
    return due


def test_what_ends_by_itself_is_reconciled_again_soon_and_what_waits_for_someone_is_not() -> None:
    """A removal whose deletes are under way, and runtimes the webhook could not be asked
    about, are reconciled again within seconds (at most a resync), not at the next resync; a
    removal held by someone else's objects, and a finished one, wait for an event or the
    resync."""
    removed = _platform(managementState="Removed")
    left = [Ref("v1", "ConfigMap", "kserve", "inferenceservice-config")]
    kube = _Kube(removed)
    agent = _agent(kube, remaining=left)
    agent.reconcile(kopf.Body(removed))  # type: ignore[arg-type]
    agent.reconcile(kopf.Body(removed))  # type: ignore[arg-type]  # one due is kept
    assert _written(kube) == [("Removing", "Removing")] * 4
    assert _due(agent) == {"default": REMOVAL_RECHECK} and REMOVAL_RECHECK == 3.0
    # Still under way when looked at again: twice as long for each reconcile in a row that
    # found it so (the two above counted), at most a resync.
    for delay in (12, 24, 48, 60, 60):
        agent.reconcile_again("default")
        assert _due(agent) == {"default": delay}
    # What the timer runs: the platform as it is now; the deletes are done.
    agent.applier.remaining = []  # type: ignore[attr-defined]
    agent.reconcile_again("default")
    assert _written(kube)[-1] == ("Removed", "Removed") and _due(agent) == {}
    assert agent.again_streak == {}  # ended: the next one starts at 3 s again
    short = _agent(_Kube(removed), remaining=left, flags=("--resync-seconds=2",))
    short.reconcile(kopf.Body(removed))  # type: ignore[arg-type]
    assert _due(short) == {"default": 2}
    kube = _Kube(removed)
    held = _agent(kube, installation=ownership.Installation(KSERVE, crd=_crd(removal.ISVC_CRD)))
    held.reconcile(kopf.Body(removed))  # type: ignore[arg-type]
    assert _written(kube) == [("RemovalBlocked", "ForeignObjectsPresent")] and _due(held) == {}
    kube = _Kube(_platform())
    unreachable = _agent(kube, webhook_unreachable=True)
    unreachable.reconcile(kopf.Body(_platform()))  # type: ignore[arg-type]
    assert _due(unreachable) == {"default": WEBHOOK_RECHECK} and WEBHOOK_RECHECK == 10
    served = _agent(_Kube(_platform()))
    served.reconcile(kopf.Body(_platform()))  # type: ignore[arg-type]
    assert _due(served) == {}


def test_a_platform_that_does_not_own_the_stack_only_says_so() -> None:
    kube = _Kube(_platform("older", "2025-01-01T00:00:00Z"), _platform())
    agent = _agent(kube)
    agent.reconcile(kopf.Body(_platform()))  # type: ignore[arg-type]
    assert _written(kube) == [("Degraded", "AnotherPlatformOwns")]
    assert agent.applier.installed == 0  # type: ignore[attr-defined]


def test_a_refused_write_is_reported_then_retried_by_kopf() -> None:
    kube = _Kube(_platform())
    agent = _agent(kube, install=_refused_write())
    with pytest.raises(kopf.TemporaryError, match="apply failed: 409 Conflict"):
        agent.reconcile(kopf.Body(_platform()))  # type: ignore[arg-type]
    assert _written(kube) == [("Degraded", "ApplyFailed")]


def test_a_deleted_platform_is_not_reconciled_and_a_deletion_waits_for_the_removal() -> None:
    kube = _Kube(_platform())
    agent = _agent(kube)
    deleting = {**_platform(), "metadata": {**_platform()["metadata"],
                                            "deletionTimestamp": "2026-01-02T00:00:00Z"}}
    agent.reconcile(kopf.Body(deleting))  # type: ignore[arg-type]
    assert kube.written == []
    agent = _agent(kube, remaining=[Ref("v1", "ConfigMap", "kserve", "inferenceservice-config")])
    with pytest.raises(kopf.TemporaryError, match="stack not removed yet") as waiting:
        agent.delete(kopf.Body(deleting))  # type: ignore[arg-type]
    assert waiting.value.delay == REMOVAL_RECHECK
    assert _written(kube) == [("Removing", "Removing"), ("Removing", "Removing")]
    kube.written.clear()
    agent = _agent(kube)
    agent.delete(kopf.Body(deleting))  # type: ignore[arg-type]
    assert _written(kube) == [("Removing", "Removing"), ("Removed", "Removed")]


def test_an_outcome_without_a_status_writes_nothing_but_runs_what_follows() -> None:
    kube = _Kube()
    agent = _agent(kube)
    ran: list[bool] = []
    agent.finish(READING, Outcome(None, after=lambda: ran.append(True)))
    assert (kube.written, ran) == ([], [True])


def test_a_deployments_event_refreshes_the_status_only_when_more_than_conditions_change() -> None:
    kube = _Kube(_platform())
    agent = _agent(kube)
    agent.reconcile(kopf.Body(_platform()))  # type: ignore[arg-type]
    assert _written(kube) == [("Available", "AllComponentsAvailable")]
    agent.deployment_changed("kserve", KSERVE.controller, deleted=False)
    assert len(kube.written) == 1  # nothing but the conditions' times would change
    agent.observer.available = False  # type: ignore[attr-defined]
    agent.deployment_changed("kserve", KSERVE.controller, deleted=True)
    assert agent.applier.redeployed == [KSERVE.controller]  # type: ignore[attr-defined]
    assert _written(kube)[1:] == [("Degraded", "ComponentsUnavailable")]
    agent.deployment_changed("kserve", "someone-elses", deleted=True)  # not the plan's
    assert len(kube.written) == 2
