"""Removal decisions of the agent: never a controller before the objects it finalizes."""

from __future__ import annotations

from typing import Any

from addon_agent.pure import removal
from addon_api import constants as c
from addon_api import tenancy

ADDON = {c.LABEL_MANAGED_BY: c.FIELD_MANAGER, c.LABEL_PART_OF: c.ADDON_NAME}
APPLIED = {"apiVersion": "work.open-cluster-management.io/v1", "kind": "AppliedManifestWork",
           "name": "0a1b-work"}


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
        "RemovalBlocked", "ForeignObjectsPresent")
    assert held.message.startswith("1 InferenceService not created by the add-on remain")
    assert "team/x" in held.message and "models/a" not in held.message


SR_CRD = "servingruntimes.serving.kserve.io"
IG_CRD = "inferencegraphs.serving.kserve.io"
CSR_CRD = "clusterservingruntimes.serving.kserve.io"


def of_our_crd(kind: str, ns: str, name: str, crd: str, labels: dict[str, str] | None = None,
               own: bool = False) -> removal.Instance:
    return removal.instance_of(obj(kind, ns, name, labels=labels, finalizers=False), crd,
                               own=own, crd_ours=True)


def test_user_objects_of_any_kind_whose_crd_the_removal_deletes_block_with_kinds_and_counts(
) -> None:
    users = [
        of_our_crd("ServingRuntime", "team", "b", SR_CRD),
        of_our_crd("ServingRuntime", "team", "a", SR_CRD),
        of_our_crd("InferenceGraph", "team", "g", IG_CRD),
    ]
    ours = [
        # the stack's own (bundle) runtime and a runtime an intent's work created
        of_our_crd("ClusterServingRuntime", "", "kserve-sklearnserver", CSR_CRD, ADDON, own=True),
        of_our_crd("ServingRuntime", "models", "mcsr", SR_CRD, {c.LABEL_PART_OF: c.ADDON_NAME}),
    ]
    held = removal.hold(users + ours, force=False)
    assert held is not None
    assert (held.phase, held.reason) == ("RemovalBlocked", "ForeignObjectsPresent")
    assert held.message.startswith(
        "2 ServingRuntime, 1 InferenceGraph not created by the add-on remain"), held.message
    assert "ServingRuntime team/a, ServingRuntime team/b" in held.message
    assert "kserve-sklearnserver" not in held.message and "mcsr" not in held.message
    assert removal.hold(ours, force=False) is None
    # force goes ahead (what is left is kept: see the leftovers test)
    assert removal.hold(users + ours, force=True) is None


def test_a_user_object_under_a_crd_the_removal_keeps_does_not_block() -> None:
    # (a CRD someone else installed is never deleted: neither are its objects)
    theirs = removal.instance_of(obj("ServingRuntime", "team", "a", finalizers=False), SR_CRD,
                                 own=False, crd_ours=False)
    assert removal.hold([theirs], force=False) is None


def test_an_inventory_entry_never_makes_someone_elses_object_the_stacks() -> None:
    # the inventory lists a bundle runtime of that name, but the live one is not labelled ours
    theirs = removal.instance_of(obj("ClusterServingRuntime", "", "kserve-xgbserver",
                                     finalizers=False), CSR_CRD, own=True, crd_ours=True)
    assert not theirs.own
    held = removal.hold([theirs], force=False)
    assert held is not None and "ClusterServingRuntime kserve-xgbserver" in held.message


def test_user_objects_leave_out_the_add_ons_the_systems_and_derived_ones() -> None:
    def o(kind: str, name: str, **meta: Any) -> dict[str, Any]:
        return {"kind": kind, "metadata": {"name": name, "namespace": "ml", **meta}}

    assert removal.user_objects([
        o("ConfigMap", "kube-root-ca.crt"),
        o("ServiceAccount", "default"),
        o("Event", "x.1"),
        o("Lease", "controller-leader"),
        o("Secret", "storage-config", labels=ADDON),
        o("RoleBinding", "model-serving-monitoring", labels=ADDON),
        o("Pod", "model-abc", ownerReferences=[{"kind": "ReplicaSet", "name": "model"}]),
        o("Secret", "default-token", annotations={removal.SA_NAME_ANNOTATION: "default"}),
        o("ConfigMap", "users-config"),
        o("InferenceService", "theirs"),
        # placed by a ManifestWork: someone else's counts, the add-on's does not
        o("ConfigMap", "from-a-work", ownerReferences=[APPLIED]),
        o("InferenceService", "ours", labels=ADDON, ownerReferences=[APPLIED]),
    ]) == ["ConfigMap ml/from-a-work", "ConfigMap ml/users-config", "InferenceService ml/theirs"]


def test_a_tenants_access_grant_keeps_its_namespace() -> None:
    """The hub's access work put the tenant's Role and RoleBinding there: deleting the
    namespace with the stack would revoke the grant behind the hub's back."""
    grant = {**ADDON, c.LABEL_INTENT_KIND: tenancy.ACCESS_KIND}
    contents = {"models": [
        {"kind": "Role", "metadata": {
            "name": "model-serving-tenant-demo", "namespace": "models", "labels": grant,
            # as OCM's work agent applies it
            "ownerReferences": [{"apiVersion": "work.open-cluster-management.io/v1",
                                 "kind": "AppliedManifestWork", "name": "abc-access"}]}},
        {"kind": "Secret", "metadata": {"name": "storage-config", "namespace": "models",
                                        "labels": ADDON}},
    ]}
    assert removal.user_objects(contents["models"]) == [
        "Role models/model-serving-tenant-demo"]
    left = removal.leftovers([], crds=[SR_CRD], namespaces=["models"], contents=contents,
                             force=False)
    assert left.namespaces == {"models"}


def test_an_agent_created_namespace_holding_user_objects_is_kept_without_force() -> None:
    contents = {
        "ml-users": [{"kind": "ConfigMap", "metadata": {"name": "users-config",
                                                      "namespace": "ml-users"}}],
        "ml-empty": [{"kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt",
                                                      "namespace": "ml-empty"}}],
        "elsewhere": [{"kind": "ConfigMap", "metadata": {"name": "x", "namespace": "elsewhere"}}],
    }
    left = removal.leftovers([], crds=[SR_CRD], namespaces=["ml-users", "ml-empty"],
                             contents=contents, force=False)
    assert left.namespaces == {"ml-users"} and left.crds == frozenset()
    assert left.message == (
        "the stack is removed; left in place because they still hold objects the agent does "
        "not delete: Namespace ml-users (holds ConfigMap ml-users/users-config)")
    assert removal.leftovers([], [SR_CRD], ["ml-empty"], contents, force=False) == (
        removal.Leftovers())


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
