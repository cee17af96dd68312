"""Revisions: what a spec change is, how it is numbered and kept, what is pruned."""

from __future__ import annotations

from addon_api import constants as c
from addon_manager.facts import revisions as rv

KIND = "MultiClusterInferenceService"
KEY = b"k" * 32


def body(replicas: int, strategy: str = "Progressive", placement: str = "p") -> dict[str, object]:
    return {"metadata": {"name": "iris", "namespace": "ns", "uid": "u-1"},
            "spec": {"placementRef": {"name": placement}, "targetNamespace": "models",
                     "template": {"predictor": {"minReplicas": replicas}},
                     "rollout": {"strategy": strategy}}}


def kept(*specs: tuple[int, dict[str, object]]) -> list[rv.RevisionFact]:
    return [rv.RevisionFact(n, rv.digest(s), f"iris-{n}", s) for n, s in specs]


def test_a_new_spec_is_a_new_numbered_revision_owned_by_the_intent() -> None:
    first = rv.resolve(KIND, body(1), [], KEY)
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
    second = rv.resolve(KIND, body(2), [fact], KEY)
    assert second.target == 2 and second.create is not None
    assert set(second.known) == {1, 2}


def test_rollout_settings_and_placement_are_not_part_of_a_revision() -> None:
    one = rv.resolve(KIND, body(1), [], KEY)
    assert one.create is not None
    _, fact = rv.parse(one.create) or (None, None)
    assert fact is not None
    again = rv.resolve(KIND, body(1, strategy="All", placement="q"), [fact], KEY)
    assert (again.target, again.create) == (1, None)


def test_a_spec_back_to_an_earlier_revision_reuses_its_number() -> None:
    revs = kept((1, rv.content(body(1)["spec"])), (2, rv.content(body(2)["spec"])))  # type: ignore[arg-type]
    back = rv.resolve(KIND, body(1), revs, KEY)
    assert (back.target, back.create) == (1, None)


def test_others_objects_are_not_revisions() -> None:
    assert rv.parse({"metadata": {"labels": {}}, "revision": 1, "data": {"spec": {}}}) is None


def test_pruning_keeps_what_is_used_and_the_newest_up_to_the_limit() -> None:
    revs = kept(*[(n, {"n": n}) for n in range(1, 8)])
    assert rv.to_prune(revs, in_use=[2, 7], limit=3) == ["iris-1", "iris-3", "iris-4",
                                                          "iris-5"]
    assert rv.to_prune(revs, in_use=[1, 2, 3, 4], limit=2) == ["iris-5", "iris-6", "iris-7"]
    assert rv.to_prune(revs, in_use=[], limit=10) == []


def test_only_revisions_the_manager_sealed_are_the_intents() -> None:
    """A ControllerRevision with the manager's labels but not its seal (forged by whoever may
    write ControllerRevisions in the namespace) is not trusted, whatever its spec; a new
    revision is numbered above it, so no number means two specs."""
    made = rv.resolve(KIND, body(1), [], KEY)
    assert made.create is not None
    _, genuine = rv.parse(made.create | {"metadata": made.create["metadata"]
                                          | {"namespace": "ns"}}) or (None, None)
    assert genuine is not None
    forged = rv.RevisionFact(2, rv.digest({"evil": 1}), "iris-0000000000", {"evil": 1})
    copied_name = rv.RevisionFact(3, rv.digest({"evil": 1}), genuine.name, {"evil": 1})
    assert rv.trusted([genuine, forged, copied_name], KEY, KIND, "ns", "iris") == [genuine]
    assert rv.trusted([genuine], b"x" * 32, KIND, "ns", "iris") == []  # another key
    assert rv.trusted([genuine], KEY, KIND, "ns", "other") == []  # another intent
    nxt = rv.resolve(KIND, body(5), [genuine], KEY, numbered=[2, 3])
    assert nxt.target == 4 and set(nxt.known) == {1, 4}
