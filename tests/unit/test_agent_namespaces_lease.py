from __future__ import annotations

import datetime as dt

import pytest

from addon_agent import labels as lb
from addon_agent.io import lease, namespaces
from addon_api.platform import Monitoring


def test_namespace_patch_created_vs_existing() -> None:
    created = namespaces.namespace_patch("ns", "ModelMesh", created=True)
    labels = created["metadata"]["labels"]
    assert labels["modelmesh-enabled"] == "true"
    assert labels["app.kubernetes.io/managed-by"] == "model-serving-addon"
    assert created["metadata"]["annotations"] == {lb.ANNOTATION_CREATED_BY_AGENT: "true"}
    existing = namespaces.namespace_patch("ns", "KServe", created=False)
    assert existing["metadata"]["labels"] == {lb.LABEL_SERVING_NAMESPACE: "true",
                                              **namespaces.POD_SECURITY}
    assert "annotations" not in existing["metadata"]


def test_serving_namespaces_enforce_baseline_but_keep_an_admins_level() -> None:
    """Pod Security baseline enforced (warn and audit restricted), unless someone else set a
    level: an admin's enforce restricted stays, and is not weakened."""
    fresh = namespaces.namespace_patch("ns", "KServe", created=True)["metadata"]["labels"]
    assert fresh["pod-security.kubernetes.io/enforce"] == "baseline"
    assert fresh["pod-security.kubernetes.io/warn"] == "restricted"
    admins = namespaces.namespace_patch("ns", "KServe", created=False, existing_labels={
        "pod-security.kubernetes.io/enforce": "restricted"})["metadata"]["labels"]
    assert "pod-security.kubernetes.io/enforce" not in admins
    assert admins["pod-security.kubernetes.io/audit"] == "restricted"
    ours = namespaces.namespace_patch("ns", "KServe", created=False, existing_labels={
        "pod-security.kubernetes.io/enforce": "baseline"})["metadata"]["labels"]
    assert ours["pod-security.kubernetes.io/enforce"] == "baseline"


def test_monitoring_rolebinding() -> None:
    rb = namespaces.monitoring_rolebinding("ns", ("openshift-monitoring", "prometheus-k8s"))
    assert rb["metadata"]["namespace"] == "ns"
    assert rb["roleRef"]["name"] == "view"
    assert rb["subjects"] == [
        {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "openshift-monitoring"}
    ]


def test_prometheus_subject_default_and_configured() -> None:
    assert Monitoring(enabled=True).prometheus_subject() == ("monitoring", "prometheus-k8s")
    configured = Monitoring.model_validate(
        {
            "enabled": True,
            "prometheusServiceAccount": {
                "namespace": "openshift-user-workload-monitoring",
                "name": "prometheus-user-workload",
            },
        }
    )
    assert configured.prometheus_subject() == (
        "openshift-user-workload-monitoring",
        "prometheus-user-workload",
    )
    with pytest.raises(ValueError):
        Monitoring.model_validate(
            {"prometheusServiceAccount": {"namespace": "Bad_NS", "name": "p"}}
        )
    with pytest.raises(ValueError):
        Monitoring.model_validate({"prometheusServiceAccount": {"namespace": "monitoring"}})


def test_lease_body() -> None:
    now = dt.datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC)
    body = lease.lease_body("agent-ns", 10, now)
    assert body["metadata"] == {
        "name": "model-serving",
        "namespace": "agent-ns",
        "labels": body["metadata"]["labels"],
    }
    assert body["spec"]["renewTime"] == "2026-01-02T03:04:05.006000Z"
    assert body["spec"]["leaseDurationSeconds"] == 30
