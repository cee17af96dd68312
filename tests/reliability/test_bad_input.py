"""Bad input at scale: generated intents through the manager's pure path and a real API server.

The pure path is what the reconciler does with an intent before any write: validate the
object with its model (``from_object``), then render one ManifestWork per selected cluster
(overrides applied). For every generated intent it must either reject the object with a
pydantic ``ValidationError`` or a ``RenderError`` naming the field, or produce a ManifestWork
the hub and the cluster will accept (see :func:`check_work`).

Sizes: ``RELIABILITY_SCALE=soak`` multiplies the example counts (see ``EXAMPLES``).
"""

from __future__ import annotations

import os
import re
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from pydantic import ValidationError

from addon_api import constants as c
from addon_api import sealing
from addon_api.common import Resource
from addon_api.hub import (
    InferenceServiceTemplate,
    ModelServing,
    MultiClusterInferenceService,
    MultiClusterServingRuntime,
    ServingRuntimeTemplate,
    StorageConnection,
)
from addon_api.spoke import SealedStorageConnection, ServingPlatform
from addon_manager import naming, render
from addon_manager.reconcile import MODELS
from tests.reliability.bad_input import (
    CLUSTER_LABELS,
    Generated,
    Path_,
    intents,
    is_label,
    is_subdomain,
    json_size,
    label_problems,
)

SOAK = os.environ.get("RELIABILITY_SCALE") == "soak"
EXAMPLES = 20000 if SOAK else 1500
"""Generated intents through the pure path (``make test``: ~1,500)."""

PRIVATE_KEY = sealing.generate_private_key()
PUBLIC_KEY = sealing.public_key_of(PRIVATE_KEY)
SECRET_SENTINEL = "plaintext-credential-4c1f"
MAX_WORK_BYTES = 500 * 1024
"""OCM's limit on the manifests of one ManifestWork."""


# What a rejection must look like -----------------------------------------------------------------


def wire_path(loc: tuple[str | int, ...]) -> Path_:
    """A pydantic error location as a path into the object (aliases are the wire names)."""
    return tuple(part for part in loc if not (isinstance(part, str) and "[" in part))


def related(a: Path_, b: Path_) -> bool:
    """Whether one path is a prefix of the other."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def check_rejection(gen: Generated, err: ValidationError) -> None:
    """Every error points at (a parent or child of) a path the generator touched."""
    assert gen.touched, f"an untouched good object was rejected: {err}"
    text = str(err)
    for item in err.errors():
        loc = wire_path(tuple(item["loc"]))
        if loc:
            assert all(str(p) in text for p in loc), (loc, text)
        else:  # a rule on the whole object: its message names the field
            assert re.search(r"\b(metadata|spec)\.[a-zA-Z]", item["msg"]), item
        assert any(related(loc, t) for t in gen.touched), (
            f"error at {loc} but the generator touched {gen.touched}: {item['msg']}"
        )


# What a rendered work must look like -------------------------------------------------------------


def check_manifest(manifest: dict[str, Any], config: dict[str, Any]) -> None:
    meta = manifest["metadata"]
    assert is_subdomain(meta["name"]), meta["name"]
    if "namespace" in meta:
        assert is_label(meta["namespace"]), meta["namespace"]
    assert not label_problems(meta.get("labels", {})), label_problems(meta.get("labels", {}))
    ident = config["resourceIdentifier"]
    assert ident["name"] == meta["name"]
    assert ident.get("namespace", "") == meta.get("namespace", "")


def check_work(intent: Resource, rw: render.RenderedWork, cluster: str) -> None:
    """A ManifestWork the hub accepts and the cluster can apply, with no plaintext credential."""
    body = rw.body
    meta = body["metadata"]
    assert rw.name == meta["name"] and is_subdomain(meta["name"]), meta["name"]
    assert meta["namespace"] == cluster
    assert not label_problems(meta["labels"]), label_problems(meta["labels"])
    assert meta["annotations"][c.ANNOTATION_RENDER_HASH] == rw.render_hash
    unhashed = {**body, "metadata": {**meta, "annotations": {}}}
    assert render.canonical_hash(unhashed) == rw.render_hash
    manifests = body["spec"]["workload"]["manifests"]
    configs = body["spec"]["manifestConfigs"]
    assert manifests and len(manifests) == len(configs)
    for manifest, config in zip(manifests, configs, strict=True):
        check_manifest(manifest, config)
    assert json_size(manifests) <= MAX_WORK_BYTES
    manifest = manifests[0]
    if isinstance(intent, ModelServing):
        ServingPlatform.model_validate(manifest)
    elif isinstance(intent, MultiClusterServingRuntime):
        ServingRuntimeTemplate.model_validate(manifest["spec"])
    elif isinstance(intent, MultiClusterInferenceService):
        InferenceServiceTemplate.model_validate(manifest["spec"])
        mode = manifest["metadata"]["annotations"][c.DEPLOYMENT_MODE_ANNOTATION]
        assert mode in ("Standard", "RawDeployment", "ModelMesh")
    else:
        assert isinstance(intent, StorageConnection)
        assert rw.seal_inputs is not None and rw.sealed_spec is not None
        secret = {"AWS_ACCESS_KEY_ID": SECRET_SENTINEL, "token": SECRET_SENTINEL}
        payload = render.storage_payload(rw.sealed_spec, secret)
        sealed_body = render.with_sealed(
            rw, sealing.seal(PUBLIC_KEY, rw.seal_inputs.binding, payload)
        )
        assert SECRET_SENTINEL not in str(sealed_body)
        sealed = sealed_body["spec"]["workload"]["manifests"][0]
        SealedStorageConnection.model_validate(sealed)
        opened = sealing.unseal(PRIVATE_KEY, rw.seal_inputs.binding, sealed["spec"]["sealed"])
        assert opened == payload


def render_for(intent: Resource, cluster: str) -> render.RenderedWork:
    """What the reconciler renders for ``intent`` on ``cluster``."""
    labels = CLUSTER_LABELS[cluster]
    if isinstance(intent, ModelServing):
        return render.render_model_serving(intent, cluster, labels)
    if isinstance(intent, MultiClusterServingRuntime):
        return render.render_serving_runtime(intent, cluster, labels)
    if isinstance(intent, MultiClusterInferenceService):
        return render.render_inference_service(intent, cluster, labels)
    assert isinstance(intent, StorageConnection)
    ns, name = str(intent.metadata.namespace), str(intent.metadata.name)
    inputs = render.SealInputs(
        public_key=PUBLIC_KEY,
        key_id=sealing.key_id(PUBLIC_KEY),
        binding=sealing.binding_for(c.AGENT_NAMESPACE, naming.sealed_name(ns, name)),
        secret_digest="digest",
    )
    return render.render_storage_connection(intent, cluster, labels, inputs)


def pure_path(gen: Generated) -> str:
    """Run one generated intent through the pure path; return what happened."""
    try:
        intent = MODELS[gen.kind].from_object(gen.obj)
    except ValidationError as err:
        check_rejection(gen, err)
        return "rejected"
    outcome = "rendered"
    for cluster in CLUSTER_LABELS:
        try:
            rw = render_for(intent, cluster)
        except render.RenderError as err:
            if "bytes of manifests" in str(err):  # an oversized (but admitted) template
                assert re.match(r"spec(\.template)?: ", str(err)), err
                outcome = "too-large"
                continue
            assert any(t[:2] == ("spec", "overrides") for t in gen.touched), err
            assert re.search(r"\bspec\.[a-zA-Z]", str(err)), f"names no field: {err}"
            outcome = "render-failed"
            continue
        check_work(intent, rw, cluster)
    return outcome


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(gen=intents())
def test_pure_path_never_crashes(gen: Generated) -> None:
    event(pure_path(gen))
