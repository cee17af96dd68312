"""model_serving_cluster_stale: per cluster, how many intents show its report as Stale."""

from __future__ import annotations

from addon_manager.shell import metrics


def _series() -> dict[str, float]:
    return {
        s.labels["managed_cluster"]: s.value
        for m in metrics.CLUSTER_STALE.collect() for s in m.samples
    }


def test_counts_intents_per_cluster_and_drops_a_cluster_none_shows_stale() -> None:
    stale = metrics.StaleClusters()
    a, b = ("MultiClusterInferenceService", "ns", "a"), ("ModelServing", "ns", "b")
    stale.observe(a, ["c1", "c2"])
    stale.observe(b, ["c2"])
    assert _series() == {"c1": 1, "c2": 2}
    stale.observe(a, ["c2"])  # c1 reports again
    assert _series() == {"c2": 2}
    stale.observe(a, ["c2"])  # unchanged: nothing to do
    assert _series() == {"c2": 2}
    stale.forget(b)  # an intent that goes no longer counts
    assert _series() == {"c2": 1}
    stale.observe(a, [])
    assert _series() == {} and not stale.counts and not stale.by_intent


def test_addon_availability_follows_ocms_condition() -> None:
    from addon_manager.facts.records import parse_addon

    def addon(status: str | None) -> dict[str, object]:
        conds = [{"type": "Available", "status": status}] if status else []
        return {"metadata": {"name": "model-serving", "namespace": "c9"},
                "status": {"conditions": conds}}

    def series() -> dict[str, float]:
        return {s.labels["managed_cluster"]: s.value
                for m in metrics.ADDON_AVAILABLE.collect() for s in m.samples}

    for status, want in (("True", {"c9": 1}), ("False", {"c9": 0}), ("Unknown", {}),
                         (None, {})):
        fact = parse_addon(addon(status))
        assert fact is not None
        metrics.addon_available(fact.cluster, fact.available)
        assert series() == want, status
