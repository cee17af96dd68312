"""Rendering of every intent kind into ManifestWorks, overrides, names and hashes."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from addon_api import constants as c
from addon_api import sealing
from addon_api.hub import (
    ModelServing,
    MultiClusterInferenceService,
    MultiClusterServingRuntime,
    StorageConnection,
)
from addon_manager.facts import canonical, naming
from addon_manager.kinds import (
    agent_identity,
    inference_service,
    model_serving,
    render,
    serving_runtime,
    storage_connection,
)


def _meta(name: str = "x") -> dict[str, Any]:
    return {"name": name, "namespace": "team-a", "uid": "u1"}


def msv(**spec: Any) -> ModelServing:
    return ModelServing.from_object(
        {
            "metadata": _meta("kserve"),
            "spec": {"platform": "KServe", "placementRef": {"name": "p"}, **spec},
        }
    )


def isvc(**spec: Any) -> MultiClusterInferenceService:
    return MultiClusterInferenceService.from_object(
        {
            "metadata": _meta("iris"),
            "spec": {
                "placementRef": {"name": "p"},
                "targetNamespace": "models",
                "template": {"predictor": {"minReplicas": 1}},
                **spec,
            },
        }
    )


def mcsr(**spec: Any) -> MultiClusterServingRuntime:
    return MultiClusterServingRuntime.from_object(
        {
            "metadata": _meta("sklearn"),
            "spec": {
                "placementRef": {"name": "p"},
                "targetNamespace": "models",
                "template": {
                    "containers": [{"name": "c", "image": "img:1"}],
                    "supportedModelFormats": [{"name": "sklearn"}],
                },
                **spec,
            },
        }
    )


def sconn(**spec: Any) -> StorageConnection:
    return StorageConnection.from_object(
        {
            "metadata": _meta("s3"),
            "spec": {
                "placementRef": {"name": "p"},
                "type": "s3",
                "targetNamespaces": ["models"],
                "secretRef": {
                    "name": "creds",
                    "keys": {"access_key_id": "AK", "secret_access_key": "SK"},
                },
                "s3": {"endpoint": "http://minio:9000", "region": "eu", "bucket": "b"},
                **spec,
            },
        }
    )


def manifest(work: render.RenderedWork) -> dict[str, Any]:
    return dict(work.body["spec"]["workload"]["manifests"][0])


def test_inference_service_work() -> None:
    work = inference_service.render(isvc(deploymentMode="ModelMesh"), "cluster1", {})
    assert work.name == naming.work_name(c.KIND_INFERENCE_SERVICE, "team-a", "iris")
    assert work.body["metadata"]["namespace"] == "cluster1"
    labels = work.body["metadata"]["labels"]
    assert labels[c.LABEL_INTENT_KIND] == c.KIND_INFERENCE_SERVICE
    assert labels[c.LABEL_INTENT_NAMESPACE] == "team-a"
    assert labels[c.LABEL_INTENT_NAME] == "iris"
    assert work.body["spec"]["deleteOption"] == {"propagationPolicy": "Foreground"}
    obj = manifest(work)
    assert obj["kind"] == "InferenceService" and obj["metadata"]["namespace"] == "models"
    assert obj["metadata"]["annotations"][c.DEPLOYMENT_MODE_ANNOTATION] == "ModelMesh"
    assert obj["spec"] == {"predictor": {"minReplicas": 1}}
    config = work.body["spec"]["manifestConfigs"][0]
    assert config["updateStrategy"]["type"] == "ServerSideApply"
    assert config["updateStrategy"]["serverSideApply"]["fieldManager"].startswith("work-agent")
    # Never forced: a field someone else owns on the spoke is not taken over (issue 29, item 5).
    assert config["updateStrategy"]["serverSideApply"]["force"] is False
    paths = {p["name"]: p["path"] for p in config["feedbackRules"][0]["jsonPaths"]}
    assert paths["ready"] == '.status.conditions[?(@.type=="Ready")].status'
    assert paths["url"] == ".status.url"
    assert paths["activeModelState"] == ".status.modelStatus.states.activeModelState"
    assert work.body["metadata"]["annotations"][c.ANNOTATION_RENDER_HASH] == work.render_hash


def test_overrides_apply_in_order_to_selected_clusters_only() -> None:
    intent = isvc(
        overrides=[
            {
                "clusterNames": ["cluster2"],
                "patch": {"template": {"predictor": {"minReplicas": 2}}},
            },
            {
                "clusterSelector": {"matchLabels": {"env": "prod"}},
                "patch": {"template": {"predictor": {"minReplicas": 3, "maxReplicas": 5}}},
            },
            {"clusterNames": ["cluster3"], "patch": {"targetNamespace": "other"}},
        ]
    )
    one = manifest(inference_service.render(intent, "cluster1", {}))
    two = manifest(inference_service.render(intent, "cluster2", {}))
    both = manifest(inference_service.render(intent, "cluster2", {"env": "prod"}))
    three = manifest(inference_service.render(intent, "cluster3", {}))
    assert one["spec"]["predictor"] == {"minReplicas": 1}
    assert two["spec"]["predictor"] == {"minReplicas": 2}
    assert both["spec"]["predictor"] == {"minReplicas": 3, "maxReplicas": 5}
    assert three["metadata"]["namespace"] == "other"


def test_override_null_removes_a_field() -> None:
    intent = isvc(
        overrides=[
            {"clusterNames": ["c"], "patch": {"template": {"predictor": {"minReplicas": None}}}}
        ]
    )
    assert manifest(inference_service.render(intent, "c", {}))["spec"] == {"predictor": {}}


def test_hash_is_stable_and_follows_content() -> None:
    a = inference_service.render(isvc(), "cluster1", {})
    b = inference_service.render(isvc(), "cluster1", {})
    other = inference_service.render(isvc(deploymentMode="ModelMesh"), "cluster1", {})
    assert a.render_hash == b.render_hash != other.render_hash
    assert a.render_hash != inference_service.render(isvc(), "cluster2", {}).render_hash


def test_model_serving_work() -> None:
    intent = msv(
        servingNamespaces=["models"],
        overrides=[
            {
                "clusterSelector": {"matchLabels": {"env": "prod"}},
                "patch": {"components": {"kserve-controller-manager": {"replicas": 2}}},
            }
        ],
    )
    plain = manifest(model_serving.render(intent, "c1", {}))
    prod = manifest(model_serving.render(intent, "c2", {"env": "prod"}))
    assert plain["kind"] == c.KIND_SERVING_PLATFORM
    assert plain["metadata"]["name"] == naming.SERVING_PLATFORM_NAME
    assert "namespace" not in plain["metadata"]
    assert plain["spec"]["platform"] == "KServe"
    assert plain["spec"]["servingNamespaces"] == ["models"]
    assert plain["spec"]["source"] == {"namespace": "team-a", "name": "kserve"}
    assert "placementRef" not in plain["spec"] and "overrides" not in plain["spec"]
    assert "components" not in plain["spec"] or not plain["spec"]["components"]
    assert prod["spec"]["components"]["kserve-controller-manager"]["replicas"] == 2


def test_model_serving_removed_is_carried() -> None:
    body = manifest(model_serving.render(msv(managementState="Removed"), "c1", {}))
    assert body["spec"]["managementState"] == "Removed"


def test_override_making_spec_invalid_is_a_render_error() -> None:
    intent = msv(overrides=[{"clusterNames": ["c1"], "patch": {"platform": "Nope"}}])
    with pytest.raises(render.RenderError, match=r"c1 is invalid after overrides: spec\.platform"):
        model_serving.render(intent, "c1", {})
    model_serving.render(intent, "c2", {})  # a cluster the override does not select


# Found by tests/reliability/test_bad_input.py: overrides of the other kinds were not validated,
# so one patch could send an invalid ServingRuntime, InferenceService or SealedStorageConnection.
@pytest.mark.parametrize(
    ("make", "patch", "field"),
    [
        (mcsr, {"targetNamespace": "Bad_NS"}, "spec.targetNamespace"),
        (mcsr, {"template": {"containers": []}}, "spec.template.containers"),
        (isvc, {"deploymentMode": "Serverless"}, "spec.deploymentMode"),
        (isvc, {"template": {"predictor": None}}, "spec.template.predictor"),
        (isvc, {"storageConnections": ["a", "a"]}, "spec.storageConnections"),
        (sconn, {"type": "ftp"}, "spec.type"),
        (sconn, {"targetNamespaces": [7]}, "spec.targetNamespaces.0"),
        (sconn, {"s3": None}, "spec: Value error, spec.s3 must be set"),  # a rule on the spec
        (isvc, {"": []}, 'spec."": Extra inputs are not permitted'),  # an empty key is shown
    ],
)
def test_every_kind_validates_the_spec_after_overrides(
    make: Any, patch: dict[str, Any], field: str
) -> None:
    intent = make(overrides=[{"clusterNames": ["c1"], "patch": patch}])

    def work(cluster: str) -> render.RenderedWork:
        if isinstance(intent, StorageConnection):
            key = sealing.public_key_of(sealing.generate_private_key())
            return storage_connection.render(intent, cluster, {}, _inputs(key))
        if isinstance(intent, MultiClusterServingRuntime):
            return serving_runtime.render(intent, cluster, {})
        return inference_service.render(intent, cluster, {})

    with pytest.raises(render.RenderError, match="invalid after overrides") as err:
        work("c1")
    assert f"overrides: {field}" in str(err.value), err.value
    work("c2")


def test_validating_after_overrides_keeps_what_was_rendered() -> None:
    # Validation happens on every render: without overrides the bytes (and so the hashes that
    # decide whether a work is rewritten) are the same as before validation was added.
    for intent in (mcsr(), isvc(), isvc(storageConnections=["s3"])):
        spec = intent.spec.to_dict()
        for key in ("placementRef", "overrides"):
            spec.pop(key)
        assert render.validated_cluster_spec(intent, "c1", {}) == (None, spec)


def test_oversized_template_is_a_render_error_naming_the_field() -> None:
    # Found by tests/reliability/test_bad_input.py: the template is open (any field), so the API
    # server admits a 600 kB one, but OCM's webhook refuses ManifestWorks over 500 KiB.
    big = mcsr(template={
        "containers": [{"name": "c", "image": "img:1", "args": ["x" * 600_000]}],
        "supportedModelFormats": [{"name": "sklearn"}],
    })
    with pytest.raises(render.RenderError, match=r"^spec\.template: .* bytes of manifests"):
        serving_runtime.render(big, "c1", {})


def test_serving_runtime_work() -> None:
    work = serving_runtime.render(mcsr(), "c1", {})
    obj = manifest(work)
    assert obj["apiVersion"] == "serving.kserve.io/v1alpha1" and obj["kind"] == "ServingRuntime"
    assert obj["metadata"] == {
        "name": "sklearn",
        "namespace": "models",
        "labels": render.owner_labels(c.KIND_SERVING_RUNTIME, "team-a", "sklearn"),
    }
    assert obj["spec"]["containers"][0]["image"] == "img:1"
    paths = work.body["spec"]["manifestConfigs"][0]["feedbackRules"][0]["jsonPaths"]
    assert paths == [{"name": "disabled", "path": ".spec.disabled"}]


HASH_KEY = b"render-hash-key-of-these-tests"


def _inputs(key: str, secret_digest: str = "d1", hash_key: bytes = HASH_KEY) -> render.SealInputs:
    return render.SealInputs(key, sealing.key_id(key), "ns/x", secret_digest, hash_key)


def test_storage_connection_hash_covers_inputs_not_ciphertext() -> None:
    key = sealing.public_key_of(sealing.generate_private_key())
    other = sealing.public_key_of(sealing.generate_private_key())
    a = storage_connection.render(sconn(), "c1", {}, _inputs(key))
    assert (
        a.render_hash
        == storage_connection.render(sconn(), "c1", {}, _inputs(key)).render_hash
    )
    assert (
        a.render_hash
        != storage_connection.render(sconn(), "c1", {}, _inputs(other)).render_hash
    )
    assert (
        a.render_hash
        != storage_connection.render(sconn(), "c1", {}, _inputs(key, "d2")).render_hash
    )
    spec = manifest(a)["spec"]
    assert spec["keyId"] == sealing.key_id(key)
    assert spec["sealed"].startswith(storage_connection.SEALED_PLACEHOLDER_PREFIX)
    assert spec["entryName"] == "s3" and spec["targetNamespaces"] == ["models"]
    assert manifest(a)["metadata"]["namespace"] == c.AGENT_NAMESPACE


def test_sealed_payload_opens_with_the_agent_key_only() -> None:
    private = sealing.generate_private_key()
    key = sealing.public_key_of(private)
    intent = sconn()
    work = storage_connection.render(intent, "c1", {}, _inputs(key))
    assert work.sealed_spec == intent.spec
    payload = storage_connection.storage_payload(
        work.sealed_spec, {"AK": "id", "SK": "secret", "OTHER": "x"})
    assert payload == {
        "type": "s3",
        "access_key_id": "id",
        "secret_access_key": "secret",
        "endpoint_url": "http://minio:9000",
        "region": "eu",
        "bucket": "b",  # KServe's storage initializer reads this key
        "default_bucket": "b",  # ModelMesh's puller this one
    }
    signing = sealing.generate_signing_key()
    binding = storage_connection.binding_of(work)
    assert binding == sealing.Binding("c1", c.AGENT_NAMESPACE, naming.sealed_name("team-a", "s3"),
                                      ("models",), "s3", "s3")
    body = storage_connection.with_sealed(work, sealing.seal(key, binding, 7, payload, signing))
    sealed = body["spec"]["workload"]["manifests"][0]["spec"]["sealed"]
    base64.b64decode(sealed, validate=True)
    assert "secret" not in str(body)
    opened = sealing.unseal(private, binding, sealed, (sealing.verify_key_of(signing),))
    assert (opened.payload, opened.sequence) == (payload, 7)
    assert work.body["spec"]["workload"]["manifests"][0]["spec"]["sealed"].startswith(
        storage_connection.SEALED_PLACEHOLDER_PREFIX
    )  # the rendered work itself is untouched


def test_payload_without_key_mapping_takes_every_secret_key() -> None:
    intent = sconn(secretRef={"name": "creds"})
    payload = storage_connection.storage_payload(intent.spec, {"access_key_id": "a"})
    assert payload["access_key_id"] == "a"


def test_changing_a_sealed_setting_reseals() -> None:
    """Endpoint, region and bucket travel only inside the sealed payload: changing one must
    change the work's hash, or the manager would never re-seal."""
    key = sealing.public_key_of(sealing.generate_private_key())
    before = storage_connection.render(sconn(), "c1", {}, _inputs(key))
    moved = sconn(s3={"endpoint": "http://minio-2:9000", "region": "eu", "bucket": "b"})
    after = storage_connection.render(moved, "c1", {}, _inputs(key))
    assert after.render_hash != before.render_hash
    assert after.sealed_spec is not None and after.sealed_spec.s3 is not None
    secret = {"AK": "id", "SK": "secret"}
    assert storage_connection.storage_payload(after.sealed_spec, secret)["endpoint_url"] == (
        "http://minio-2:9000"
    )


def test_override_changes_the_sealed_payload_of_its_cluster_only() -> None:
    key = sealing.public_key_of(sealing.generate_private_key())
    intent = sconn(
        overrides=[
            {
                "clusterNames": ["c2"],
                "patch": {
                    "s3": {"bucket": "b-eu-2"},
                    "secretRef": {"name": "creds-c2"},
                    "targetNamespaces": ["models", "extra"],
                },
            }
        ]
    )
    secret = {"AK": "id", "SK": "sk"}
    one = storage_connection.render(intent, "c1", {}, _inputs(key))
    two = storage_connection.render(intent, "c2", {}, _inputs(key))
    assert one.sealed_spec is not None and two.sealed_spec is not None
    assert storage_connection.storage_payload(one.sealed_spec, secret)["bucket"] == "b"
    assert storage_connection.storage_payload(two.sealed_spec, secret) == {
        "type": "s3",
        "access_key_id": "id",
        "secret_access_key": "sk",
        "endpoint_url": "http://minio:9000",
        "region": "eu",
        "bucket": "b-eu-2",
        "default_bucket": "b-eu-2",
    }
    assert one.sealed_spec.secret_ref is not None and two.sealed_spec.secret_ref is not None
    assert (one.sealed_spec.secret_ref.name, two.sealed_spec.secret_ref.name) == (
        "creds", "creds-c2"
    )
    assert manifest(one)["spec"]["targetNamespaces"] == ["models"]
    assert manifest(two)["spec"]["targetNamespaces"] == ["models", "extra"]
    assert manifest(one)["spec"]["sealed"] != manifest(two)["spec"]["sealed"]
    assert two.sealed_spec.overrides == []


def test_override_that_breaks_a_storage_connection_names_the_field() -> None:
    key = sealing.public_key_of(sealing.generate_private_key())
    intent = sconn(overrides=[{"clusterNames": ["c2"], "patch": {"s3": {"region": 7}}}])
    storage_connection.render(intent, "c1", {}, _inputs(key))
    with pytest.raises(
        render.RenderError,
        match=r"c2 is invalid after overrides: spec\.s3\.region: Input should be a valid string$",
    ):
        storage_connection.render(intent, "c2", {}, _inputs(key))


def test_identity_work_is_read_only() -> None:
    work = agent_identity.render("c1")
    assert work.name == naming.IDENTITY_WORK_NAME
    config = work.body["spec"]["manifestConfigs"][0]
    assert config["updateStrategy"] == {"type": "ReadOnly"}
    assert config["resourceIdentifier"]["name"] == c.AGENT_IDENTITY_CONFIGMAP
    paths = {p["path"] for p in config["feedbackRules"][0]["jsonPaths"]}
    assert paths == {".data.publicKey", ".data.keyId", ".data.nextPublicKey", ".data.nextKeyId"}


def test_every_manifest_the_manager_reads_feedback_from_is_watched() -> None:
    """The hub learns of a change on the spoke as it happens, not one status sync later."""
    key = sealing.public_key_of(sealing.generate_private_key())
    exposed = isvc(exposure={"type": "Route", "host": "iris.apps.example.com"})
    works = [inference_service.render(exposed, "c1", {}), serving_runtime.render(mcsr(), "c1", {}),
             model_serving.render(msv(), "c1", {}),
             storage_connection.render(sconn(), "c1", {}, _inputs(key)),
             agent_identity.render("c1")]
    configs = [cfg for w in works for cfg in w.body["spec"]["manifestConfigs"]]
    assert len(configs) == 6  # the Route too
    assert all(cfg["feedbackRules"] and cfg["feedbackScrapeType"] == "Watch" for cfg in configs)


def test_identity_and_sealed_objects_go_to_the_given_agent_namespace() -> None:
    default = agent_identity.render("c1")
    assert default.render_hash == agent_identity.render("c1", c.AGENT_NAMESPACE).render_hash
    custom = agent_identity.render("c1", "custom-ns")
    assert custom.render_hash != default.render_hash  # a moved agent gets its work rewritten
    assert manifest(custom)["metadata"]["namespace"] == "custom-ns"
    config = custom.body["spec"]["manifestConfigs"][0]
    assert config["resourceIdentifier"]["namespace"] == "custom-ns"

    key = sealing.public_key_of(sealing.generate_private_key())
    name = naming.sealed_name("team-a", "s3")
    inputs = render.SealInputs(
        key, sealing.key_id(key), sealing.binding_for("custom-ns", name), "d1", HASH_KEY
    )
    work = storage_connection.render(sconn(), "c1", {}, inputs, namespace="custom-ns")
    assert manifest(work)["metadata"]["namespace"] == "custom-ns"
    config = work.body["spec"]["manifestConfigs"][0]
    assert config["resourceIdentifier"]["namespace"] == "custom-ns"
    here = render.SealInputs(
        key, sealing.key_id(key), sealing.binding_for(c.AGENT_NAMESPACE, name), "d1", HASH_KEY
    )
    assert work.render_hash != storage_connection.render(
        sconn(), "c1", {}, here
    ).render_hash


def test_work_names_are_unique_bounded_and_stable() -> None:
    a = naming.work_name(c.KIND_INFERENCE_SERVICE, "a-b", "c")
    b = naming.work_name(c.KIND_INFERENCE_SERVICE, "a", "b-c")
    assert a != b
    assert a == naming.work_name(c.KIND_INFERENCE_SERVICE, "a-b", "c")
    assert a != naming.work_name(c.KIND_SERVING_RUNTIME, "a-b", "c")
    long = naming.work_name(c.KIND_MODEL_SERVING, "n" * 63, "x" * 253)
    assert len(long) <= 253 and not long.startswith("-")
    assert long != naming.work_name(c.KIND_MODEL_SERVING, "n" * 63, "x" * 252 + "y")
    assert naming.sealed_name("ns", "s") == "ns.s"
    assert len(naming.sealed_name("n" * 63, "s" * 253)) <= 253


def test_render_hash_of_a_sealed_work_is_keyed() -> None:
    """Without the hub's hash key, neither the render-hash nor the placeholder can be computed
    again from a guess of the Secret (its digest is all a reader would need otherwise)."""
    key = sealing.public_key_of(sealing.generate_private_key())
    a = storage_connection.render(sconn(), "c1", {}, _inputs(key))
    b = storage_connection.render(sconn(), "c1", {}, _inputs(key, hash_key=b"another"))
    assert a.render_hash != b.render_hash
    assert manifest(a)["spec"]["sealed"] != manifest(b)["spec"]["sealed"]
    # What an outsider computes from the visible body and a guessed Secret digest:
    unkeyed = copy.deepcopy(a.body)
    del unkeyed["metadata"]["annotations"][c.ANNOTATION_RENDER_HASH]
    inputs = _inputs(key)
    unkeyed["spec"]["workload"]["manifests"][0]["spec"]["sealed"] = (
        storage_connection.SEALED_PLACEHOLDER_PREFIX + canonical.canonical_hash(
            [inputs.key_id, inputs.binding, inputs.secret_digest, sconn().spec.to_dict()]))
    assert canonical.canonical_hash(unkeyed) != a.render_hash
    with pytest.raises(render.RenderError, match="render-hash key"):
        storage_connection.render(sconn(), "c1", {}, _inputs(key, hash_key=b""))


OVERRIDDEN = [
    {"clusterNames": ["cluster2"], "patch": {"template": {"predictor": {"minReplicas": 2}}}},
    {"clusterSelector": {"matchLabels": {"env": "prod"}}, "patch": {"targetNamespace": "prod"}},
]
CLUSTERS: list[tuple[str, dict[str, str]]] = [
    ("cluster1", {}), ("cluster2", {}), ("cluster3", {"env": "prod"}), ("cluster4", {}),
    ('odd"name\\ü', {"env": "prod"}), ("cluster2", {"env": "prod"}),
]


@pytest.mark.parametrize("make", [
    lambda: inference_service.render, lambda: serving_runtime.render,
    lambda: model_serving.render,
])
def test_works_from_a_shared_memo_equal_those_rendered_alone(make: Any) -> None:
    """A plan renders each cluster's work from its overrides' template: the same body and hash
    as a work rendered on its own, for every selection of overrides and any cluster name."""
    fn = make()
    intent = {inference_service.render: isvc, serving_runtime.render: mcsr,
              model_serving.render: msv}[fn]
    overrides = [{**o, "patch": {}} if fn is not inference_service.render else o
                 for o in OVERRIDDEN]
    subject = intent(overrides=overrides)
    memo = render.SpecMemo()
    for cluster, labels in CLUSTERS:
        alone = fn(subject, cluster, labels)
        shared = fn(subject, cluster, labels, memo)
        assert (shared.body, shared.render_hash) == (alone.body, alone.render_hash)
        assert shared.body["metadata"]["namespace"] == cluster
    assert len(memo.works) == len({tuple(i for i, o in enumerate(subject.spec.overrides)
                                         if o.selects(cl, lb)) for cl, lb in CLUSTERS})
    assert all(t is not None for t in memo.works.values())


def test_a_spec_holding_the_template_placeholder_is_rendered_alone_and_the_same() -> None:
    subject = isvc(template={"predictor": {"minReplicas": 1, "annotations": {
        "x": render._CLUSTER_PLACEHOLDER}}})
    memo = render.SpecMemo()
    shared = inference_service.render(subject, "c1", {}, memo)
    alone = inference_service.render(subject, "c1", {})
    assert memo.works == {(): None}
    assert (shared.body, shared.render_hash) == (alone.body, alone.render_hash)


def test_an_oversized_template_is_a_render_error_from_a_shared_memo_too() -> None:
    big = mcsr(template={
        "containers": [{"name": "c", "image": "img:1", "args": ["x" * 600_000]}],
        "supportedModelFormats": [{"name": "sklearn"}],
    })
    memo = render.SpecMemo()
    for cluster in ("c1", "c2"):
        with pytest.raises(render.RenderError, match=f"for {cluster} would carry"):
            serving_runtime.render(big, cluster, {}, memo)


def test_an_exposed_model_carries_a_route_to_its_predictor_with_feedback() -> None:
    work = inference_service.render(
        isvc(exposure={"type": "Route", "host": "iris.apps.example.com"}), "c1", {})
    isvc_obj, route = work.body["spec"]["workload"]["manifests"]
    assert isvc_obj["kind"] == "InferenceService"
    assert route == {
        "apiVersion": "route.openshift.io/v1", "kind": "Route",
        "metadata": {"name": "iris", "namespace": "models",
                     "labels": render.owner_labels(c.KIND_INFERENCE_SERVICE, "team-a", "iris")},
        "spec": {"host": "iris.apps.example.com",
                 "to": {"kind": "Service", "name": "iris-predictor", "weight": 100},
                 "tls": {"termination": "edge", "insecureEdgeTerminationPolicy": "Redirect"},
                 "wildcardPolicy": "None"}}
    config = work.body["spec"]["manifestConfigs"][1]
    assert config["resourceIdentifier"] == {"group": "route.openshift.io", "resource": "routes",
                                            "name": "iris", "namespace": "models"}
    assert config["updateStrategy"]["serverSideApply"]["force"] is False
    paths = {p["name"]: p["path"] for p in config["feedbackRules"][0]["jsonPaths"]}
    assert paths["routeHost"] == ".status.ingress[0].host"
    plain = inference_service.render(isvc(exposure={"tls": "None"}), "c1", {})
    assert "tls" not in plain.body["spec"]["workload"]["manifests"][1]["spec"]
    assert "host" not in plain.body["spec"]["workload"]["manifests"][1]["spec"]


def test_an_override_turns_the_exposure_off_on_some_clusters() -> None:
    subject = isvc(exposure={"type": "Route", "host": "iris.apps.example.com"}, overrides=[
        {"clusterSelector": {"matchLabels": {"vendor": "Kubernetes"}},
         "patch": {"exposure": {"type": "None"}}}])
    memo = render.SpecMemo()
    on = inference_service.render(subject, "ocp", {"vendor": "OpenShift"}, memo)
    off = inference_service.render(subject, "kind", {"vendor": "Kubernetes"}, memo)
    assert [m["kind"] for m in on.body["spec"]["workload"]["manifests"]] == [
        "InferenceService", "Route"]
    assert [m["kind"] for m in off.body["spec"]["workload"]["manifests"]] == ["InferenceService"]
    assert len(off.body["spec"]["manifestConfigs"]) == 1
    without = inference_service.render(isvc(), "c1", {})
    assert len(without.body["spec"]["workload"]["manifests"]) == 1


def test_a_model_work_marks_its_spec_and_reads_back_the_agents_verdict() -> None:
    """Issue 30: the InferenceService carries a hash of its spec (KServe copies it onto the
    predictor Deployment it builds, which is how the agent knows KServe built this spec), and
    the work feeds back the agent's data-plane verdict and the generation it is about."""
    work = inference_service.render(isvc(), "c1", {})
    (obj,) = work.body["spec"]["workload"]["manifests"]
    digest = obj["metadata"]["annotations"][c.ANNOTATION_SPEC_HASH]
    assert len(digest) == 16
    paths = {p["name"]: p["path"]
             for p in work.body["spec"]["manifestConfigs"][0]["feedbackRules"][0]["jsonPaths"]}
    assert paths["dataplane"] == (
        ".metadata.annotations.modelserving\\.opendatahub\\.io/dataplane")
    assert paths["generation"] == ".metadata.generation"
    changed = inference_service.render(isvc(template={
        "predictor": {"model": {"modelFormat": {"name": "sklearn"},
                                "storageUri": "s3://models/other"}}}), "c1", {})
    assert manifest(changed)["metadata"]["annotations"][c.ANNOTATION_SPEC_HASH] != digest
    again = inference_service.render(isvc(), "c2", {"other": "label"})
    assert manifest(again)["metadata"]["annotations"][c.ANNOTATION_SPEC_HASH] == digest


def test_a_model_serving_without_components_sends_no_empty_map() -> None:
    """Server-side apply turns a map emptied by a new work into null, which the
    ServingPlatform schema refuses (found on the testbed: a ModelServing that dropped its
    components never reached its cluster again): empty maps are left out instead."""
    spec = manifest(model_serving.render(msv(devFlags={"images": {}}), "c1", {}))["spec"]
    assert "components" not in spec and "devFlags" not in spec
    assert spec["platform"] == "KServe" and spec["source"] == {"namespace": "team-a",
                                                               "name": "kserve"}
    with_one = manifest(model_serving.render(
        msv(components={"kserve-controller-manager": {"replicas": 1}}), "c1", {}))["spec"]
    assert with_one["components"] == {"kserve-controller-manager": {"replicas": 1}}
    assert model_serving.without_empty_maps({"a": {"b": {}}, "c": [], "d": {"e": 1}}) == {
        "c": [], "d": {"e": 1}}
