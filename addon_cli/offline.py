"""``render`` and ``diff``: the ManifestWorks an intent makes for each cluster, without a hub.

The works come from the manager's own rendering (each module of :mod:`addon_manager.kinds`), so what
``render`` prints is what the manager writes, byte for byte, for a cluster with those labels.
Two things only the hub knows are shown as placeholders: a StorageConnection's sealed payload
(sealed to each cluster's agent key with the manager's keys) and, for a progressive rollout,
which revision a cluster is on (``render`` marks none unless ``--revision`` is given; ``diff``
uses the revision the hub's work carries).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import yaml
from pydantic import ValidationError

from addon_api import constants as c
from addon_api import sealing
from addon_api import tenancy as api_tenancy
from addon_api.hub import (
    ModelServing,
    MultiClusterInferenceService,
    MultiClusterServingRuntime,
    StorageConnection,
)
from addon_cli.views import MODELS
from addon_manager.facts import naming
from addon_manager.kinds import (
    inference_service,
    model_serving,
    render,
    serving_runtime,
    storage_connection,
    tenant_access,
)
from addon_manager.kinds.registry import spec_of

SEALED_SHOWN = "<sealed on the hub to this cluster's agent key>"
"""What stands in for a StorageConnection's sealed payload (and its keyed render hash)."""



class RenderFailed(ValueError):
    """The intent cannot be rendered (not an intent, invalid, or invalid on a cluster)."""


def parse_cluster(arg: str) -> tuple[str, dict[str, str]]:
    """``NAME`` or ``NAME=KEY=VALUE,KEY=VALUE`` (the cluster's labels) as (name, labels)."""
    name, _, rest = arg.partition("=")
    labels: dict[str, str] = {}
    for pair in filter(None, rest.split(",")):
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise RenderFailed(f"--cluster {arg}: labels are KEY=VALUE pairs separated by commas")
        labels[key] = value
    if not name:
        raise RenderFailed(f"--cluster {arg}: no cluster name")
    return name, labels


def intent_of(doc: Mapping[str, Any], namespace: str | None = None) -> Any:
    """The intent model of a YAML document (``namespace`` when it names none)."""
    kind = str(doc.get("kind"))
    model = MODELS.get(kind)
    if model is None:
        raise RenderFailed(f"kind {kind!r} is not an intent: one of {', '.join(MODELS)}")
    body = {k: v for k, v in doc.items() if k in ("apiVersion", "kind", "metadata", "spec")}
    meta = dict(body.get("metadata") or {})
    meta.setdefault("namespace", namespace or "default")
    body["metadata"] = meta
    try:
        return model.from_object(body)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                             for e in err.errors())
        raise RenderFailed(f"{kind} {meta.get('name')} is invalid: {problems}") from err


def executor_of(intent: Any, policy: str) -> str | None:
    """The executor ServiceAccount the manager applies ``intent``'s works as (None: none).

    ``policy`` is the namespace policy, as the manager's ``--target-namespaces``.
    """
    if not spec_of(type(intent).__name__).tenant:
        return None
    try:
        return api_tenancy.parse(policy).executor(str(intent.metadata.namespace))
    except ValueError as err:
        raise RenderFailed(f"--target-namespaces: {err}") from err


def work_for(intent: Any, cluster: str, labels: dict[str, str],
             agent_namespace: str = c.AGENT_NAMESPACE, revision: int | None = None,
             executor: str | None = None) -> dict[str, Any]:
    """The ManifestWork body the manager writes for ``intent`` on one cluster.

    As the manager builds it: rendered, applied as the tenant's ``executor`` (a
    ServiceAccount in the cluster's ``agent_namespace``) when there is one, then marked with
    its rollout ``revision`` when it has one.
    """
    try:
        if isinstance(intent, ModelServing):
            rw = model_serving.render(intent, cluster, labels)
        elif isinstance(intent, MultiClusterServingRuntime):
            rw = serving_runtime.render(intent, cluster, labels)
        elif isinstance(intent, MultiClusterInferenceService):
            rw = inference_service.render(intent, cluster, labels)
        else:
            return _sealed_work(cast(StorageConnection, intent), cluster, labels,
                                agent_namespace, executor)
    except render.RenderError as err:
        raise RenderFailed(f"{cluster}: {err}") from err
    if executor is not None:
        rw = tenant_access.with_executor(rw, agent_namespace, executor)
    if revision is not None:
        rw = render.with_revision(rw, revision)
    return rw.body


def _sealed_work(intent: StorageConnection, cluster: str, labels: dict[str, str],
                 agent_namespace: str, executor: str | None) -> dict[str, Any]:
    ns, name = str(intent.metadata.namespace), str(intent.metadata.name)
    inputs = render.SealInputs(
        public_key="", key_id="<the agent's key id>",
        binding=sealing.binding_for(agent_namespace, naming.sealed_name(ns, name)),
        secret_digest="", hash_key=b"offline")
    rw = storage_connection.render(intent, cluster, labels, inputs,
                                   namespace=agent_namespace)
    if executor is not None:
        rw = tenant_access.with_executor(rw, agent_namespace, executor)
    body = rw.body
    body["spec"]["workload"]["manifests"][0]["spec"]["sealed"] = SEALED_SHOWN
    body["spec"]["workload"]["manifests"][0]["spec"]["keyId"] = SEALED_SHOWN
    body["metadata"]["annotations"][c.ANNOTATION_RENDER_HASH] = SEALED_SHOWN
    return body


def render_all(intent: Any, clusters: Sequence[tuple[str, dict[str, str]]],
               revision: int | None = None, policy: str = "",
               agent_namespace: str = c.AGENT_NAMESPACE) -> list[dict[str, Any]]:
    """Every cluster's work, in the order given (``policy``: see :func:`executor_of`)."""
    executor = executor_of(intent, policy)
    return [work_for(intent, name, labels, agent_namespace, revision, executor)
            for name, labels in clusters]


def comparable(work: Mapping[str, Any]) -> dict[str, Any]:
    """What of a work the manager decides: name, namespace, labels, annotations, spec."""
    meta = work.get("metadata") or {}
    return {
        "apiVersion": work.get("apiVersion"), "kind": work.get("kind"),
        "metadata": {k: meta[k] for k in ("name", "namespace", "labels", "annotations")
                     if k in meta},
        "spec": work.get("spec") or {},
    }


def revision_of(work: Mapping[str, Any]) -> int | None:
    """The revision annotation of a work on the hub (progressive rollouts), if any."""
    value = ((work.get("metadata") or {}).get("annotations") or {}).get(c.ANNOTATION_REVISION)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def with_defaults(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` with the default of every absent property its OpenAPI ``schema`` gives.

    As the API server fills them in when it stores an object (structural defaulting).
    """
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        out = dict(value)
        for key, sub in props.items():
            if key not in out and "default" in sub:
                out[key] = sub["default"]
        for key, item in list(out.items()):
            if key in props:
                out[key] = with_defaults(item, props[key])
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [with_defaults(item, schema["items"]) for item in value]
    return value


def executor_subject(work: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """(agent namespace, executor) a work on the hub is applied as; None: no executor."""
    account = (((work.get("spec") or {}).get("executor") or {}).get("subject") or {}).get(
        "serviceAccount") or {}
    if not account.get("name"):
        return None
    return str(account.get("namespace")), str(account["name"])


def diff(intent: Any, clusters: Iterable[tuple[str, dict[str, str]]],
         on_hub: Mapping[str, Mapping[str, Any]], schema: Mapping[str, Any] | None = None
         ) -> dict[str, str]:
    """Per cluster, the unified diff from the hub's work to what ``intent`` renders there.

    "" when equal; a work the hub lacks is all additions; a work on a cluster the intent no
    longer selects is all removals (the manager deletes it). The executor and the revision
    are the admin's and the rollout's, not the file's: they are taken from the hub's work
    (for a cluster without one, the executor from another cluster's). ``schema``: the hub's
    ManifestWork schema, whose defaults the rendered work gets before it is compared (the
    hub's copy has them).
    """
    out: dict[str, str] = {}
    selected = dict(clusters)
    applied_as = {cl: subject for cl, w in on_hub.items()
                  if (subject := executor_subject(w)) is not None}
    fallback = next(iter(applied_as.values()), None)
    for name in sorted(set(selected) | set(on_hub)):
        have = on_hub.get(name)
        agent_ns, executor = applied_as.get(name, fallback) or (c.AGENT_NAMESPACE, None)
        want = (work_for(intent, name, selected[name], agent_ns,
                         revision_of(have) if have is not None else None, executor)
                if name in selected else None)
        work = str(((want or have or {}).get("metadata") or {}).get("name"))
        old = yaml.safe_dump(comparable(have), sort_keys=True) if have is not None else ""
        if want is not None and schema is not None:
            want = with_defaults(want, schema)
        new = yaml.safe_dump(comparable(want), sort_keys=True) if want is not None else ""
        out[name] = "".join(difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True),
            f"hub: {name}/{work}" if have is not None else "/dev/null",
            f"render: {name}/{work}" if want is not None else "/dev/null"))
    return out
