"""Bad input at scale: generated intents through the manager's pure path and a real API server.

The pure path is what the reconciler does with an intent before any write: validate the
object with its model (``from_object``), then render one ManifestWork per selected cluster
(overrides applied). For every generated intent it must either reject the object with a
pydantic ``ValidationError`` or a ``RenderError`` naming the field, or produce a ManifestWork
the hub and the cluster will accept (see :func:`check_work`).

A sample goes to the hub's API server too (server-side dry run, the CRDs installed): its
verdict must agree with the models; where they legitimately differ it is said below (names
are the API server's to check; it prunes nulls), and what only the manager checks (each
cluster's spec after overrides, the size of a work) is run through the pure path.

Sizes: ``make test`` runs 1,500 pure examples and 100 through the API server;
``RELIABILITY_SCALE=soak`` (``make soak``) 20,000 and 1,000. Derandomized: the same examples
on every run.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client.exceptions import ApiException
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
from addon_manager.facts import canonical, naming
from addon_manager.kinds import (
    inference_service,
    model_serving,
    render,
    serving_runtime,
    storage_connection,
)
from addon_manager.kinds.registry import KINDS
from tests.reliability.bad_input import (
    BAD_NAMES,
    CLUSTER_LABELS,
    ROOT,
    Generated,
    Path_,
    intents,
    is_label,
    is_subdomain,
    json_size,
    label_problems,
    valid_names,
)

SOAK = os.environ.get("RELIABILITY_SCALE") == "soak"
EXAMPLES = 20000 if SOAK else 1500
"""Generated intents through the pure path (``make test``: ~1,500)."""

PRIVATE_KEY = sealing.generate_private_key()
PUBLIC_KEY = sealing.public_key_of(PRIVATE_KEY)
SIGNING_KEY = sealing.generate_signing_key()
HASH_KEY = b"render-hash-key-of-the-bad-input-tests"
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
    if rw.seal_inputs is not None:  # keyed: a reader of works cannot test Secret guesses
        assert canonical.keyed_canonical_hash(HASH_KEY, unhashed) == rw.render_hash
    else:
        assert canonical.canonical_hash(unhashed) == rw.render_hash
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
        ref = rw.sealed_spec.secret_ref
        secret |= {key: SECRET_SENTINEL for key in (ref.keys or {}).values()} if ref else {}
        payload = storage_connection.storage_payload(rw.sealed_spec, secret)
        binding = storage_connection.binding_of(rw)
        sealed_body = storage_connection.with_sealed(
            rw, sealing.seal(PUBLIC_KEY, binding, 1, payload, SIGNING_KEY)
        )
        assert SECRET_SENTINEL not in str(sealed_body)
        sealed = sealed_body["spec"]["workload"]["manifests"][0]
        SealedStorageConnection.model_validate(sealed)
        opened = sealing.unseal(PRIVATE_KEY, binding, sealed["spec"]["sealed"],
                                (sealing.verify_key_of(SIGNING_KEY),))
        assert opened.payload == payload


def render_for(intent: Resource, cluster: str) -> render.RenderedWork:
    """What the reconciler renders for ``intent`` on ``cluster``."""
    labels = CLUSTER_LABELS[cluster]
    if isinstance(intent, ModelServing):
        return model_serving.render(intent, cluster, labels)
    if isinstance(intent, MultiClusterServingRuntime):
        return serving_runtime.render(intent, cluster, labels)
    if isinstance(intent, MultiClusterInferenceService):
        return inference_service.render(intent, cluster, labels)
    assert isinstance(intent, StorageConnection)
    ns, name = str(intent.metadata.namespace), str(intent.metadata.name)
    inputs = render.SealInputs(
        public_key=PUBLIC_KEY,
        key_id=sealing.key_id(PUBLIC_KEY),
        binding=sealing.binding_for(c.AGENT_NAMESPACE, naming.sealed_name(ns, name)),
        secret_digest="digest",
        hash_key=HASH_KEY,
    )
    return storage_connection.render(intent, cluster, labels, inputs)


def pure_path(gen: Generated) -> str:
    """Run one generated intent through the pure path; return what happened."""
    try:
        intent = KINDS[gen.kind].model.from_object(gen.obj)
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
            # a field (spec.uri) or a "spec.<path>: " clause, whose path may be any key a patch
            # adds ("0", ":", "a b"): the error names what to fix
            named = re.search(r"\bspec\.([a-zA-Z]|\"\")|\bspec\.[^;]+?: ", str(err))
            assert named, f"names no field: {err}"
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


# A sample through a real API server -----------------------------------------------------------

API_SAMPLE = 1000 if SOAK else 100
"""Generated intents submitted to the hub's API server (``make test``: 100)."""
PLURALS = {kind: spec.plural for kind, spec in KINDS.items()}
api_names = st.one_of(valid_names, st.sampled_from(BAD_NAMES))
"""Names as a user may type them: the API server checks them for every object."""


@dataclass
class Verdict:
    """What the API server said about one object (a server-side dry run)."""

    accepted: bool
    stored: dict[str, Any] | None = None
    """The object as the API server would store it (defaults applied, nulls pruned)."""
    status: int = 0
    message: str = ""
    fields: tuple[str, ...] = ()

    def names_a_field(self) -> bool:
        """Whether the rejection says which field is wrong."""
        named = re.search(r"\b(metadata|spec)\.[a-zA-Z]", self.message)
        # an unknown key, named whatever its spelling: 'unknown field "spec."' is the key ""
        unknown = re.search(r'unknown field "(metadata|spec)\.[^"]*"', self.message)
        return bool(self.fields) or named is not None or unknown is not None


@pytest.fixture(scope="module")
def hub_api(testbed: Any) -> Iterator[tuple[client.CustomObjectsApi, str]]:
    """The hub with the CRDs installed, a namespace, and a client for custom objects."""
    hub = testbed.hub
    hub.kubectl("apply", "--server-side", "--force-conflicts", "-f", f"{ROOT / 'crds'}/")
    hub.wait_crds_established(*(f"{plural}.{c.GROUP}" for plural in PLURALS.values()), timeout=60)
    namespace = f"bad-input-{uuid.uuid4().hex[:6]}"
    hub.kubectl("create", "namespace", namespace)
    yield client.CustomObjectsApi(hub.api_client()), namespace
    hub.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def submit(api: client.CustomObjectsApi, namespace: str, obj: dict[str, Any]) -> Verdict:
    """Create ``obj`` with a server-side dry run (validated as a create, nothing stored)."""
    try:
        stored = api.create_namespaced_custom_object(
            c.GROUP, c.VERSION, namespace, PLURALS[obj["kind"]], obj,
            dry_run="All", field_validation="Strict",
        )
    except ApiException as err:
        body = json.loads(err.body) if err.body else {}
        causes = (body.get("details") or {}).get("causes") or []
        return Verdict(False, None, err.status, str(body.get("message", err.reason)),
                       tuple(str(x.get("field", "")) for x in causes if x.get("field")))
    return Verdict(True, stored)


@settings(
    max_examples=API_SAMPLE,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@pytest.mark.testbed
@given(gen=intents(names=api_names))
def test_api_server_agrees_with_the_models(
    hub_api: tuple[client.CustomObjectsApi, str], gen: Generated
) -> None:
    api, namespace = hub_api
    gen.obj["metadata"]["namespace"] = namespace
    verdict = submit(api, namespace, gen.obj)
    if not verdict.accepted:
        assert verdict.status in (400, 422), verdict
        assert verdict.names_a_field(), verdict
    if not is_subdomain(gen.obj["metadata"]["name"]):
        # Object names are the API server's to check (every kind); the manager never sees one.
        # An unknown field stops decoding first (strict field validation): that error is all
        # the API server reports.
        assert not verdict.accepted, verdict
        assert "metadata.name" in verdict.message or "unknown field" in verdict.message, verdict
        event("bad name: rejected by the API server")
        return
    rejection: ValidationError | None = None
    try:
        KINDS[gen.kind].model.from_object(gen.obj)
    except ValidationError as err:
        rejection = err
    ours = rejection is None
    if not verdict.accepted:
        assert not ours, f"the model accepted what the API server rejects: {verdict}"
        event("rejected by both")
        return
    # What the manager receives is the stored object: it must read it, then render it.
    assert verdict.stored is not None
    stored = {k: v for k, v in verdict.stored.items() if k in ("apiVersion", "kind", "spec")}
    stored["metadata"] = {k: verdict.stored["metadata"][k] for k in ("name", "namespace")}
    try:
        KINDS[gen.kind].model.from_object(stored)
    except ValidationError as err:
        raise AssertionError(f"the API server stored what the model rejects: {err}") from err
    if not ours:
        # The API server drops null from fields that are not nullable (pruning); the model
        # reads a null as a wrong type. The manager only ever sees the stored object.
        assert "input_value=None" in str(rejection), rejection
        event("accepted after the API server pruned nulls")
    # Rules only the manager can check: each cluster's spec after overrides.
    event(f"accepted, manager: {pure_path(Generated(stored, gen.touched, gen.base))}")
