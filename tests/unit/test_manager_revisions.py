"""Revisions: what a spec change is, how it is numbered and kept, what is pruned."""

from __future__ import annotations

from addon_api import constants as c
from addon_manager import revisions as rv

KIND = "MultiClusterInferenceService"


def body(replicas: int, strategy: str = "Progressive", placement: str = "p") -> dict[str, object]:
    return {"metadata": {"name": "iris", "namespace": "ns", "uid": "u-1"},
            "spec": {"placementRef": {"name": placement}, "targetNamespace": "models",
                     "template": {"predictor": {"minReplicas": replicas}},
                     "rollout": {"strategy": strategy}}}


def kept(*specs: tuple[int, dict[str, object]]) -> list[rv.RevisionFact]:
    return [rv.RevisionFact(n, rv.digest(s), f"iris-{n}", s) for n, s in specs]


def test_a_new_spec_is_a_new_numbered_revision_owned_by_the_intent() -> None:
    first = rv.resolve(KIND, body(1), [])
    assert first.target == 1 and first.create is not None
    obj = first.create
    assert obj["revision"] == 1 and obj["data"] == {"spec": {
        "targetNamespace": "models", "template": {"predictor": {"minReplicas": 1}}}}
    assert obj["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert obj["metadata"]["labels"][c.LABEL_INTENT_KIND] == KIND
    parsed = rv.parse(obj | {"metadata": obj["metadata"] | {"namespace": "ns"}})
    assert parsed is not None
    key, fact = parsed
    assert key == (KIND, "ns", "iris") and fact.number == 1
    second = rv.resolve(KIND, body(2), [fact])
    assert second.target == 2 and second.create is not None
    assert set(second.known) == {1, 2}


def test_rollout_settings_and_placement_are_not_part_of_a_revision() -> None:
    one = rv.resolve(KIND, body(1), [])
    assert one.create is not None
    _, fact = rv.parse(one.create) or (None, None)
    assert fact is not None
    again = rv.resolve(KIND, body(1, strategy="All", placement="q"), [fact])
    assert (again.target, again.create) == (1, None)


def test_a_spec_back_to_an_earlier_revision_reuses_its_number() -> None:
    revs = kept((1, rv.content(body(1)["spec"])), (2, rv.content(body(2)["spec"])))  # type: ignore[arg-type]
    back = rv.resolve(KIND, body(1), revs)
    assert (back.target, back.create) == (1, None)


def test_others_objects_are_not_revisions() -> None:
    assert rv.parse({"metadata": {"labels": {}}, "revision": 1, "data": {"spec": {}}}) is None


def test_pruning_keeps_what_is_used_and_the_newest_up_to_the_limit() -> None:
    revs = kept(*[(n, {"n": n}) for n in range(1, 8)])
    assert rv.to_prune(revs, in_use=[2, 7], limit=3) == ["iris-1", "iris-3", "iris-4",
                                                          "iris-5"]
    assert rv.to_prune(revs, in_use=[1, 2, 3, 4], limit=2) == ["iris-5", "iris-6", "iris-7"]
    assert rv.to_prune(revs, in_use=[], limit=10) == []
