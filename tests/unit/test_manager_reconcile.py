"""The reconcile loop against an in-memory world: exact desired set, no needless writes."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from addon_api import constants as c
from addon_api import sealing
from addon_api.platform import MODELMESH_DEPRECATED
from addon_manager.facts import conflicts, naming
from addon_manager.facts.records import ClusterFact, WorkFact
from addon_manager.facts.secrets import parse_secret
from addon_manager.kinds.registry import parse as parse_work
from addon_manager.shell.reconcile import DUE_MARGIN, Outcome, Reconciler
from testbed.support.fake_hub import OPEN_POLICY, FakeHub
from testbed.support.sealing import memory_sealer


def isvc_body(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_INFERENCE_SERVICE,
        "metadata": {
            "name": "iris",
            "namespace": "ns",
            "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "placementRef": {"name": "p"},
            "targetNamespace": "models",
            "template": {"predictor": {}},
            **spec,
        },
        **({"status": status} if status else {}),
    }


def platform_ready(hub: FakeHub, *clusters: str) -> None:
    for cl in clusters:
        hub.works[(cl, "sp")] = WorkFact(
            name="sp",
            cluster=cl,
            kind=c.KIND_MODEL_SERVING,
            intent_namespace="ns",
            intent_name="kserve",
            render_hash="x",
            applied="True",
            feedback=(("phase", "Available"),),
        )


def open_sealed(
    reconciler: Reconciler, private: bytes, manifest: dict[str, Any], cluster: str = "c1"
) -> dict[str, Any]:
    """Open a sealed SealedStorageConnection manifest as the agent of ``cluster`` would."""
    meta, spec = manifest["metadata"], manifest["spec"]
    binding = sealing.Binding(cluster, meta["namespace"], meta["name"],
                              tuple(spec["targetNamespaces"]), spec["entryName"], spec["type"])
    return sealing.unseal(private, binding, spec["sealed"],
                          (reconciler.sealer.keys.verify_key,)).payload


def run(hub: FakeHub, kind: str, body: dict[str, Any]) -> Any:
    return asyncio.run(Reconciler(hub, hub, memory_sealer(),
                                  admin=OPEN_POLICY).reconcile(kind, body))


def test_fan_out_then_steady_state_writes_nothing() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2", "c3"})})
    platform_ready(hub, "c1", "c2", "c3")
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    out = asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body()))
    assert out.applied == 3 and out.status_written
    # the works now exist: the status moves from Sending to Applying once
    asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body(hub.statuses["iris"])))
    status = hub.statuses["iris"]
    hub.writes.clear()
    again = asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body(status)))
    assert hub.writes == [] and again.skipped == 3
    # a fresh reconciler (a restarted manager) also writes nothing
    assert run(hub, c.KIND_INFERENCE_SERVICE, isvc_body(status)).applied == 0
    assert hub.writes == []


def test_cluster_leaving_placement_loses_only_its_work() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    platform_ready(hub, "c1", "c2")
    run(hub, c.KIND_INFERENCE_SERVICE, isvc_body())
    hub.placements[("ns", "p")] = frozenset({"c1"})
    hub.writes.clear()
    out = run(hub, c.KIND_INFERENCE_SERVICE, isvc_body())
    name = naming.work_name(c.KIND_INFERENCE_SERVICE, "ns", "iris")
    assert out.deleted == 1 and ("delete", f"c2/{name}") in hub.writes
    assert set(hub.works_of(c.KIND_INFERENCE_SERVICE, "ns", "iris")) == {"c1"}


def test_a_cluster_whose_removal_is_blocked_stays_in_the_status() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    body = msv_body("kserve", "2026-01-01T00:00:00Z")
    run(hub, c.KIND_MODEL_SERVING, body)
    name = naming.work_name(c.KIND_MODEL_SERVING, "ns", "kserve")
    for cl in ("c1", "c2"):
        hub.works[(cl, name)] = WorkFact(
            **{**hub.works[(cl, name)].__dict__, "applied": "True",
               "feedback": (("phase", "Available"),)}
        )
    hub.placements[("ns", "p")] = frozenset({"c1"})
    run(hub, c.KIND_MODEL_SERVING, body)  # c2 left: its work is deleted ...
    hub.works[("c2", name)] = WorkFact(  # ... but the agent cannot uninstall there
        name=name, cluster="c2", kind=c.KIND_MODEL_SERVING, intent_namespace="ns",
        intent_name="kserve", render_hash="x", applied="True", deleting=True,
        feedback=(("message", "1 InferenceService the add-on did not create: models/x"),
                  ("phase", "RemovalBlocked")),
    )
    run(hub, c.KIND_MODEL_SERVING, body)
    status = hub.statuses["kserve"]
    entries = {e["cluster"]: e for e in status["clusters"]}
    assert set(entries) == {"c1", "c2"}  # the hub does not forget c2
    assert (entries["c2"]["phase"], entries["c2"]["reason"]) == ("Removing", "RemovalBlocked")
    assert "models/x" in entries["c2"]["message"]
    ready = next(x for x in status["conditions"] if x["type"] == "Ready")
    assert ready["status"] == "False"
    del hub.works[("c2", name)]  # the removal finished
    run(hub, c.KIND_MODEL_SERVING, body)
    assert [e["cluster"] for e in hub.statuses["kserve"]["clusters"]] == ["c1"]


def test_invalid_spec_is_reported_naming_the_field_and_sends_nothing() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    platform_ready(hub, "c1")
    run(hub, c.KIND_INFERENCE_SERVICE, isvc_body(deploymentMode="Serverless"))
    status = hub.statuses["iris"]
    assert status["phase"] == "Invalid"
    ready = next(x for x in status["conditions"] if x["type"] == "Ready")
    assert ready["reason"] == "InvalidSpec"
    assert ready["message"].startswith("spec.deploymentMode: Input should be 'Standard'")
    assert "errors.pydantic.dev" not in ready["message"]
    assert [w for w in hub.writes if w[0] == "apply"] == []


@pytest.mark.parametrize(
    ("template", "field"),
    [
        ({"predictor": {}, "metadata": {"labels": {"a": "b"}}}, "spec.template.metadata"),
        ({"predictor": {"minReplica": 2}}, "spec.template.predictor.minReplica"),
    ],
)
def test_template_field_kserve_lacks_is_invalid_and_sends_nothing(
    template: dict[str, Any], field: str
) -> None:
    """An object the API server did not check (stored before the schema declared the
    template's fields, or created with field validation Ignore on an older CRD) is refused
    by the models: the spoke's API server would refuse the field anyway."""
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    platform_ready(hub, "c1")
    run(hub, c.KIND_INFERENCE_SERVICE, isvc_body(template=template))
    status = hub.statuses["iris"]
    assert status["phase"] == "Invalid"
    ready = next(x for x in status["conditions"] if x["type"] == "Ready")
    assert ready["reason"] == "InvalidSpec"
    assert ready["message"].startswith(f"{field}: Extra inputs are not permitted")
    assert [w for w in hub.writes if w[0] == "apply"] == []


def test_runtime_template_field_kserve_lacks_is_invalid_and_sends_nothing() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    platform_ready(hub, "c1")
    body = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_SERVING_RUNTIME,
        "metadata": {"name": "rt", "namespace": "ns", "generation": 1,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "placementRef": {"name": "p"},
            "targetNamespace": "models",
            "template": {
                "containers": [{"name": "c", "image": "img:1"}],
                "supportedModelFormats": [{"name": "sklearn"}],
                "metadata": {"name": "x"},
            },
        },
    }
    run(hub, c.KIND_SERVING_RUNTIME, body)
    ready = next(x for x in hub.statuses["rt"]["conditions"] if x["type"] == "Ready")
    assert ready["reason"] == "InvalidSpec"
    assert ready["message"].startswith("spec.template.metadata: Extra inputs are not permitted")
    assert [w for w in hub.writes if w[0] == "apply"] == []


def test_override_adding_a_template_field_kserve_lacks_fails_that_cluster_only() -> None:
    """Override patches are open at admission; the field is caught in render, named."""
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    platform_ready(hub, "c1", "c2")
    patch = {"template": {"metadata": {"labels": {"a": "b"}}}}
    run(hub, c.KIND_INFERENCE_SERVICE,
        isvc_body(overrides=[{"clusterNames": ["c2"], "patch": patch}]))
    entries = {x["cluster"]: x for x in hub.statuses["iris"]["clusters"]}
    assert entries["c2"]["reason"] == "RenderFailed"
    assert "spec.template.metadata: Extra inputs are not permitted" in entries["c2"]["message"]
    assert set(hub.works_of(c.KIND_INFERENCE_SERVICE, "ns", "iris")) == {"c1"}


def test_kserve_only_predictor_field_is_invalid_in_modelmesh_mode() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    platform_ready(hub, "c1")
    template = {"predictor": {"model": {"modelFormat": {"name": "onnx"}},
                              "workerSpec": {"pipelineParallelSize": 2}}}
    run(hub, c.KIND_INFERENCE_SERVICE, isvc_body(template=template, deploymentMode="ModelMesh"))
    ready = next(x for x in hub.statuses["iris"]["conditions"] if x["type"] == "Ready")
    assert ready["reason"] == "InvalidSpec"
    assert "spec.template.predictor.workerSpec is not a field of ModelMesh Serving's" in (
        ready["message"]
    )
    assert [w for w in hub.writes if w[0] == "apply"] == []


def test_override_invalid_on_one_cluster_fails_that_cluster_only() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    platform_ready(hub, "c1", "c2")
    patch = {"targetNamespace": "Not A Namespace"}
    run(hub, c.KIND_INFERENCE_SERVICE,
        isvc_body(overrides=[{"clusterNames": ["c2"], "patch": patch}]))
    entries = {x["cluster"]: x for x in hub.statuses["iris"]["clusters"]}
    assert entries["c2"]["reason"] == "RenderFailed"
    assert "spec.targetNamespace: String should match pattern" in entries["c2"]["message"]
    assert set(hub.works_of(c.KIND_INFERENCE_SERVICE, "ns", "iris")) == {"c1"}


def test_missing_placement_is_a_condition_and_sends_nothing() -> None:
    hub = FakeHub()
    run(hub, c.KIND_INFERENCE_SERVICE, isvc_body())
    conds = {x["type"]: x for x in hub.statuses["iris"]["conditions"]}
    assert conds["PlacementResolved"]["reason"] == "PlacementNotFound"
    assert [w for w in hub.writes if w[0] == "apply"] == []


def test_placement_deleted_keeps_what_was_sent() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    platform_ready(hub, "c1", "c2")
    run(hub, c.KIND_INFERENCE_SERVICE, isvc_body())
    del hub.placements[("ns", "p")]
    hub.writes.clear()
    out = run(hub, c.KIND_INFERENCE_SERVICE, isvc_body())
    assert out.deleted == 0 and [w for w in hub.writes if w[0] == "delete"] == []
    assert set(hub.works_of(c.KIND_INFERENCE_SERVICE, "ns", "iris")) == {"c1", "c2"}
    conds = {x["type"]: x for x in hub.statuses["iris"]["conditions"]}
    assert conds["PlacementResolved"]["reason"] == "PlacementNotFound"
    assert "kept" in conds["PlacementResolved"]["message"]


def test_gate_waits_for_platform_and_keeps_sent_work() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    run(hub, c.KIND_INFERENCE_SERVICE, isvc_body())
    entry = hub.statuses["iris"]["clusters"][0]
    assert entry["reason"] == "WaitingForPlatform" and hub.works == {}
    platform_ready(hub, "c1")
    run(hub, c.KIND_INFERENCE_SERVICE, isvc_body())
    assert set(hub.works_of(c.KIND_INFERENCE_SERVICE, "ns", "iris")) == {"c1"}
    hub.works.pop(("c1", "sp"))  # platform goes away: the sent work stays
    out = run(hub, c.KIND_INFERENCE_SERVICE, isvc_body())
    assert out.deleted == 0 and set(hub.works_of(c.KIND_INFERENCE_SERVICE, "ns", "iris")) == {"c1"}


def test_foreign_work_is_never_overwritten() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    platform_ready(hub, "c1")
    hub.foreign.add(("c1", naming.work_name(c.KIND_INFERENCE_SERVICE, "ns", "iris")))
    run(hub, c.KIND_INFERENCE_SERVICE, isvc_body())
    assert [w for w in hub.writes if w[0] == "apply"] == []
    assert hub.statuses["iris"]["clusters"][0]["reason"] == "ForeignWork"


def msv_body(name: str, created: str) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_MODEL_SERVING,
        "metadata": {
            "name": name,
            "namespace": "ns",
            "generation": 1,
            "creationTimestamp": created,
        },
        "spec": {"platform": "KServe", "placementRef": {"name": "p"}},
    }


def test_newer_model_serving_gets_conflict_and_sends_nothing() -> None:
    clusters = frozenset({"c1"})
    hub = FakeHub(
        placements={("ns", "p"): clusters},
        msv_claims=[
            conflicts.Claim("ns", "old", "2026-01-01T00:00:00Z", clusters),
            conflicts.Claim("ns", "new", "2026-02-01T00:00:00Z", clusters),
        ],
    )
    run(hub, c.KIND_MODEL_SERVING, msv_body("new", "2026-02-01T00:00:00Z"))
    assert hub.works == {} and hub.addons == set()
    assert hub.statuses["new"]["clusters"][0]["reason"] == "Conflict"
    run(hub, c.KIND_MODEL_SERVING, msv_body("old", "2026-01-01T00:00:00Z"))
    assert set(hub.works_of(c.KIND_MODEL_SERVING, "ns", "old")) == {"c1"}
    assert hub.addons == {"c1"}


def test_a_cluster_without_the_addon_says_so_when_the_manager_does_not_enable_it() -> None:
    """Enablement off (the chart's default): once a cluster's work is applied and no agent
    reports on it, the entry names the missing add-on (Waiting); the works are written for
    when the admin enables it, and no ManagedClusterAddOn is made."""
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    hub.addons = {"c2"}  # the admin enabled it on c2 only
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY, addons=False)
    body = msv_body("kserve", "2026-01-01T00:00:00Z")
    asyncio.run(reconciler.reconcile(c.KIND_MODEL_SERVING, body))
    assert hub.addons == {"c2"}
    works = hub.works_of(c.KIND_MODEL_SERVING, "ns", "kserve")
    assert set(works) == {"c1", "c2"}
    for cl in ("c1", "c2"):  # the work agents applied both; no agent said anything yet
        key = next(k for k, w in hub.works.items() if k[0] == cl and w.kind == c.KIND_MODEL_SERVING)
        hub.works[key] = replace(hub.works[key], applied="True", reported=True)

    def entries() -> dict[str, dict[str, Any]]:
        asyncio.run(reconciler.reconcile(c.KIND_MODEL_SERVING, body))
        return {e["cluster"]: e for e in hub.statuses["kserve"]["clusters"]}

    got = entries()
    assert (got["c1"]["phase"], got["c1"]["reason"]) == ("Waiting", "AddonNotEnabled")
    assert "not enabled on c1" in got["c1"]["message"]
    assert got["c2"]["reason"] != "AddonNotEnabled"
    # An agent deployed some other way reports: the entry is its report.
    key = next(k for k, w in hub.works.items() if k[0] == "c1" and w.kind == c.KIND_MODEL_SERVING)
    hub.works[key] = replace(hub.works[key], feedback=(("phase", "Installing"),))
    assert entries()["c1"]["phase"] == "Installing"


def sc_body() -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_STORAGE_CONNECTION,
        "metadata": {"name": "s3", "namespace": "ns", "generation": 1},
        "spec": {
            "placementRef": {"name": "p"},
            "type": "s3",
            "targetNamespaces": ["models"],
            "secretRef": {"name": "creds"},
            "s3": {"bucket": "b"},
        },
    }


FIRST_KEY, SECOND_KEY = "AK.1", "AK.2"
"""Access key ids with a dot, which no base64 text can hold: the test looks for the first in
the sealed work, whose random ciphertext once held ``AK1``, the id this test used before, by
chance (a ``make test`` run of 2026-12-06)."""


def test_storage_waits_for_key_then_seals_and_reseals_on_change() -> None:
    hub = FakeHub(
        placements={("ns", "p"): frozenset({"c1"})},
        secrets={("ns", "creds"): {"access_key_id": FIRST_KEY}},
    )
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    assert hub.statuses["s3"]["clusters"][0]["reason"] == "WaitingForAgentKey"
    assert ("c1", naming.IDENTITY_WORK_NAME) in hub.works  # the key is asked for
    private = sealing.generate_private_key()
    key = sealing.public_key_of(private)
    identity = hub.works[("c1", naming.IDENTITY_WORK_NAME)]
    hub.works[("c1", naming.IDENTITY_WORK_NAME)] = WorkFact(
        **{**identity.__dict__, "feedback": (("keyId", sealing.key_id(key)), ("publicKey", key))}
    )
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    name = naming.work_name(c.KIND_STORAGE_CONNECTION, "ns", "s3")
    body = hub.bodies[("c1", name)]
    assert FIRST_KEY not in str(body)
    manifest = body["spec"]["workload"]["manifests"][0]
    assert open_sealed(reconciler, private, manifest)["access_key_id"] == FIRST_KEY
    hub.writes.clear()
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    assert [w for w in hub.writes if w[0] == "apply"] == []  # same inputs: no reseal
    hub.secrets[("ns", "creds")] = {"access_key_id": SECOND_KEY}
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    manifest = hub.bodies[("c1", name)]["spec"]["workload"]["manifests"][0]
    assert open_sealed(reconciler, private, manifest)["access_key_id"] == SECOND_KEY


def test_a_secret_missing_a_named_key_delivers_nothing_and_says_which() -> None:
    hub = FakeHub(
        placements={("ns", "p"): frozenset({"c1"})},
        secrets={("ns", "creds"): {"AWS_ACCESS_KEY_ID": "AK1"}},
    )
    private = sealing.generate_private_key()
    key = sealing.public_key_of(private)
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))  # asks for the key
    identity = hub.works[("c1", naming.IDENTITY_WORK_NAME)]
    hub.works[("c1", naming.IDENTITY_WORK_NAME)] = WorkFact(
        **{**identity.__dict__, "feedback": (("keyId", sealing.key_id(key)), ("publicKey", key))}
    )
    body = sc_body()
    body["spec"]["secretRef"]["keys"] = {
        "access_key_id": "AWS_ACCESS_KEY_ID", "secret_access_key": "AWS_SECRET_ACCESS_KEY",
    }
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, body))
    entry = hub.statuses["s3"]["clusters"][0]
    assert (entry["phase"], entry["reason"]) == ("Failed", "SecretKeyMissing")
    assert "Secret ns/creds has no key 'AWS_SECRET_ACCESS_KEY'" in entry["message"]
    assert "spec.secretRef.keys.secret_access_key" in entry["message"]
    name = naming.work_name(c.KIND_STORAGE_CONNECTION, "ns", "s3")
    assert ("c1", name) not in hub.bodies  # nothing delivered, not even the half it has
    hub.secrets[("ns", "creds")] = {"AWS_ACCESS_KEY_ID": "AK1", "AWS_SECRET_ACCESS_KEY": "SK1"}
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, body))
    manifest = hub.bodies[("c1", name)]["spec"]["workload"]["manifests"][0]
    payload = open_sealed(reconciler, private, manifest)
    assert (payload["access_key_id"], payload["secret_access_key"]) == ("AK1", "SK1")


def test_cleanup_deletes_every_work_of_the_intent() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    platform_ready(hub, "c1", "c2")
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body()))
    remaining = asyncio.run(reconciler.cleanup(c.KIND_INFERENCE_SERVICE, "ns", "iris"))
    assert remaining == ["c1", "c2"]  # as seen before the deletes
    assert hub.works_of(c.KIND_INFERENCE_SERVICE, "ns", "iris") == {}


def test_identity_work_goes_with_the_last_storage_connection() -> None:
    hub = FakeHub(
        placements={("ns", "p"): frozenset({"c1"})},
        secrets={("ns", "creds"): {"access_key_id": "AK1"}},
        storage={("ns", "s3"): frozenset({"c1"})},
    )
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    assert ("c1", naming.IDENTITY_WORK_NAME) in hub.works
    asyncio.run(reconciler.cleanup(c.KIND_STORAGE_CONNECTION, "ns", "s3"))
    assert ("c1", naming.IDENTITY_WORK_NAME) not in hub.works
    # A StorageConnection again at once: the identity work is written again, and goes again
    # with it, though the manager deleted a work of that name moments ago (a new one).
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    assert ("c1", naming.IDENTITY_WORK_NAME) in hub.works
    asyncio.run(reconciler.cleanup(c.KIND_STORAGE_CONNECTION, "ns", "s3"))
    assert ("c1", naming.IDENTITY_WORK_NAME) not in hub.works


def test_stale_cluster_is_rechecked_written_once_and_heals() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    platform_ready(hub, "c1", "c2")
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY, stale_after=60)
    run_ = lambda: asyncio.run(  # noqa: E731
        reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body(hub.statuses.get("iris")))
    )
    run_()
    now = datetime.now(UTC)
    for key, work in list(hub.works.items()):
        if work.kind == c.KIND_INFERENCE_SERVICE:  # both report ready for generation 1
            hub.works[key] = replace(work, generation=1, observed_generation=1, reported=True,
                                     applied="True", feedback=(("ready", "True"),),
                                     spec_time=now)
    run_()
    assert hub.statuses["iris"]["phase"] == "Ready"
    # The intent changed (generation 2 on c1's work) and c1's work agent does not pick it up.
    key1 = next(k for k, w in hub.works.items()
                if w.cluster == "c1" and w.kind == c.KIND_INFERENCE_SERVICE)
    hub.works[key1] = replace(hub.works[key1], generation=2,
                              spec_time=now - timedelta(seconds=30))
    out = run_()
    entry = {x["cluster"]: x for x in hub.statuses["iris"]["clusters"]}["c1"]
    assert (entry["phase"], entry["reason"]) == ("Applying", "WorkUpdating")
    assert out.recheck_after is not None and 25 <= out.recheck_after <= 31
    # Later: stale, written once; the same facts again write nothing.
    hub.works[key1] = replace(hub.works[key1], spec_time=now - timedelta(seconds=120))
    hub.writes.clear()
    out = run_()
    status = hub.statuses["iris"]
    entries = {x["cluster"]: x for x in status["clusters"]}
    assert entries["c1"]["stale"] is True and entries["c1"]["reason"] == "WorkNotObserved"
    assert entries["c2"]["ready"] is True and entries["c2"]["stale"] is False
    assert status["phase"] == "Degraded" and status["summary"]["stale"] == 1
    assert hub.writes == [("status", "iris")] and out.recheck_after is None
    hub.writes.clear()
    run_()
    assert hub.writes == []
    # The work agent comes back and reports generation 2: healed.
    hub.works[key1] = replace(hub.works[key1], observed_generation=2)
    run_()
    status = hub.statuses["iris"]
    assert status["phase"] == "Ready" and status["summary"]["stale"] == 0
    assert all(not x.get("stale") for x in status["clusters"])


def _publish_key(hub: FakeHub, cluster: str) -> bytes:
    """The agent publishes a fresh key: the identity work's feedback carries it."""
    private = sealing.generate_private_key()
    key = sealing.public_key_of(private)
    ident = hub.works[(cluster, naming.IDENTITY_WORK_NAME)]
    hub.works[(cluster, naming.IDENTITY_WORK_NAME)] = replace(
        ident, feedback=(("keyId", sealing.key_id(key)), ("publicKey", key))
    )
    return private


def _sealed_manifest(hub: FakeHub, cluster: str) -> tuple[dict[str, Any], dict[str, Any]]:
    body = hub.bodies[(cluster, naming.work_name(c.KIND_STORAGE_CONNECTION, "ns", "s3"))]
    return body["spec"]["workload"]["manifests"][0], body["spec"]["manifestConfigs"][0]


def _identity_namespaces(hub: FakeHub, cluster: str) -> tuple[str, str]:
    body = hub.bodies[(cluster, naming.IDENTITY_WORK_NAME)]
    return (body["spec"]["workload"]["manifests"][0]["metadata"]["namespace"],
            body["spec"]["manifestConfigs"][0]["resourceIdentifier"]["namespace"])


def test_storage_goes_to_and_is_sealed_for_the_agent_namespace_of_each_cluster() -> None:
    hub = FakeHub(
        placements={("ns", "p"): frozenset({"c1", "c2"})},
        secrets={("ns", "creds"): {"access_key_id": "AK1"}},
        agent_namespaces={"c1": "custom-ns"},  # c2 has no ManagedClusterAddOn: the default
    )
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    assert _identity_namespaces(hub, "c1") == ("custom-ns", "custom-ns")
    assert _identity_namespaces(hub, "c2") == (c.AGENT_NAMESPACE, c.AGENT_NAMESPACE)
    keys = {cl: _publish_key(hub, cl) for cl in ("c1", "c2")}
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    for cl, agent_ns in (("c1", "custom-ns"), ("c2", c.AGENT_NAMESPACE)):
        sealed, config = _sealed_manifest(hub, cl)
        assert sealed["metadata"]["namespace"] == agent_ns
        assert config["resourceIdentifier"]["namespace"] == agent_ns
        # The agent opens it with the binding of the object as it finds it there.
        assert open_sealed(reconciler, keys[cl], sealed, cl)["access_key_id"] == "AK1"
    sealed, _ = _sealed_manifest(hub, "c1")
    moved = {**sealed, "metadata": {**sealed["metadata"], "namespace": c.AGENT_NAMESPACE}}
    with pytest.raises(sealing.SealError, match="binding"):
        open_sealed(reconciler, keys["c1"], moved)


def test_changed_agent_namespace_rewrites_identity_then_reseals_for_the_new_agent() -> None:
    hub = FakeHub(
        placements={("ns", "p"): frozenset({"c1"})},
        secrets={("ns", "creds"): {"access_key_id": "AK1"}},
    )
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)

    def reconcile() -> None:
        asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))

    reconcile()
    _publish_key(hub, "c1")
    reconcile()
    assert _sealed_manifest(hub, "c1")[0]["metadata"]["namespace"] == c.AGENT_NAMESPACE
    old_identity = hub.works[("c1", naming.IDENTITY_WORK_NAME)]
    # OCM now reports another install namespace (agent.installNamespace changed).
    hub.agent_namespaces["c1"] = "custom-ns"
    hub.writes.clear()
    reconcile()
    applied = [w[1] for w in hub.writes if w[0] == "apply"]
    # Only the identity work: the key it still feeds back is the old agent's, and sealing
    # for it would be wasted (the agent in custom-ns holds another key).
    assert applied == [f"c1/{naming.IDENTITY_WORK_NAME}"]
    assert _identity_namespaces(hub, "c1") == ("custom-ns", "custom-ns")
    assert hub.works[("c1", naming.IDENTITY_WORK_NAME)].render_hash != old_identity.render_hash
    # The watch is late: the hub still shows the old identity work and its old key.
    rewritten = hub.works[("c1", naming.IDENTITY_WORK_NAME)]
    hub.works[("c1", naming.IDENTITY_WORK_NAME)] = old_identity
    hub.writes.clear()
    reconcile()
    assert [w for w in hub.writes if w[0] == "apply"] == []  # not sealed for the old key
    hub.works[("c1", naming.IDENTITY_WORK_NAME)] = rewritten
    # The agent in custom-ns publishes its key: another key than the one pinned, so nothing
    # is sealed to it until a hub admin approves it; then it is re-sealed for it, there.
    private = _publish_key(hub, "c1")
    hub.writes.clear()
    reconcile()
    assert [w for w in hub.writes if w[0] == "apply"] == []
    assert hub.statuses["s3"]["clusters"][0]["reason"] == "AgentKeyChanged"
    new_id = sealing.key_id(sealing.public_key_of(private))
    reconciler.sealer.approvals["c1"] = new_id
    reconcile()
    sealed, config = _sealed_manifest(hub, "c1")
    assert sealed["metadata"]["namespace"] == "custom-ns"
    assert config["resourceIdentifier"]["namespace"] == "custom-ns"
    assert open_sealed(reconciler, private, sealed)["access_key_id"] == "AK1"
    assert reconciler.sealer.pinned("c1") is not None
    assert reconciler.sealer.pinned("c1").key_id == new_id  # type: ignore[union-attr]
    hub.writes.clear()
    reconcile()
    assert [w for w in hub.writes if w[0] == "apply"] == []  # settled: no more writes


# Removal of a stack under add-on intents: refused per cluster --------------------------------


def _stack_available(hub: FakeHub, *clusters: str) -> str:
    """The ModelServing kserve's works, applied and reporting Available on ``clusters``."""
    run(hub, c.KIND_MODEL_SERVING, msv_body("kserve", "2026-01-01T00:00:00Z"))
    name = naming.work_name(c.KIND_MODEL_SERVING, "ns", "kserve")
    for cl in clusters:
        hub.works[(cl, name)] = replace(
            hub.works[(cl, name)], applied="True", feedback=(("phase", "Available"),)
        )
    return name


def _model_on(hub: FakeHub, cluster: str, kind: str = c.KIND_INFERENCE_SERVICE) -> None:
    wname = naming.work_name(kind, "ns", "iris")
    hub.works[(cluster, wname)] = WorkFact(
        name=wname, cluster=cluster, kind=kind, intent_namespace="ns", intent_name="iris",
        render_hash="h", applied="True", feedback=(("ready", "True"),),
    )


def _removed_body() -> dict[str, Any]:
    body = msv_body("kserve", "2026-01-01T00:00:00Z")
    body["spec"]["managementState"] = "Removed"
    return body


def test_removed_is_refused_on_a_cluster_whose_stack_add_on_intents_use() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    name = _stack_available(hub, "c1", "c2")
    _model_on(hub, "c1")
    before = hub.works[("c1", name)]
    hub.writes.clear()
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    out = asyncio.run(reconciler.reconcile(c.KIND_MODEL_SERVING, _removed_body()))
    # What wakes it when the holding work goes: its removal waits on c1 only.
    assert reconciler.removal_waits == {(c.KIND_MODEL_SERVING, "ns", "kserve"): {"c1"}}
    # c1: the work is left exactly as it was; c2 (no intents) gets managementState Removed.
    assert [w for w in hub.writes if w[0] == "apply"] == [("apply", f"c2/{name}")]
    assert hub.works[("c1", name)] == before
    assert out.blocked == {"c1": ["MultiClusterInferenceService ns/iris"]}
    status = hub.statuses["kserve"]
    entries = {e["cluster"]: e for e in status["clusters"]}
    assert (entries["c1"]["phase"], entries["c1"]["reason"]) == (
        "RemovalBlocked", "IntentsOnCluster")
    assert "MultiClusterInferenceService ns/iris" in entries["c1"]["message"]
    ready = next(x for x in status["conditions"] if x["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "RemovalBlocked")
    assert "c1" in ready["message"]
    # The intent's work goes (even a deleting one still holds the stack) ...
    wname = naming.work_name(c.KIND_INFERENCE_SERVICE, "ns", "iris")
    hub.works[("c1", wname)] = replace(hub.works[("c1", wname)], deleting=True)
    hub.writes.clear()
    run(hub, c.KIND_MODEL_SERVING, _removed_body())
    assert [w for w in hub.writes if w[0] == "apply"] == []
    del hub.works[("c1", wname)]
    # ... then the removal proceeds on its own.
    out = asyncio.run(reconciler.reconcile(c.KIND_MODEL_SERVING, _removed_body()))
    assert out.blocked == {} and ("apply", f"c1/{name}") in hub.writes
    assert reconciler.removal_waits == {}
    assert hub.works[("c1", name)].render_hash != before.render_hash


def test_a_runtime_holds_the_stack_too_and_a_removal_already_ordered_is_not_undone() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    name = _stack_available(hub, "c1")
    run(hub, c.KIND_MODEL_SERVING, _removed_body())  # no intents: Removed is sent
    hub.works[("c1", name)] = replace(hub.works[("c1", name)], applied="True",
                                      feedback=(("phase", "Removing"),))
    _model_on(hub, "c1", c.KIND_SERVING_RUNTIME)  # sent before the spoke said Removing
    out = run(hub, c.KIND_MODEL_SERVING, _removed_body())
    assert out.blocked == {}
    assert hub.statuses["kserve"]["clusters"][0]["phase"] == "Removing"
    ready = next(x for x in hub.statuses["kserve"]["conditions"] if x["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Removing")
    # Managed again, then Removed again with the runtime there: refused, naming it.
    run(hub, c.KIND_MODEL_SERVING, msv_body("kserve", "2026-01-01T00:00:00Z"))
    hub.works[("c1", name)] = replace(hub.works[("c1", name)], applied="True",
                                      feedback=(("phase", "Available"),))
    out = run(hub, c.KIND_MODEL_SERVING, _removed_body())
    assert out.blocked == {"c1": ["MultiClusterServingRuntime ns/iris"]}


def test_a_cluster_leaving_keeps_its_stack_while_add_on_intents_use_it() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    name = _stack_available(hub, "c1", "c2")
    _model_on(hub, "c2")
    hub.placements[("ns", "p")] = frozenset({"c1"})
    hub.writes.clear()
    run(hub, c.KIND_MODEL_SERVING, msv_body("kserve", "2026-01-01T00:00:00Z"))
    assert [w for w in hub.writes if w[0] == "delete"] == []
    entries = {e["cluster"]: e for e in hub.statuses["kserve"]["clusters"]}
    assert (entries["c2"]["phase"], entries["c2"]["reason"]) == (
        "RemovalBlocked", "IntentsOnCluster")
    del hub.works[("c2", naming.work_name(c.KIND_INFERENCE_SERVICE, "ns", "iris"))]
    run(hub, c.KIND_MODEL_SERVING, msv_body("kserve", "2026-01-01T00:00:00Z"))
    assert ("delete", f"c2/{name}") in hub.writes


def test_deletion_is_refused_naming_intents_and_clusters_then_completes() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    name = _stack_available(hub, "c1", "c2")
    _model_on(hub, "c1")
    body = msv_body("kserve", "2026-01-01T00:00:00Z")
    body["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    body["status"] = hub.statuses["kserve"]
    hub.writes.clear()
    out = asyncio.run(Reconciler(hub, hub, memory_sealer(),
                                 admin=OPEN_POLICY).reconcile(c.KIND_MODEL_SERVING, body))
    # c2's namespace policy goes with its stack; c1's stays with the stack kept there.
    assert [w for w in hub.writes if w[0] == "delete"] == [
        ("delete", f"c2/{name}"), ("delete", f"c2/{naming.POLICY_WORK_NAME}")]
    assert ("c1", naming.POLICY_WORK_NAME) in hub.works
    assert out.blocked == {"c1": ["MultiClusterInferenceService ns/iris"]}
    status = hub.statuses["kserve"]
    conds = {x["type"]: x for x in status["conditions"]}
    assert (conds["DeletionBlocked"]["status"], conds["DeletionBlocked"]["reason"]) == (
        "True", "IntentsOnCluster")
    assert "c1: MultiClusterInferenceService ns/iris" in conds["DeletionBlocked"]["message"]
    assert (conds["Ready"]["status"], conds["Ready"]["reason"]) == ("False", "RemovalBlocked")
    assert {e["cluster"]: e["phase"] for e in status["clusters"]} == {
        "c1": "RemovalBlocked", "c2": "Removing"}
    del hub.works[("c1", naming.work_name(c.KIND_INFERENCE_SERVICE, "ns", "iris"))]
    body["status"] = status
    out = asyncio.run(Reconciler(hub, hub, memory_sealer(),
                                 admin=OPEN_POLICY).reconcile(c.KIND_MODEL_SERVING, body))
    assert out.blocked == {} and ("delete", f"c1/{name}") in hub.writes
    conds = {x["type"]: x for x in hub.statuses["kserve"]["conditions"]}
    assert "DeletionBlocked" not in conds and conds["Ready"]["reason"] == "Deleting"


def test_a_model_on_a_cluster_whose_stack_goes_is_not_ready() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    platform_ready(hub, "c1", "c2")
    run(hub, c.KIND_INFERENCE_SERVICE, isvc_body())
    for key, work in list(hub.works.items()):
        if work.kind == c.KIND_INFERENCE_SERVICE:
            hub.works[key] = replace(work, applied="True", feedback=(("ready", "True"),))
    run(hub, c.KIND_INFERENCE_SERVICE, isvc_body())
    assert hub.statuses["iris"]["phase"] == "Ready"
    hub.works[("c1", "sp")] = replace(hub.works[("c1", "sp")], feedback=(
        ("message", "waiting for InferenceServices to be deleted: models/iris"),
        ("phase", "Removing")))
    hub.works[("c2", "sp")] = replace(hub.works[("c2", "sp")], deleting=True)
    run(hub, c.KIND_INFERENCE_SERVICE, isvc_body())
    status = hub.statuses["iris"]
    assert status["phase"] == "Degraded"
    for entry in status["clusters"]:
        assert (entry["ready"], entry["reason"]) == (False, "PlatformRemoving")
    entries = {e["cluster"]: e for e in status["clusters"]}
    assert "reports Removing" in entries["c1"]["message"]
    assert "being removed" in entries["c2"]["message"]


def test_cleanup_of_a_model_serving_keeps_the_rule() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    name = _stack_available(hub, "c1", "c2")
    _model_on(hub, "c1")
    remaining = asyncio.run(
        Reconciler(hub, hub, memory_sealer(),
                   admin=OPEN_POLICY).cleanup(c.KIND_MODEL_SERVING, "ns", "kserve"))
    assert remaining == ["c1", "c2"]
    # c2's namespace policy goes with its stack; c1's stays with the stack kept there.
    assert [w for w in hub.writes if w[0] == "delete"] == [
        ("delete", f"c2/{name}"), ("delete", f"c2/{naming.POLICY_WORK_NAME}")]
    assert ("c1", naming.POLICY_WORK_NAME) in hub.works


def _storage_work_written(hub: FakeHub) -> bool:
    return ("c1", naming.work_name(c.KIND_STORAGE_CONNECTION, "ns", "s3")) in hub.bodies


def _storage_with_key(hub: FakeHub) -> Reconciler:
    """A reconciler whose first run asked c1's agent for its key, and the key published."""
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    _publish_key(hub, "c1")
    return reconciler


def test_a_secret_the_manager_may_not_watch_is_forbidden_naming_it_and_the_grant() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})},
                  secrets={("ns", "creds"): {"access_key_id": "AK1"}}, watch_denied={"ns"})
    reconciler = _storage_with_key(hub)
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    entry = hub.statuses["s3"]["clusters"][0]
    assert (entry["phase"], entry["reason"]) == ("Failed", "SecretForbidden")
    assert "Secret ns/creds" in entry["message"]
    assert "manager.secretNamespaces" in entry["message"]
    assert not _storage_work_written(hub)
    hub.watch_denied.clear()  # a hub admin granted the namespace
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    assert _storage_work_written(hub)


def test_a_secret_read_refused_is_forbidden_not_a_traceback() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})},
                  secrets={("ns", "creds"): {"access_key_id": "AK1"}}, get_denied={"ns"})
    reconciler = _storage_with_key(hub)
    outcome = asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    entry = hub.statuses["s3"]["clusters"][0]
    assert (entry["reason"], outcome.applied) == ("SecretForbidden", 0)
    assert "Secret ns/creds" in entry["message"] and "HTTP 403" in entry["message"]
    assert not _storage_work_written(hub)


def test_a_namespace_still_being_listed_waits_and_says_nothing_wrong() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})}, pending={"ns"})
    reconciler = _storage_with_key(hub)
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    assert hub.statuses["s3"]["clusters"][0]["reason"] != "SecretNotFound"
    assert not _storage_work_written(hub)


NOT_UTF8 = base64.b64encode(b"\xff\xfe\x00").decode()


def test_a_secret_value_that_is_not_utf8_is_undecodable_naming_secret_and_key() -> None:
    ok = base64.b64encode(b"AK1").decode()
    raw = {"access_key_id": ok, "secret_access_key": NOT_UTF8}
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})}, raw_secrets={("ns", "creds"): raw})
    reconciler = _storage_with_key(hub)
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    entry = hub.statuses["s3"]["clusters"][0]
    assert (entry["phase"], entry["reason"]) == ("Failed", "SecretUndecodable")
    assert "Secret ns/creds" in entry["message"] and "'secret_access_key'" in entry["message"]
    assert "'access_key_id'" not in entry["message"]
    assert not _storage_work_written(hub)
    # Named keys: a key the connection does not read may hold anything.
    body = sc_body()
    body["spec"]["secretRef"]["keys"] = {"access_key_id": "access_key_id"}
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, body))
    assert _storage_work_written(hub)


def test_a_secret_that_turns_undecodable_after_the_watch_saw_it_delivers_nothing() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})},
                  secrets={("ns", "creds"): {"access_key_id": "AK1"}})
    reconciler = _storage_with_key(hub)

    async def changed_since(namespace: str, name: str) -> dict[str, str] | None:
        return {"access_key_id": NOT_UTF8}

    hub.read_secret = changed_since  # type: ignore[method-assign]
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    assert hub.statuses["s3"]["clusters"][0]["reason"] == "SecretUndecodable"
    assert not _storage_work_written(hub)


def test_parse_secret_keeps_digest_and_keys_never_the_data() -> None:
    fact = parse_secret({"a": base64.b64encode(b"x").decode(), "b": NOT_UTF8, "c": "%%%"})
    assert fact.keys == ("a", "b", "c") and fact.undecodable == ("b", "c")
    assert "x" not in repr(fact) and parse_secret({"a": "eQ=="}).digest != fact.digest


# --- partition safety: a cluster that leaves while not Available keeps its works ---

GRACE = 3600.0


def _isvc_reported_ready(hub: FakeHub, reconciler: Reconciler) -> dict[str, Any]:
    """The MCIS iris on c1 and c2, each work reporting ready; the status that says so."""
    asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body()))
    for key, work in list(hub.works.items()):
        if work.kind == c.KIND_INFERENCE_SERVICE:
            hub.works[key] = replace(work, generation=1, observed_generation=1, reported=True,
                                     applied="True", feedback=(("ready", "True"),))
    asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body()))
    assert hub.statuses["iris"]["phase"] == "Ready"
    return hub.statuses["iris"]


def _partitioned(available: str = "Unknown", ago: float = 600.0) -> ClusterFact:
    since = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=ago)
    return ClusterFact(available=available, since=since,
                       message="Registration agent stopped updating its lease.")


def _left_while_unavailable(available: str = "Unknown") -> tuple[FakeHub, Reconciler, str]:
    """c2 was Ready, went Unknown 10 minutes ago, and OCM's taint dropped it from p."""
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    platform_ready(hub, "c1", "c2")
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY, unavailable_grace=GRACE)
    _isvc_reported_ready(hub, reconciler)
    hub.health["c2"] = _partitioned(available)
    hub.placements[("ns", "p")] = frozenset({"c1"})
    hub.writes.clear()
    return hub, reconciler, naming.work_name(c.KIND_INFERENCE_SERVICE, "ns", "iris")


@pytest.mark.parametrize("available", ["Unknown", "False"])
def test_a_cluster_leaving_while_unavailable_keeps_its_works_and_says_until_when(
    available: str,
) -> None:
    hub, reconciler, _ = _left_while_unavailable(available)
    before = dict(hub.works)
    body = isvc_body(hub.statuses["iris"])
    out = asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, body))
    # Nothing deleted or rewritten: only the status changes.
    assert hub.writes == [("status", "iris")] and hub.works == before
    assert out.deleted == 0
    since = hub.health["c2"].since
    assert since is not None
    until = since + timedelta(seconds=GRACE)
    assert out.held == {"c2": until}
    # Look again when the grace ends (about 50 minutes from now), not before.
    assert out.recheck_after is not None and GRACE - 600 - 5 <= out.recheck_after <= GRACE - 600
    status = hub.statuses["iris"]
    entries = {e["cluster"]: e for e in status["clusters"]}
    c2 = entries["c2"]
    assert (c2["phase"], c2["reason"], c2["stale"], c2["ready"]) == (
        "Stale", "ClusterUnavailable", True, False)
    assert f"not Available ({available})" in c2["message"]
    assert "left the Placement while not Available" in c2["message"]
    assert until.strftime("%Y-%m-%dT%H:%M:%SZ") in c2["message"]
    assert c2["message"].endswith("last reported: Ready")
    assert entries["c1"]["ready"] is True
    assert status["phase"] == "Degraded" and status["summary"]["stale"] == 1
    # The same facts again: nothing written at all.
    hub.writes.clear()
    asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body(status)))
    assert hub.writes == []


def test_after_the_grace_the_works_of_a_cluster_that_left_go() -> None:
    hub, reconciler, name = _left_while_unavailable()
    asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body()))
    assert ("c2", name) in hub.works
    hub.health["c2"] = _partitioned(ago=GRACE + 1)
    out = asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body()))
    assert out.deleted == 1 and ("delete", f"c2/{name}") in hub.writes
    assert out.held == {} and ("c2", name) not in hub.works


def test_a_cluster_back_and_still_not_selected_loses_its_works() -> None:
    hub, reconciler, name = _left_while_unavailable()
    asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body()))
    # Available again moments ago: the Placement may not have re-decided yet.
    hub.health["c2"] = _partitioned("True", ago=10)
    out = asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body()))
    assert out.deleted == 0 and ("c2", name) in hub.works
    assert out.recheck_after is not None and 45 <= out.recheck_after <= 50
    entry = {e["cluster"]: e for e in hub.statuses["iris"]["clusters"]}["c2"]
    assert entry["stale"] is False  # Available: its report is current again
    # Still not selected a minute after it came back: removed as any cluster that leaves.
    hub.health["c2"] = _partitioned("True", ago=120)
    out = asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body()))
    assert out.deleted == 1 and ("delete", f"c2/{name}") in hub.writes


def test_a_cluster_back_and_selected_again_gets_nothing_rewritten() -> None:
    hub, reconciler, _ = _left_while_unavailable()
    asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body()))
    before = dict(hub.works)
    hub.health["c2"] = _partitioned("True", ago=5)
    hub.placements[("ns", "p")] = frozenset({"c1", "c2"})
    hub.writes.clear()
    out = asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body()))
    assert [w for w in hub.writes if w[0] != "status"] == []
    assert hub.works == before and out.skipped == 2 and out.held == {}
    assert hub.statuses["iris"]["phase"] == "Ready"
    # A restarted manager (fresh reconciler, nothing remembered) rewrites nothing either.
    hub.writes.clear()
    out = asyncio.run(Reconciler(hub, hub, memory_sealer(),
                                 admin=OPEN_POLICY, unavailable_grace=GRACE).reconcile(
        c.KIND_INFERENCE_SERVICE, isvc_body(hub.statuses["iris"])))
    assert hub.writes == [] and out.skipped == 2


def test_an_available_cluster_that_leaves_loses_its_works_at_once() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    platform_ready(hub, "c1", "c2")
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY, unavailable_grace=GRACE)
    _isvc_reported_ready(hub, reconciler)
    hub.health["c2"] = _partitioned("True", ago=3600)
    hub.placements[("ns", "p")] = frozenset({"c1"})
    out = asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body()))
    assert out.deleted == 1 and out.held == {}


def test_a_zero_grace_removes_the_works_of_an_unavailable_cluster_at_once() -> None:
    hub, _, name = _left_while_unavailable()
    out = asyncio.run(Reconciler(hub, hub, memory_sealer(),
                                 admin=OPEN_POLICY, unavailable_grace=0).reconcile(
        c.KIND_INFERENCE_SERVICE, isvc_body()))
    assert out.deleted == 1 and ("delete", f"c2/{name}") in hub.writes


def test_the_stack_of_a_cluster_that_left_while_unavailable_stays_intents_or_not() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"})})
    name = _stack_available(hub, "c1", "c2")
    hub.health["c2"] = _partitioned()
    hub.placements[("ns", "p")] = frozenset({"c1"})
    hub.writes.clear()
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY, unavailable_grace=GRACE)
    body = msv_body("kserve", "2026-01-01T00:00:00Z")
    out = asyncio.run(reconciler.reconcile(c.KIND_MODEL_SERVING, body))
    assert [w for w in hub.writes if w[0] != "status"] == [] and ("c2", name) in hub.works
    assert out.blocked == {} and set(out.held) == {"c2"}
    entry = {e["cluster"]: e for e in hub.statuses["kserve"]["clusters"]}["c2"]
    assert (entry["phase"], entry["reason"]) == ("Stale", "ClusterUnavailable")
    assert entry["message"].endswith("last reported: Available")
    # Deleting the ModelServing is a decision, not a partition: its work goes (the work
    # agent finishes that when the cluster is back).
    body["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    out = asyncio.run(reconciler.reconcile(c.KIND_MODEL_SERVING, body))
    assert ("delete", f"c2/{name}") in hub.writes and out.held == {}


def test_the_default_grace_is_a_day() -> None:
    from addon_manager.shell import main

    assert Reconciler(FakeHub(), FakeHub(), memory_sealer(),
                      admin=OPEN_POLICY).unavailable_grace == 86400
    assert main.parse_args([]).unavailable_grace == 86400
    assert main.parse_args(["--unavailable-grace", "600"]).unavailable_grace == 600


# The identity work: exact name, ReadOnly shape, pinned key ------------------------------------


def test_a_tampered_identity_work_is_not_trusted_and_is_rewritten() -> None:
    hub = FakeHub(
        placements={("ns", "p"): frozenset({"c1"})},
        secrets={("ns", "creds"): {"access_key_id": "AK1"}},
    )
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)

    def reconcile() -> None:
        asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))

    reconcile()
    ident_key = ("c1", naming.IDENTITY_WORK_NAME)
    body = hub.bodies[ident_key]
    # Someone changed the work to an Update strategy (it would write their key into the agent's
    # ConfigMap) and kept the render-hash annotation; the feedback carries their key.
    forged = json.loads(json.dumps(body))
    forged["spec"]["manifestConfigs"][0]["updateStrategy"] = {"type": "Update"}
    forged["spec"]["workload"]["manifests"][0]["data"] = {"publicKey": "theirs"}
    private = sealing.generate_private_key()
    key = sealing.public_key_of(private)
    fact = parse_work(forged)
    assert fact is not None and fact.identity_source == ""
    hub.works[ident_key] = replace(fact, feedback=(("keyId", sealing.key_id(key)),
                                                   ("publicKey", key)))
    reconciler.executor.applied.clear()  # the manager's own write is older than the watch grace
    hub.writes.clear()
    reconcile()
    entry = hub.statuses["s3"]["clusters"][0]
    assert entry["reason"] == "IdentityWorkInvalid"
    assert [w[1] for w in hub.writes if w[0] == "apply"] == [f"c1/{naming.IDENTITY_WORK_NAME}"]
    expected = f"{c.AGENT_NAMESPACE}/{c.AGENT_IDENTITY_CONFIGMAP}"
    assert hub.works[ident_key].identity_source == expected
    assert reconciler.sealer.pinned("c1") is None  # nothing pinned from the forged work


def test_only_the_identity_work_of_its_exact_name_counts() -> None:
    hub = FakeHub(
        placements={("ns", "p"): frozenset({"c1"})},
        secrets={("ns", "creds"): {"access_key_id": "AK1"}},
    )
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    real = hub.works[("c1", naming.IDENTITY_WORK_NAME)]
    key = sealing.public_key_of(sealing.generate_private_key())
    # Another work with the identity labels, seen first, feeding back another key:
    forged = replace(
        real, name="aaa-forged", feedback=(("keyId", sealing.key_id(key)), ("publicKey", key)))
    hub.works = {("c1", "aaa-forged"): forged, **hub.works}
    asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))
    assert hub.statuses["s3"]["clusters"][0]["reason"] == "WaitingForAgentKey"
    assert reconciler.sealer.pinned("c1") is None


def test_a_changed_agent_key_stops_sealing_until_approved() -> None:
    hub = FakeHub(
        placements={("ns", "p"): frozenset({"c1"})},
        secrets={("ns", "creds"): {"access_key_id": "AK1"}},
    )
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)

    def reconcile() -> None:
        asyncio.run(reconciler.reconcile(c.KIND_STORAGE_CONNECTION, sc_body()))

    reconcile()
    first = _publish_key(hub, "c1")
    reconcile()
    name = naming.work_name(c.KIND_STORAGE_CONNECTION, "ns", "s3")
    delivered = hub.bodies[("c1", name)]
    assert open_sealed(reconciler, first, _sealed_manifest(hub, "c1")[0])["access_key_id"] == "AK1"
    second = _publish_key(hub, "c1")
    hub.secrets[("ns", "creds")] = {"access_key_id": "AK2"}
    hub.writes.clear()
    reconcile()
    assert [w for w in hub.writes if w[0] == "apply"] == []  # nothing sealed to the new key
    assert hub.bodies[("c1", name)] == delivered and ("c1", name) in hub.works  # kept
    entry = hub.statuses["s3"]["clusters"][0]
    assert entry["reason"] == "AgentKeyChanged"
    second_id = sealing.key_id(sealing.public_key_of(second))
    assert second_id in entry["message"] and "approve.c1" in entry["message"]
    reconciler.sealer.approvals["c1"] = second_id  # a hub admin approves it
    reconcile()
    manifest = _sealed_manifest(hub, "c1")[0]
    assert open_sealed(reconciler, second, manifest)["access_key_id"] == "AK2"


def test_a_modelmesh_stack_says_it_is_deprecated_and_keeps_working() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    body = msv_body("mm", "2026-01-01T00:00:00Z")
    body["spec"]["platform"] = "ModelMesh"
    out = run(hub, c.KIND_MODEL_SERVING, body)
    assert out.applied == 1  # installed as before
    conds = {x["type"]: x for x in hub.statuses["mm"]["conditions"]}
    assert (conds["Deprecated"]["status"], conds["Deprecated"]["reason"]) == (
        "True", "PlatformDeprecated")
    assert conds["Deprecated"]["message"] == MODELMESH_DEPRECATED
    # Its time stays while it stays deprecated; a KServe stack has no such condition.
    since = conds["Deprecated"]["lastTransitionTime"]
    body["status"] = hub.statuses["mm"]
    run(hub, c.KIND_MODEL_SERVING, body)
    again = {x["type"]: x for x in hub.statuses["mm"]["conditions"]}
    assert again["Deprecated"]["lastTransitionTime"] == since
    run(hub, c.KIND_MODEL_SERVING, msv_body("kserve", "2026-01-01T00:00:00Z"))
    assert "Deprecated" not in {x["type"] for x in hub.statuses["kserve"]["conditions"]}


def test_the_pause_counts_from_the_status_write_or_from_the_start_without_one() -> None:
    """At most one status write per interval, counted from when the write was sent: feedback
    that came while the status was being written waits the rest of the interval, no more."""
    wrote = Outcome(status_written=True, status_sent_at=100.4)
    assert wrote.pause(started=100.0, min_interval=1.0, now=100.5) == pytest.approx(0.9)
    assert wrote.pause(started=100.0, min_interval=1.0, now=101.6) == 0.0
    idle = Outcome()
    assert idle.pause(started=100.0, min_interval=1.0, now=100.3) == pytest.approx(0.7)


def test_the_wait_is_the_resync_or_until_something_is_due_or_none_when_asked_at_once() -> None:
    """A plan that asks to look again at once (a new metric answer, exporting works that
    follow the set just published) is not made to wait the resync period: ``0 or resync``
    read it as "nothing due" until 2026-12-06."""
    assert Outcome().wait(300.0) == 300.0
    assert Outcome(recheck_after=14.0).wait(300.0) == 14.0 + DUE_MARGIN
    assert Outcome(recheck_after=900.0).wait(300.0) == 300.0
    assert Outcome(recheck_after=0.0).wait(300.0) == 0.0


def test_a_status_write_records_when_it_was_sent() -> None:
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    platform_ready(hub, "c1")
    reconciler = Reconciler(hub, hub, memory_sealer(), admin=OPEN_POLICY)
    before = time.monotonic()
    out = asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body()))
    assert out.status_written and out.status_sent_at is not None
    assert before <= out.status_sent_at <= time.monotonic()
    again = asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE,
                                             isvc_body(hub.statuses["iris"])))
    asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE, isvc_body(hub.statuses["iris"])))
    still = asyncio.run(reconciler.reconcile(c.KIND_INFERENCE_SERVICE,
                                             isvc_body(hub.statuses["iris"])))
    assert again.status_written and not still.status_written and still.status_sent_at is None


def _runtime_available(hub: FakeHub, cluster: str, name: str, available: str) -> None:
    hub.works[(cluster, f"rt-{name}")] = WorkFact(
        name=f"rt-{name}", cluster=cluster, kind=c.KIND_SERVING_RUNTIME, intent_namespace="ns",
        intent_name=name, render_hash="x", applied="True", available=available)


def test_a_model_waits_for_the_fleet_runtime_it_would_run_on_then_keeps_its_work() -> None:
    """KServe resolves a model's runtime once: a model sent before the fleet's namespaced
    runtime would stay on the cluster-wide one of that name. Its first work waits for the
    runtimes it would resolve on each cluster (named, or auto-selecting its format), and
    only for those."""
    from addon_manager.facts.runtimes import RuntimeFact

    hub = FakeHub(placements={("ns", "p"): frozenset({"c1", "c2"}),
                              ("ns", "rt"): frozenset({"c1"})})
    platform_ready(hub, "c1", "c2")
    hub.runtimes = [
        RuntimeFact("ns", "sk", "models", "rt", frozenset({"sklearn"})),
        RuntimeFact("ns", "elsewhere", "other", "rt", frozenset({"sklearn"})),
        RuntimeFact("ns", "going", "models", "rt", frozenset({"sklearn"}), deleting=True),
        RuntimeFact("other-ns", "xgb", "models", "rt", frozenset({"xgboost"})),
    ]
    named = {"predictor": {"model": {"modelFormat": {"name": "sklearn"}, "runtime": "sk"}}}
    run(hub, c.KIND_INFERENCE_SERVICE, isvc_body(template=named))
    entries = {e["cluster"]: e for e in hub.statuses["iris"]["clusters"]}
    # c2: no fleet runtime selects it, KServe's own runtime serves the model there.
    assert set(hub.works_of(c.KIND_INFERENCE_SERVICE, "ns", "iris")) == {"c2"}
    assert entries["c1"]["reason"] == "WaitingForServingRuntime", entries["c1"]
    assert entries["c1"]["waitingFor"] == ["MultiClusterServingRuntime sk Available"]
    _runtime_available(hub, "c1", "sk", "False")  # sent, not Available yet
    run(hub, c.KIND_INFERENCE_SERVICE, isvc_body(template=named))
    assert set(hub.works_of(c.KIND_INFERENCE_SERVICE, "ns", "iris")) == {"c2"}
    _runtime_available(hub, "c1", "sk", "True")
    run(hub, c.KIND_INFERENCE_SERVICE, isvc_body(template=named))
    assert set(hub.works_of(c.KIND_INFERENCE_SERVICE, "ns", "iris")) == {"c1", "c2"}
    _runtime_available(hub, "c1", "sk", "False")  # the runtime degrades: the model stays
    out = run(hub, c.KIND_INFERENCE_SERVICE, isvc_body(template=named))
    assert out.deleted == 0
    assert set(hub.works_of(c.KIND_INFERENCE_SERVICE, "ns", "iris")) == {"c1", "c2"}

    # Another model naming no runtime: the auto-selecting one of its format holds it back
    # (format names compare as KServe compares them, case-insensitively).
    hub.works.clear()
    platform_ready(hub, "c1", "c2")
    auto = {"predictor": {"model": {"modelFormat": {"name": "SKLearn"}}}}
    run(hub, c.KIND_INFERENCE_SERVICE, isvc_body(template=auto))
    assert set(hub.works_of(c.KIND_INFERENCE_SERVICE, "ns", "iris")) == {"c2"}
    # Naming another runtime, or another format with none named: nothing to wait for.
    for template in ({"predictor": {"model": {"modelFormat": {"name": "sklearn"},
                                              "runtime": "kserve-sklearnserver"}}},
                     {"predictor": {"model": {"modelFormat": {"name": "xgboost"}}}}):
        hub.works.clear()
        platform_ready(hub, "c1", "c2")
        run(hub, c.KIND_INFERENCE_SERVICE, isvc_body(template=template))
        assert set(hub.works_of(c.KIND_INFERENCE_SERVICE, "ns", "iris")) == {"c1", "c2"}, template
