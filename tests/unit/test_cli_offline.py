"""``render`` and ``diff`` offline: what the command line renders is exactly what the manager
writes (its reconciler on the fake hub), per cluster and its labels."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from addon_api import constants as c
from addon_cli import main as cli
from addon_cli import offline
from addon_manager.facts import naming
from addon_manager.shell.reconcile import Reconciler
from testbed.support.fake_hub import OPEN_POLICY, FakeHub
from testbed.support.sealing import memory_sealer
from tests.unit.test_manager_reconcile import isvc_body, msv_body, platform_ready

ISVC = c.KIND_INFERENCE_SERVICE


def _intent() -> dict[str, Any]:
    body = isvc_body(template={"predictor": {"model": {
        "modelFormat": {"name": "sklearn"}, "storageUri": "s3://models/iris"}}})
    body["spec"]["overrides"] = [{"clusterSelector": {"matchLabels": {"env": "prod"}},
                                  "patch": {"template": {"predictor": {"minReplicas": 3}}}}]
    return body


def _written(body: dict[str, Any], labels: dict[str, dict[str, str]]) -> FakeHub:
    hub = FakeHub(placements={("ns", "p"): frozenset(labels)}, labels=labels)
    platform_ready(hub, *labels)
    asyncio.run(Reconciler(hub, hub, memory_sealer(),
                           admin=OPEN_POLICY).reconcile(body["kind"], body))
    return hub


def test_render_is_byte_identical_to_what_the_manager_writes() -> None:
    labels = {"c1": {"env": "dev"}, "c2": {"env": "prod"}}
    body = _intent()
    hub = _written(body, labels)
    intent = offline.intent_of(body)
    for cluster, cl_labels in labels.items():
        mine = offline.work_for(intent, cluster, cl_labels)
        theirs = hub.bodies[(cluster, naming.work_name(ISVC, "ns", "iris"))]
        assert json.dumps(mine, sort_keys=True) == json.dumps(theirs, sort_keys=True)
    # The override applies where the labels say (the render reads the labels given).
    prod = offline.work_for(intent, "c2", labels["c2"])
    assert prod["spec"]["workload"]["manifests"][0]["spec"]["predictor"]["minReplicas"] == 3


def test_a_model_serving_renders_as_the_manager_writes_it_too() -> None:
    body = msv_body("kserve", "2026-01-01T00:00:00Z")
    hub = FakeHub(placements={("ns", "p"): frozenset({"c1"})})
    asyncio.run(Reconciler(hub, hub, memory_sealer(),
                           admin=OPEN_POLICY).reconcile(body["kind"], body))
    theirs = hub.bodies[("c1", naming.work_name(c.KIND_MODEL_SERVING, "ns", "kserve"))]
    assert offline.work_for(offline.intent_of(body), "c1", {}) == theirs


def test_diff_shows_only_what_changes_per_cluster() -> None:
    labels = {"c1": {"env": "dev"}, "c2": {"env": "prod"}}
    hub = _written(_intent(), labels)
    name = naming.work_name(ISVC, "ns", "iris")
    on_hub = {cl: hub.bodies[(cl, name)] for cl in labels}
    same = offline.intent_of(_intent())
    assert offline.diff(same, labels.items(), on_hub) == {"c1": "", "c2": ""}
    changed = _intent()
    changed["spec"]["template"]["predictor"]["model"]["storageUri"] = "s3://models/iris-v2"
    # c2 left the placement; c3 joined it.
    out = offline.diff(offline.intent_of(changed), [("c1", labels["c1"]), ("c3", {})], on_hub)
    assert "-            storageUri: s3://models/iris\n" in out["c1"]
    assert "+            storageUri: s3://models/iris-v2\n" in out["c1"]
    assert out["c2"].startswith(f"--- hub: c2/{name}\n+++ /dev/null")
    assert out["c3"].startswith(f"--- /dev/null\n+++ render: c3/{name}")


def test_render_command_prints_yaml_per_cluster_and_refuses_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "iris.yaml"
    path.write_text(yaml.safe_dump_all([{"kind": "Placement", "metadata": {"name": "p"}},
                                        _intent()]))
    assert cli.main(["render", "-f", str(path), "--cluster", "c1",
                     "--cluster", "c2=env=prod,zone=a"]) == 0
    out = capsys.readouterr()
    works = list(yaml.safe_load_all(out.out))
    assert [w["metadata"]["namespace"] for w in works] == ["c1", "c2"]
    assert "skipping Placement p (not an intent)" in out.err
    bad = _intent()
    bad["spec"]["template"]["predictor"] = {"model": "not a mapping"}
    path.write_text(yaml.safe_dump(bad))
    assert cli.main(["render", "-f", str(path), "--cluster", "c1"]) == 2
    assert "is invalid: spec." in capsys.readouterr().err
    assert cli.main(["render", "-f", str(path)]) == 2
    assert "name at least one --cluster" in capsys.readouterr().err
    with pytest.raises(offline.RenderFailed, match="KEY=VALUE"):
        offline.parse_cluster("c1=env")


def test_a_sealed_payload_is_shown_as_a_placeholder() -> None:
    conn = {"apiVersion": c.API_VERSION, "kind": c.KIND_STORAGE_CONNECTION,
            "metadata": {"name": "s3", "namespace": "ns"},
            "spec": {"placementRef": {"name": "p"}, "type": "s3",
                     "secretRef": {"name": "creds"}, "targetNamespaces": ["models"],
                     "s3": {"endpoint": "http://minio:9000", "bucket": "models"}}}
    work = offline.work_for(offline.intent_of(conn), "c1", {})
    sealed = work["spec"]["workload"]["manifests"][0]["spec"]
    assert sealed["sealed"] == offline.SEALED_SHOWN and sealed["keyId"] == offline.SEALED_SHOWN


def test_a_tenants_works_are_rendered_as_its_executor_and_diff_keeps_the_hubs() -> None:
    intent = offline.intent_of(_intent())
    # The manager's default policy: each hub namespace its own spoke namespace, an executor.
    [work] = offline.render_all(intent, [("c1", {})], policy="", agent_namespace="agents")
    account = work["spec"]["executor"]["subject"]["serviceAccount"]
    assert account == {"namespace": "agents", "name": "model-serving-tenant-ns"}
    [open_work] = offline.render_all(intent, [("c1", {})], policy="*=*")
    assert "executor" not in open_work["spec"]
    assert work["metadata"]["annotations"] != open_work["metadata"]["annotations"]
    # diff takes the executor from the hub's work: no difference for the same intent, and a
    # new cluster gets the same executor.
    assert offline.diff(intent, [("c1", {}), ("c2", {})], {"c1": work})["c1"] == ""
    assert "name: model-serving-tenant-ns" in offline.diff(
        intent, [("c1", {}), ("c2", {})], {"c1": work})["c2"]
    with pytest.raises(offline.RenderFailed, match="--target-namespaces"):
        offline.executor_of(intent, "bad entry without equals")


def test_diff_fills_in_the_hubs_defaults_before_it_compares() -> None:
    # ``laterField``: a field a newer work API defaults and the manager does not render.
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "manifestConfigs": {"type": "array", "items": {"type": "object", "properties": {
            "feedbackScrapeType": {"type": "string", "default": "Poll"},
            "laterField": {"type": "string", "default": "Later"}}}},
        "deleteOption": {"type": "object", "default": {"propagationPolicy": "Foreground"}}}}}}
    assert offline.with_defaults({"spec": {"manifestConfigs": [{}, {"feedbackScrapeType": "x"}]}},
                                 schema) == {"spec": {
        "manifestConfigs": [{"feedbackScrapeType": "Poll", "laterField": "Later"},
                            {"feedbackScrapeType": "x", "laterField": "Later"}],
        "deleteOption": {"propagationPolicy": "Foreground"}}}
    intent = offline.intent_of(_intent())
    [work] = offline.render_all(intent, [("c1", {})], policy="*=*")
    stored = offline.with_defaults(work, schema)  # the hub's copy, defaults filled in
    assert offline.diff(intent, [("c1", {})], {"c1": stored})["c1"] != ""
    assert offline.diff(intent, [("c1", {})], {"c1": stored}, schema)["c1"] == ""
