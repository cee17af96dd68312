from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

import pytest
import yaml

from addon_agent import certs, storage
from addon_agent import labels as lb
from addon_agent.bundle_render import mlserver_metrics_port, pin_latest_images


def secret(data: dict[str, str], owners: dict[str, str]) -> dict[str, object]:
    return {
        "metadata": {"annotations": {lb.ANNOTATION_OWNED_ENTRIES: json.dumps(owners)}},
        "data": data,
    }


def test_put_entry_into_new_secret() -> None:
    edit = storage.put_entry(None, "s3", "ns/a", {"type": "s3"})
    assert edit.owners == {"s3": "ns/a"}
    assert json.loads(base64.b64decode(edit.data["s3"])) == {"type": "s3"}  # type: ignore[index]


def test_put_entry_keeps_foreign_entries_and_refuses_to_overwrite() -> None:
    existing = secret({"theirs": "eA=="}, {})
    edit = storage.put_entry(existing, "mine", "ns/a", {"type": "gcs"})
    assert edit.data is not None and edit.data["theirs"] == "eA=="
    with pytest.raises(storage.EntryConflict):
        storage.put_entry(existing, "theirs", "ns/a", {"type": "s3"})
    owned_by_other = secret({"x": "eA=="}, {"x": "ns/b"})
    with pytest.raises(storage.EntryConflict, match="ns/b"):
        storage.put_entry(owned_by_other, "x", "ns/a", {})


def test_remove_entry_only_own() -> None:
    existing = secret({"a": "eA==", "b": "eQ=="}, {"a": "ns/a", "b": "ns/b"})
    assert storage.remove_entry(existing, "b", "ns/a", created_by_agent=True) is None
    edit = storage.remove_entry(existing, "a", "ns/a", created_by_agent=True)
    assert edit is not None and edit.data == {"b": "eQ=="} and edit.owners == {"b": "ns/b"}
    last = secret({"a": "eA=="}, {"a": "ns/a"})
    gone = storage.remove_entry(last, "a", "ns/a", created_by_agent=True)
    assert gone is not None and gone.data is None
    kept = storage.remove_entry(last, "a", "ns/a", created_by_agent=False)
    assert kept is not None and kept.data == {}


def test_certificates_chain_and_renewal() -> None:
    now = dt.datetime.now(dt.UTC)
    ca = certs.new_ca(now)
    leaf = certs.new_leaf(ca, ["svc.ns.svc"], now)
    assert certs.leaf_valid(leaf.cert_pem, ca, ["svc.ns.svc"], now)
    assert not certs.leaf_valid(leaf.cert_pem, ca, ["other.ns.svc"], now)
    assert not certs.leaf_valid(leaf.cert_pem, certs.new_ca(now), ["svc.ns.svc"], now)
    assert not certs.needs_renewal(ca.cert_pem, now)
    later = now + certs.LEAF_LIFETIME - certs.RENEW_BEFORE + dt.timedelta(days=1)
    assert not certs.leaf_valid(leaf.cert_pem, ca, ["svc.ns.svc"], later)
    assert certs.needs_renewal(None, now)
    assert certs.needs_renewal("garbage", now)


def test_pin_latest_images() -> None:
    text = "image: kserve/kserve-controller:latest\nimage: other/x:latest\nkserve/a:v1"
    out = pin_latest_images(text, "kserve", "v0.17.0")
    assert "kserve/kserve-controller:v0.17.0" in out
    assert "other/x:latest" in out and "kserve/a:v1" in out


def _runtime(name: str, image: str, port: str | None, env: dict[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "kserve-container", "image": image, "env": [
        {"name": k, "value": v} for k, v in env.items()]}]}
    if port is not None:
        spec["annotations"] = {"prometheus.kserve.io/port": port,
                               "prometheus.kserve.io/path": "/metrics"}
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterServingRuntime",
            "metadata": {"name": name}, "spec": spec}


def test_mlservers_runtime_names_the_port_mlserver_serves_its_metrics_on() -> None:
    """KServe's kserve-mlserver annotates 8080 (MLServer's HTTP port, no /metrics there): the
    rendered runtime says 8082, or MLSERVER_METRICS_PORT when its env sets one; other runtimes,
    a runtime without the annotation and a port chosen on purpose are left alone."""
    http = {"MLSERVER_HTTP_PORT": "8080", "MLSERVER_GRPC_PORT": "9000"}
    docs = [
        _runtime("kserve-mlserver", "docker.io/seldonio/mlserver:1.7.1", "8080", http),
        _runtime("own-port", "docker.io/seldonio/mlserver:1.7.1", "8080",
                 {**http, "MLSERVER_METRICS_PORT": "9090"}),
        _runtime("chosen", "docker.io/seldonio/mlserver:1.7.1", "7000", http),
        _runtime("unscraped", "docker.io/seldonio/mlserver:1.7.1", None, http),
        _runtime("kserve-sklearnserver", "kserve/sklearnserver:v0.20.0", "8080", {}),
    ]
    out = {d["metadata"]["name"]: d["spec"].get("annotations")
           for d in yaml.safe_load_all(mlserver_metrics_port(yaml.safe_dump_all(docs)))}
    port = "prometheus.kserve.io/port"
    assert out["kserve-mlserver"] == {port: "8082", "prometheus.kserve.io/path": "/metrics"}
    assert out["own-port"][port] == "9090"
    assert out["chosen"][port] == "7000"
    assert out["unscraped"] is None
    assert out["kserve-sklearnserver"][port] == "8080"
    untouched = yaml.safe_dump_all(docs[2:])
    assert mlserver_metrics_port(untouched) == untouched
