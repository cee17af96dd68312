"""The agent's platform gauges: only the platform a cluster is asked to run has a series."""

from __future__ import annotations

from addon_agent.io import metrics


def _platforms() -> dict[str, float]:
    return {
        s.labels["platform"]: s.value
        for m in metrics.PLATFORM_READY.collect() for s in m.samples
    }


def test_only_the_asked_platform_is_exported() -> None:
    metrics.record_platform("KServe", False, {"kserve-controller-manager": False})
    assert _platforms() == {"KServe": 0}  # ModelMesh is not "not ready": it is not asked for
    metrics.record_platform("KServe", True, {"kserve-controller-manager": True})
    assert _platforms() == {"KServe": 1}
    metrics.record_platform("ModelMesh", True, {})  # the cluster switched platforms
    assert _platforms() == {"ModelMesh": 1}
    metrics.record_platform("", False, {})  # the stack was removed
    assert _platforms() == {}


def test_the_platform_series_names_the_stack_version_and_an_upgrade_replaces_it() -> None:
    metrics.record_platform("KServe", True, {}, "v0.17.0")
    metrics.record_platform("KServe", True, {}, "v0.20.0")
    got = [(s.labels["platform"], s.labels["version"], s.value)
           for m in metrics.PLATFORM_READY.collect() for s in m.samples]
    assert got == [("KServe", "v0.20.0", 1)]  # one series: the dashboard's "now" table
    metrics.record_platform("", False, {})


def _models() -> tuple[dict[tuple[str, str], float], dict[tuple[str, str, str], float]]:
    ready = {(s.labels["model_namespace"], s.labels["name"]): s.value
             for m in metrics.MODEL_READY.collect() for s in m.samples}
    failed = {(s.labels["model_namespace"], s.labels["name"], s.labels["reason"]): s.value
              for m in metrics.MODEL_LOAD_FAILED.collect() for s in m.samples}
    return ready, failed


def _isvc(name: str, ready: str, model: dict[str, object] | None = None) -> dict[str, object]:
    return {"metadata": {"namespace": "models", "name": name},
            "status": {"conditions": [{"type": "Ready", "status": ready}],
                       **({"modelStatus": model} if model else {})}}


def test_per_model_readiness_and_load_failures() -> None:
    metrics.record_inference_services([
        _isvc("good", "True", {"transitionStatus": "UpToDate"}),
        _isvc("bad", "False", {"transitionStatus": "BlockedByFailedLoad",
                               "lastFailureInfo": {"reason": "ModelLoadFailed"}}),
        _isvc("invalid", "False", {"transitionStatus": "InvalidSpec"}),
        _isvc("loading", "False", {"transitionStatus": "InProgress"}),
    ])
    ready, failed = _models()
    assert ready == {("models", "good"): 1, ("models", "bad"): 0, ("models", "invalid"): 0,
                     ("models", "loading"): 0}
    assert failed == {("models", "bad", "ModelLoadFailed"): 1,
                      ("models", "invalid", "InvalidSpec"): 1}
    metrics.record_inference_services([_isvc("good", "True")])  # the others were deleted
    assert _models() == ({("models", "good"): 1}, {})
