"""Removal decisions of the agent: never a controller before the objects it finalizes."""

from __future__ import annotations

from typing import Any

from addon_agent import removal
from addon_api import constants as c

ADDON = {c.LABEL_MANAGED_BY: c.FIELD_MANAGER, c.LABEL_PART_OF: c.ADDON_NAME}


def obj(kind: str, ns: str, name: str, labels: dict[str, str] | None = None,
        finalizers: bool = True, terminating: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {}}
    if finalizers:
        meta["finalizers"] = ["inferenceservice.finalizers"]
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"kind": kind, "metadata": meta}


def isvc(ns: str, name: str, **kw: Any) -> removal.Instance:
    return removal.instance_of(obj("InferenceService", ns, name, **kw), removal.ISVC_CRD,
                               own=False)


def test_add_on_inference_services_are_waited_for_before_anything_is_deleted() -> None:
    held = removal.hold([isvc("models", "b", labels=ADDON), isvc("models", "a", labels=ADDON)],
                        force=False)
    assert held is not None
    assert (held.phase, held.reason) == ("Removing", "WaitingForInferenceServices")
    assert held.message.startswith("waiting for InferenceServices to be deleted: models/a, "
                                   "models/b")


def test_foreign_inference_services_block_and_name_them() -> None:
    held = removal.hold([isvc("team", "x"), isvc("models", "a", labels=ADDON)], force=False)
    assert held is not None and (held.phase, held.reason) == (
        "RemovalBlocked", "ForeignInferenceServices")
    assert "team/x" in held.message and "models/a" not in held.message


def test_other_kinds_count_only_with_finalizers_and_the_stacks_own_never() -> None:
    tm = removal.instance_of(obj("TrainedModel", "team", "tm"), "trainedmodels.serving.kserve.io",
                             own=False)
    plain = removal.instance_of(obj("ServingRuntime", "team", "rt", finalizers=False),
                                "servingruntimes.serving.kserve.io", own=False)
    builtin = removal.instance_of(obj("ClusterServingRuntime", "", "sk", labels=ADDON),
                                  "clusterservingruntimes.serving.kserve.io", own=True)
    assert removal.hold([plain, builtin], force=False) is None
    held = removal.hold([tm, plain], force=False)
    assert held is not None and "TrainedModel team/tm" in held.message


def test_force_goes_ahead_but_still_waits_for_what_is_already_being_deleted() -> None:
    assert removal.hold([isvc("team", "x"), isvc("models", "a", labels=ADDON)],
                        force=True) is None
    held = removal.hold([isvc("models", "a", labels=ADDON, terminating=True)], force=True)
    assert held is not None and held.phase == "Removing"


def test_forced_removal_leaves_crds_and_namespaces_that_hold_user_objects() -> None:
    rt = removal.instance_of(obj("ServingRuntime", "models", "rt", finalizers=False),
                             "servingruntimes.serving.kserve.io", own=False)
    builtin = removal.instance_of(obj("ClusterServingRuntime", "", "sk", labels=ADDON),
                                  "clusterservingruntimes.serving.kserve.io", own=True)
    left = removal.leftovers(
        [isvc("team", "x"), rt, builtin],
        crds=[removal.ISVC_CRD, "servingruntimes.serving.kserve.io",
              "clusterservingruntimes.serving.kserve.io"],
        namespaces=["models", "other"],
    )
    assert left.crds == {removal.ISVC_CRD, "servingruntimes.serving.kserve.io"}
    assert left.namespaces == {"models"}
    assert f"CustomResourceDefinition {removal.ISVC_CRD} (1 left: team/x)" in left.message
    assert "Namespace models (holds ServingRuntime models/rt)" in left.message
    assert removal.leftovers([builtin], ["clusterservingruntimes.serving.kserve.io"],
                             []).message == ""
