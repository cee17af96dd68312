"""The truth table of issue 13: what the hub says about each spoke situation.

One cluster, c1, serves a model: the ModelServing ``kserve`` (platform KServe), the
StorageConnection ``s3`` and the MultiClusterInferenceService ``iris`` that reads through
it. Each row starts from that fleet healthy, then puts c1 in one situation: the spoke's
objects get the status the agent (``addon_agent.pure.status``, ``addon_agent.pure.removal``,
``addon_agent.io.delivery``) or KServe would write, the work agent feeds it back through the
rules the manager renders (``addon_manager.kinds.render``) or reports a refused apply the way
OCM does, and ``addon_manager.facts.records.parse_work`` reads the ManifestWork. The real
:class:`~addon_manager.shell.reconcile.Reconciler` then reconciles the three intents, and each
intent's entry for c1 (phase, reason, ready, a message fragment) and its own phase and Ready
condition are compared with the row.

Decisions the table records:

- A stack whose controller is missing makes the ModelServing Degraded; the
  MultiClusterInferenceService keeps what its InferenceService reports (Ready): the
  predictor's pods keep serving without the controller, and the stack's fault is shown once,
  where it is.
- The hub refusing to remove a stack (IntentsOnCluster) keeps the stack, so the model on it
  stays Ready; a removal the spoke already acts on (Removing, RemovalBlocked) makes it not
  Ready (PlatformRemoving), whatever its InferenceService says.
- An object of the stack's bundle that exists and is someone else's (not taken over by the
  agent) makes the ModelServing Degraded, never Ready; the model keeps what its
  InferenceService reports. A user's object the removal would delete blocks it like a
  foreign InferenceService (RemovalBlocked, naming kinds and counts).
- A StorageConnection that cannot be delivered again (a key gone from the Secret, a sealed
  payload that does not open) is Failed with the precise reason; the model that was already
  given the credentials keeps serving and stays Ready.
"""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import pytest

from addon_agent.pure import removal
from addon_agent.pure import status as agent_status
from addon_api import constants as c
from addon_api import sealing
from addon_api.reasons import SealedReason
from addon_manager.facts import naming
from addon_manager.kinds.registry import parse as parse_work
from addon_manager.shell.reconcile import Reconciler
from testbed.support.fake_hub import OPEN_POLICY, FakeHub
from testbed.support.sealing import memory_sealer

MSV, SC, MCIS = c.KIND_MODEL_SERVING, c.KIND_STORAGE_CONNECTION, c.KIND_INFERENCE_SERVICE
CONTROLLER = "kserve-controller-manager"
MODEL_ISVC = removal.Instance(
    kind="InferenceService", namespace="models", name="iris", crd="", by_addon=True,
    own=False, finalizers=True, terminating=False,
)
FOREIGN_ISVC = replace(MODEL_ISVC, name="other", by_addon=False)
USERS_RUNTIME = removal.Instance(
    kind="ServingRuntime", namespace="team", name="theirs",
    crd="servingruntimes.serving.kserve.io", crd_ours=True,
)


def _bodies() -> dict[str, dict[str, Any]]:
    meta = {"namespace": "ns", "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"}
    return {
        MSV: {"apiVersion": c.API_VERSION, "kind": MSV,
              "metadata": {**meta, "name": "kserve"},
              "spec": {"platform": "KServe", "placementRef": {"name": "stack"}}},
        SC: {"apiVersion": c.API_VERSION, "kind": SC, "metadata": {**meta, "name": "s3"},
             "spec": {"placementRef": {"name": "p"}, "type": "s3",
                      "targetNamespaces": ["models"], "s3": {"bucket": "b"},
                      "secretRef": {"name": "creds", "keys": {
                          "access_key_id": "AWS_ACCESS_KEY_ID",
                          "secret_access_key": "AWS_SECRET_ACCESS_KEY"}}}},
        MCIS: {"apiVersion": c.API_VERSION, "kind": MCIS, "metadata": {**meta, "name": "iris"},
               "spec": {"placementRef": {"name": "p"}, "targetNamespace": "models",
                        "storageConnections": ["s3"],
                        "template": {"predictor": {"model": {
                            "modelFormat": {"name": "sklearn"},
                            "storageUri": "s3://b/iris"}}}}},
    }


# What the spoke's objects say ---------------------------------------------------------------


def _platform(
    phase: str = "Available", message: str = "", conflicts: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A ServingPlatform's status as the agent writes it (``Installing``: the controller's
    Deployment is gone and the agent re-creates it; ``conflicts``: objects of the stack that
    are someone else's)."""
    if phase in ("Available", "Degraded", "Installing"):
        deployment: dict[str, Any] | None = {
            "metadata": {"generation": 1},
            "status": {"observedGeneration": 1, "conditions": [
                {"type": "Available", "status": str(phase == "Available")},
                {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"},
            ]},
        }
        if phase == "Installing":
            deployment = None
        crd = {"status": {"conditions": [{"type": "Established", "status": "True"}]}}
        return {"status": agent_status.platform_status(
            generation=1, version="v0.15.2", deployments={CONTROLLER: deployment},
            crds={"inferenceservices.serving.kserve.io": crd}, warnings=[],
            conflicts=conflicts).to_patch()}
    return {"status": agent_status.simple_status(phase, phase, message, 1).to_patch()}


def _held(*instances: removal.Instance) -> dict[str, Any]:
    """The ServingPlatform of an uninstall the agent holds back (see addon_agent.pure.removal)."""
    held = removal.hold(instances, force=False)
    assert held is not None
    return {
        "status": agent_status.simple_status(held.phase, held.reason, held.message, 1).to_patch()
    }


def _sealed(phase: str, reason: str, message: str) -> dict[str, Any]:
    """A SealedStorageConnection's status as the agent writes it (SealedConnections.deliver)."""
    status = agent_status.sealed_status(SealedReason(reason), message, 1)
    assert status.phase == phase
    return {"status": status.to_patch()}


def _isvc(ready: bool = True) -> dict[str, Any]:
    """An InferenceService's status as KServe writes it."""
    return {"status": {
        "url": "http://iris.models.example.com",
        "conditions": [{"type": "Ready", "status": str(ready)},
                       {"type": "PredictorReady", "status": str(ready)}],
        "modelStatus": {"transitionStatus": "UpToDate",
                        "states": {"activeModelState": "Loaded"}}}}


_COND = re.compile(r'^\.status\.conditions\[\?\(@\.type=="(\w+)"\)\]\.(\w+)$')


def _follow(obj: dict[str, Any], path: str) -> Any:
    """The value at one of the JSONPaths the manager's feedback rules use."""
    match = _COND.match(path)
    if match:
        conds = (obj.get("status") or {}).get("conditions") or []
        found: dict[str, Any] = next((x for x in conds if x.get("type") == match[1]), {})
        return found.get(match[2])
    value: Any = obj
    for part in path.lstrip(".").split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _feedback(rules: list[dict[str, Any]], obj: dict[str, Any]) -> list[dict[str, Any]]:
    """What the work agent feeds back: each rule's value, typed; absent values are left out."""
    out = []
    for rule in rules:
        for jp in rule["jsonPaths"]:
            value = _follow(obj, jp["path"])
            if isinstance(value, bool):
                out.append({"name": jp["name"], "fieldValue": {"type": "Boolean",
                                                               "boolean": value}})
            elif isinstance(value, int):
                out.append({"name": jp["name"], "fieldValue": {"type": "Integer",
                                                               "integer": value}})
            elif isinstance(value, str):
                out.append({"name": jp["name"], "fieldValue": {"type": "String",
                                                               "string": value}})
    return out


# The fleet ----------------------------------------------------------------------------------


@dataclass
class Fleet:
    """The hub with c1 and the three intents, and what c1 reports."""

    hub: FakeHub
    bodies: dict[str, dict[str, Any]]

    def reconcile(self, kind: str) -> None:
        """One reconcile of the intent, from the status it last wrote (as kopf would)."""
        body = copy.deepcopy(self.bodies[kind])
        name = body["metadata"]["name"]
        if name in self.hub.statuses:
            body["status"] = self.hub.statuses[name]
        asyncio.run(Reconciler(self.hub, self.hub, memory_sealer(),
                               admin=OPEN_POLICY).reconcile(kind, body))

    def key(self, kind: str) -> tuple[str, str]:
        """The (cluster, name) of the intent's work on c1."""
        return "c1", naming.work_name(kind, "ns", self.bodies[kind]["metadata"]["name"])

    def report(self, kind: str, spoke: dict[str, Any] | None = None, *,
               refused: str = "", deleting: bool = False) -> None:
        """The ManifestWork as OCM shows it: the spoke object's feedback, or the refusal."""
        work = copy.deepcopy(self.hub.bodies[self.key(kind)])
        manifest = work["spec"]["workload"]["manifests"][0]
        rules = work["spec"]["manifestConfigs"][0]["feedbackRules"]
        ok = not refused
        applied = {"type": "Applied", "status": str(ok),
                   "reason": "AppliedManifestComplete" if ok else "AppliedManifestFailed",
                   "message": "Apply manifest complete" if ok else refused}
        work["status"] = {
            "conditions": [
                {"type": "Applied", "status": str(ok),
                 "reason": "AppliedManifestWorkComplete" if ok else "AppliedManifestWorkFailed",
                 "message": "Apply manifest work complete" if ok
                 else "Failed to apply manifest work"},
                {"type": "Available", "status": "True", "reason": "ResourcesAvailable"},
            ],
            "resourceStatus": {"manifests": [{
                "resourceMeta": {"kind": manifest["kind"],
                                 "name": manifest["metadata"]["name"],
                                 "namespace": manifest["metadata"].get("namespace", "")},
                "conditions": [applied],
                "statusFeedback": {"values": _feedback(rules, spoke or {})},
            }]},
        }
        if deleting:
            work["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
        fact = parse_work(work)
        assert fact is not None
        self.hub.works[self.key(kind)] = fact


def healthy_fleet() -> Fleet:
    """c1 serving: stack Available, credentials delivered, model Ready."""
    hub = FakeHub(
        placements={("ns", "stack"): frozenset({"c1"}), ("ns", "p"): frozenset({"c1"})},
        secrets={("ns", "creds"): {"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK"}},
    )
    fleet = Fleet(hub, _bodies())
    fleet.reconcile(MSV)
    fleet.report(MSV, _platform("Available"))
    fleet.reconcile(SC)  # asks for the agent's key
    key = sealing.public_key_of(sealing.generate_private_key())
    ident = ("c1", naming.IDENTITY_WORK_NAME)
    hub.works[ident] = replace(hub.works[ident], feedback=(
        (c.IDENTITY_KEY_ID, sealing.key_id(key)), (c.IDENTITY_PUBLIC_KEY, key)))
    fleet.reconcile(SC)
    fleet.report(SC, _sealed("Delivered", "Delivered", "entry delivered to models"))
    fleet.reconcile(MCIS)
    fleet.report(MCIS, _isvc())
    return fleet


# The situations -----------------------------------------------------------------------------


def healthy(fleet: Fleet) -> None:
    """Nothing happens."""


def _removed_sent(fleet: Fleet) -> None:
    """managementState Removed, sent to c1 before the model's work was (the race the
    ordering allows): the spoke acts on it while the InferenceService is there."""
    fleet.bodies[MSV]["spec"]["managementState"] = "Removed"
    model = fleet.hub.works.pop(fleet.key(MCIS))
    fleet.reconcile(MSV)
    fleet.hub.works[fleet.key(MCIS)] = model


def stack_removing(fleet: Fleet) -> None:
    """managementState Removed: the agent waits for the add-on's InferenceService."""
    _removed_sent(fleet)
    fleet.report(MSV, _held(MODEL_ISVC))


def stack_work_deleting(fleet: Fleet) -> None:
    """The ModelServing no longer selects c1: its work is being deleted, the agent waits."""
    fleet.hub.placements[("ns", "stack")] = frozenset()
    fleet.report(MSV, _held(MODEL_ISVC), deleting=True)


def removal_blocked(fleet: Fleet) -> None:
    """managementState Removed: an InferenceService the add-on did not create blocks it."""
    _removed_sent(fleet)
    fleet.report(MSV, _held(FOREIGN_ISVC, MODEL_ISVC))


def removal_blocked_by_users_runtime(fleet: Fleet) -> None:
    """managementState Removed: a ServingRuntime the add-on did not create would go with the
    CRD the agent installed, so it blocks the removal."""
    _removed_sent(fleet)
    fleet.report(MSV, _held(USERS_RUNTIME))


def stack_object_conflict(fleet: Fleet) -> None:
    """An object of the stack's bundle exists and is someone else's: not taken over."""
    fleet.report(MSV, _platform("Available", conflicts=("ClusterRole kserve-proxy-role",)))


def removal_blocked_deleting(fleet: Fleet) -> None:
    """The work is being deleted and the agent's uninstall is blocked the same way."""
    fleet.hub.placements[("ns", "stack")] = frozenset()
    fleet.report(MSV, _held(FOREIGN_ISVC, MODEL_ISVC), deleting=True)


def removal_refused(fleet: Fleet) -> None:
    """managementState Removed while the model's work is on c1: the hub does not send it."""
    fleet.bodies[MSV]["spec"]["managementState"] = "Removed"


def controller_missing(fleet: Fleet) -> None:
    """The stack's controller Deployment is not available (past its progress deadline)."""
    fleet.report(MSV, _platform("Degraded"))


def controller_deleted(fleet: Fleet) -> None:
    """The controller's Deployment was deleted: the agent re-creates it, still installing."""
    fleet.report(MSV, _platform("Installing"))


def isvc_terminating(fleet: Fleet) -> None:
    """The model's work is being deleted: OCM deletes the InferenceService on c1."""
    fleet.report(MCIS, _isvc(), deleting=True)


REFUSED_FIELD = (
    "failed to create typed patch object (models/iris; serving.kserve.io/v1beta1, "
    "Kind=InferenceService): .spec.predictor.model.storageUrl: field not declared in schema"
)
REFUSED_WEBHOOK = (
    'Internal error occurred: failed calling webhook "inferenceservice.kserve-webhook-server'
    '.validator": failed to call webhook: Post "https://kserve-webhook-server-service.kserve'
    '.svc:443/validate-serving-kserve-io-v1beta1-inferenceservice?timeout=10s": dial tcp '
    "10.96.12.7:443: connect: connection refused"
)


def refused_field(fleet: Fleet) -> None:
    """The spoke's API server refuses the InferenceService, naming the field."""
    fleet.report(MCIS, refused=REFUSED_FIELD)


def refused_webhook(fleet: Fleet) -> None:
    """The stack's admission webhook does not serve yet: the apply is refused for now."""
    fleet.report(MCIS, refused=REFUSED_WEBHOOK)


def key_missing(fleet: Fleet) -> None:
    """The Secret loses a key the StorageConnection names."""
    del fleet.hub.secrets[("ns", "creds")]["AWS_SECRET_ACCESS_KEY"]


def decrypt_failed(fleet: Fleet) -> None:
    """The agent cannot open the sealed payload (delivery.DeliveryError DecryptFailed)."""
    fleet.report(SC, _sealed("Failed", "DecryptFailed",
                             "payload does not decrypt with this agent's key"))


# The table ----------------------------------------------------------------------------------


class Hub(NamedTuple):
    """What the hub says of one intent: c1's entry, then the intent's phase and Ready."""

    phase: str
    reason: str
    ready: bool
    message: str
    """A fragment of the entry's message."""
    intent_phase: str
    intent_ready: str
    """The Ready condition: ``status reason``."""


OK = "True AllClustersReady"
NOT_ALL = "False NotAllClustersReady"
STACK_OK = Hub("Available", "Available", True, "v0.15.2: all components available", "Ready", OK)
STORAGE_OK = Hub("Delivered", "Delivered", True, "entry delivered to models", "Ready", OK)
MODEL_OK = Hub("Ready", "Ready", True, "", "Ready", OK)
WAITING_FOR_ISVC = "waiting for InferenceServices to be deleted: models/iris"
FOREIGN = "1 InferenceService not created by the add-on remain"

TABLE = [
    # situation                ModelServing kserve / StorageConnection s3 / MCIS iris
    pytest.param(healthy, STACK_OK, STORAGE_OK, MODEL_OK, id="healthy"),
    pytest.param(
        stack_removing,
        Hub("Removing", "Removing", False, WAITING_FOR_ISVC, "Progressing", "False Removing"),
        STORAGE_OK,
        Hub("Degraded", "PlatformRemoving", False, "reports Removing", "Degraded", NOT_ALL),
        id="stack-removing"),
    pytest.param(
        stack_work_deleting,
        Hub("Removing", "WorkDeleting", False, WAITING_FOR_ISVC, "Progressing",
            "False Removing"),
        STORAGE_OK,
        Hub("Degraded", "PlatformRemoving", False, "is being removed", "Degraded", NOT_ALL),
        id="stack-work-deleting"),
    pytest.param(
        removal_blocked,
        Hub("RemovalBlocked", "RemovalBlocked", False, FOREIGN, "Degraded",
            "False RemovalBlocked"),
        STORAGE_OK,
        Hub("Degraded", "PlatformRemoving", False, "reports RemovalBlocked", "Degraded",
            NOT_ALL),
        id="removal-blocked-on-spoke"),
    pytest.param(
        removal_blocked_by_users_runtime,
        Hub("RemovalBlocked", "RemovalBlocked", False,
            "1 ServingRuntime not created by the add-on remain", "Degraded",
            "False RemovalBlocked"),
        STORAGE_OK,
        Hub("Degraded", "PlatformRemoving", False, "reports RemovalBlocked", "Degraded",
            NOT_ALL),
        id="removal-blocked-by-users-runtime"),
    pytest.param(
        stack_object_conflict,
        Hub("Degraded", "Degraded", False, "not taken over (exist and are not the add-on's",
            "Degraded", NOT_ALL),
        STORAGE_OK,
        MODEL_OK,
        id="stack-object-someone-elses"),
    pytest.param(
        removal_blocked_deleting,
        Hub("Removing", "RemovalBlocked", False, FOREIGN, "Degraded", "False RemovalBlocked"),
        STORAGE_OK,
        Hub("Degraded", "PlatformRemoving", False, "is being removed", "Degraded", NOT_ALL),
        id="removal-blocked-while-deleting"),
    pytest.param(
        removal_refused,
        Hub("RemovalBlocked", "IntentsOnCluster", False, "MultiClusterInferenceService ns/iris",
            "Degraded", "False RemovalBlocked"),
        STORAGE_OK,
        MODEL_OK,
        id="removal-refused-on-hub"),
    pytest.param(
        controller_missing,
        Hub("Degraded", "Degraded", False, f"not available: {CONTROLLER}", "Degraded", NOT_ALL),
        STORAGE_OK,
        MODEL_OK,
        id="controller-missing"),
    pytest.param(
        controller_deleted,
        Hub("Installing", "Installing", False, f"waiting for Deployment {CONTROLLER}",
            "Progressing", NOT_ALL),
        STORAGE_OK,
        MODEL_OK,
        id="controller-deleted"),
    pytest.param(
        isvc_terminating,
        STACK_OK,
        STORAGE_OK,
        Hub("Removing", "WorkDeleting", False, "is being deleted: the work agent deletes",
            "Progressing", NOT_ALL),
        id="isvc-terminating"),
    pytest.param(
        refused_field,
        STACK_OK,
        STORAGE_OK,
        Hub("Failed", "ApplyFailed", False,
            "InferenceService models/iris was refused: failed to create typed patch object "
            "(models/iris; serving.kserve.io/v1beta1, Kind=InferenceService): "
            ".spec.predictor.model.storageUrl: field not declared in schema",
            "Degraded", NOT_ALL),
        id="work-refused-naming-field"),
    pytest.param(
        refused_webhook,
        STACK_OK,
        STORAGE_OK,
        Hub("Applying", "WaitingForSpoke", False, "still setting up what admits it",
            "Progressing", NOT_ALL),
        id="work-refused-webhook-not-serving"),
    pytest.param(
        key_missing,
        STACK_OK,
        Hub("Failed", "SecretKeyMissing", False,
            "Secret ns/creds has no key 'AWS_SECRET_ACCESS_KEY' "
            "(named by spec.secretRef.keys.secret_access_key)", "Degraded", NOT_ALL),
        MODEL_OK,
        id="credentials-key-missing"),
    pytest.param(
        decrypt_failed,
        STACK_OK,
        Hub("Failed", "DecryptFailed", False, "payload does not decrypt with this agent's key",
            "Degraded", NOT_ALL),
        MODEL_OK,
        id="decryption-failed"),
]


@pytest.mark.parametrize(("situation", "stack", "storage", "model"), TABLE)
def test_truth_table(
    situation: Callable[[Fleet], None], stack: Hub, storage: Hub, model: Hub
) -> None:
    fleet = healthy_fleet()
    situation(fleet)
    fleet.hub.writes.clear()
    for kind in (MSV, SC, MCIS):
        fleet.reconcile(kind)
    # What c1 reports changes no work: the hub only writes statuses (a credential it cannot
    # deliver whole is not delivered at all).
    assert [w for w in fleet.hub.writes if w[0] != "status"] == []
    for kind, want in ((MSV, stack), (SC, storage), (MCIS, model)):
        status = fleet.hub.statuses[fleet.bodies[kind]["metadata"]["name"]]
        entry = next(x for x in status["clusters"] if x["cluster"] == "c1")
        ready = next(x for x in status["conditions"] if x["type"] == "Ready")
        got = Hub(entry["phase"], entry["reason"], entry["ready"],
                  want.message if want.message in entry.get("message", "") else
                  entry.get("message", ""),
                  status["phase"], f"{ready['status']} {ready['reason']}")
        assert got == want, kind
