"""What the manager keeps of a MultiClusterServingRuntime, and which models resolve to it."""

from __future__ import annotations

from addon_manager.facts.runtimes import RuntimeFact, parse_runtime


def test_a_runtime_is_kept_with_its_target_placement_and_auto_selected_formats() -> None:
    fact = parse_runtime({
        "metadata": {"namespace": "team-a", "name": "sk"},
        "spec": {"placementRef": {"name": "p"}, "targetNamespace": "models", "template": {
            "supportedModelFormats": [
                {"name": "SKLearn", "version": "1", "autoSelect": True},
                {"name": "xgboost", "autoSelect": False},
                {"name": "lightgbm"},
                {"autoSelect": True},
                "not-a-format",
            ]}},
    })
    assert fact == RuntimeFact("team-a", "sk", "models", "p", frozenset({"sklearn"}))
    assert parse_runtime({"metadata": {"namespace": "a", "name": "b",
                                       "deletionTimestamp": "2026-01-01T00:00:00Z"}}) == \
        RuntimeFact("a", "b", "", "", deleting=True)


def test_kserve_would_resolve_a_model_to_it_by_name_or_by_auto_selected_format() -> None:
    fact = RuntimeFact("team-a", "sk", "models", "p", frozenset({"sklearn"}))
    assert fact.serves("models", "sk", "")
    assert fact.serves("models", "sk", "onnx")  # named: its format is KServe's to judge
    assert not fact.serves("models", "other", "sklearn")  # another runtime named
    assert fact.serves("models", "", "SKLearn")
    assert not fact.serves("models", "", "xgboost")
    assert not fact.serves("elsewhere", "sk", "sklearn")  # another namespace on the cluster
    gone = RuntimeFact("team-a", "sk", "models", "p", frozenset({"sklearn"}), deleting=True)
    assert not gone.serves("models", "sk", "sklearn")


def test_the_managers_index_keeps_each_runtime_for_its_namespace() -> None:
    import asyncio
    from typing import Any

    from addon_api import constants as c
    from addon_manager.shell import handlers

    body = {"metadata": {"namespace": "team-a", "name": "sk"},
            "spec": {"placementRef": {"name": "p"}, "targetNamespace": "models",
                     "template": {"supportedModelFormats": [
                         {"name": "sklearn", "autoSelect": True}]}}}
    runtimes = handlers.KINDS[c.KIND_SERVING_RUNTIME]
    entry = asyncio.run(handlers._intent_index(runtimes)(
        body=body, namespace="team-a", name="sk"))
    models = asyncio.run(handlers._intent_index(handlers.KINDS[c.KIND_INFERENCE_SERVICE])(
        body={"metadata": {"namespace": "team-a", "name": "iris"}, "spec": {}},
        namespace="team-a", name="iris"))
    assert not [k for k in models if k[0] == "runtime"]
    indexes: dict[str, Any] = {name: {} for name in handlers.INDEX_NAMES}
    indexes[f"{runtimes.plural}_index"] = {k: [v] for k, v in entry.items()}
    world = handlers.IndexWorld(indexes, handlers.ManagerState())
    assert world.serving_runtimes("team-a") == [parse_runtime(body)]
    assert world.serving_runtimes("team-b") == []
