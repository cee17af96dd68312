"""What the platform admin allows hub tenants.

DevFlags, who may own a cluster's stack, which spoke namespaces each hub namespace may
target, and what a tenant's pods may ask of a cluster. Pure functions over the manager's
configuration (``--allow-dev-flags``, ``--stack-owner-namespaces``, ``--target-namespaces``,
``--denied-namespaces``, ``--pod-service-accounts``, ``--priority-classes``).

Two checks: :func:`refusal` reads an intent as the user wrote it (an early, intent-wide
answer), and :func:`judge_work` reads the ManifestWork the manager would send to one cluster,
after every override is merged and the result validated. The second is the guard: it sees
the objects as the cluster would receive them, so no spelling, patch or field of the input
can pass it by. The plan asks it for every work of every intent before the work is written,
rollbacks and undos included (they render old revisions under the current policy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from addon_api import confinement, tenancy
from addon_api import constants as c
from addon_api.common import Resource
from addon_api.hub import (
    ModelServing,
    MultiClusterInferenceService,
)
from addon_api.reasons import ClusterReason, IntentReason
from addon_api.rollout import MetricGate
from addon_manager.engine import promql
from addon_manager.kinds import registry

REASON_DEV_FLAGS = IntentReason.DEV_FLAGS_NOT_ALLOWED
REASON_NAMESPACE = tenancy.REASON
REASON_POD = ClusterReason.POD_NOT_ALLOWED
REASON_KIND = ClusterReason.KIND_NOT_ALLOWED
REASON_METRIC_QUERY = IntentReason.METRIC_QUERY_NOT_ALLOWED

@dataclass(frozen=True)
class Policy:
    """The admin's settings (the chart's ``manager.policy`` values)."""

    allow_dev_flags: bool = False
    """Whether ModelServings may set ``spec.devFlags.images`` / ``spec.devFlags.manifests``."""
    stack_owner_namespaces: frozenset[str] | None = None
    """Hub namespaces whose ModelServings may own a cluster's stack; None: every namespace."""
    namespaces: tenancy.NamespacePolicy = field(default_factory=tenancy.NamespacePolicy)
    """Which spoke namespaces each hub namespace may target (default: its own name)."""
    pods: confinement.PodRules = field(default_factory=confinement.PodRules)
    """What tenants' pods may ask beyond the built-in rules (ServiceAccounts, priority
    classes)."""
    shared_credential_namespaces: frozenset[str] = frozenset()
    """Spoke namespaces whose ``storage-config`` Secret the credentials of several hub
    namespaces may share (``--shared-credential-namespaces``); elsewhere a second tenant's
    StorageConnection there is refused with ``Conflict``."""

    def may_own_stack(self, namespace: str) -> bool:
        """Whether a ModelServing in ``namespace`` may own a cluster's stack."""
        return self.stack_owner_namespaces is None or namespace in self.stack_owner_namespaces


def parse_namespaces(value: str, default: str) -> frozenset[str] | None:
    """``--stack-owner-namespaces``: comma-separated names; ``*`` means every namespace.

    Empty: ``default`` alone (the manager's own namespace, the chart's release namespace):
    the platform is the platform admin's unless the admin opens it to more namespaces.
    """
    names = frozenset(n.strip() for n in value.split(",") if n.strip())
    if "*" in names:
        return None
    return names or frozenset({default})


def dev_flag_fields(intent: ModelServing) -> list[str]:
    """The devFlags fields a ModelServing sets (by their path), its overrides' patches included."""
    out = []
    flags = intent.spec.dev_flags
    if flags is not None and flags.images:
        out.append("spec.devFlags.images")
    if flags is not None and flags.manifests is not None:
        out.append("spec.devFlags.manifests")
    for i, override in enumerate(intent.spec.overrides):
        patched = override.patch.get("devFlags")
        if not isinstance(patched, dict):
            continue
        out.extend(
            f"spec.overrides[{i}].patch.devFlags.{key}"
            for key in ("images", "manifests") if patched.get(key)
        )
    return out


def _named(value: Any, path: str, many: bool) -> list[tuple[str, str]]:
    if many and isinstance(value, list):
        return [(f"{path}[{i}]", str(v)) for i, v in enumerate(value) if isinstance(v, str)]
    return [(path, value)] if not many and isinstance(value, str) else []


def namespace_fields(intent: Resource) -> list[tuple[str, str]]:
    """(field path, spoke namespace) for every spoke namespace an intent names.

    Its spec's field and the same field in every override's patch (a patch may send the
    intent elsewhere on some clusters).
    """
    kind = registry.KINDS.get(intent.kind)
    found = kind.spoke_namespaces if kind is not None else None
    if found is None:
        return []
    name, many = found
    spec = intent.to_dict().get("spec") or {}
    out = _named(spec.get(name), f"spec.{name}", many)
    for i, override in enumerate(spec.get("overrides") or []):
        patch = override.get("patch") if isinstance(override, dict) else None
        if isinstance(patch, dict):
            out += _named(patch.get(name), f"spec.overrides[{i}].patch.{name}", many)
    return out


def namespace_refusals(
    intent: Resource, policy: Policy, agent_namespace: str = c.AGENT_NAMESPACE
) -> list[str]:
    """One line per spoke namespace the intent names and ``policy`` does not allow it."""
    hub = intent.metadata.namespace or ""
    out = []
    for path, spoke in namespace_fields(intent):
        why = policy.namespaces.refusal(hub, spoke, agent_namespace)
        if why:
            out.append(f"{path}: {why}")
    return out


def namespace_message(lines: list[str]) -> str:
    """The condition message of a refusal by the namespace policy."""
    return "; ".join(lines) + "; no work is written"


def gate_refusal(intent: Resource, policy: Policy) -> tuple[str, str] | None:
    """(reason, message) when a metric of the intent asks for free PromQL it may not run.

    Its rollout's metric gate, or its fleet endpoint's spillover.

    The manager queries Prometheus with its own token, which sees every cluster's series:
    free PromQL (``spec.rollout.metricGate.query``) is the platform admin's (the hub
    namespaces that may own a stack); a tenant names a ``metric``, which the manager
    scopes to the tenant's own model (:func:`scoped_gate`).
    """
    spec = getattr(intent, "spec", None)
    gates = [("spec.rollout.metricGate", getattr(getattr(spec, "rollout", None), "metric_gate",
                                                 None)),
             ("spec.endpoint.spillover", getattr(getattr(spec, "endpoint", None), "spillover",
                                                 None))]
    namespace = intent.metadata.namespace or ""
    if policy.may_own_stack(namespace):
        return None
    for where, gate in gates:
        if gate is None or gate.query is None:
            continue
        return REASON_METRIC_QUERY, (
            f"{where}.query: free PromQL is not allowed in hub namespace {namespace!r} (it "
            "would read every cluster's metrics with the manager's token; only the namespaces "
            "of manager.policy.stackOwnerNamespaces may use it): name a metric "
            f"({where}.metric), which the manager scopes to this intent's own model; no work "
            "is written"
        )
    return None


def scoped_gate(intent: Resource, gate: MetricGate | None) -> MetricGate | None:
    """``gate`` as the manager runs it.

    A ``metric`` gate becomes the PromQL that selects only the intent's own series (its spoke
    namespaces, and for an InferenceService its own predictor pods, on the step's
    clusters); a ``query`` gate is left as written.
    """
    if gate is None or gate.metric is None:
        return gate
    spec = intent.to_dict().get("spec") or {}
    names = [v for _, v in namespace_fields(intent)]
    if not names and not isinstance(intent, ModelServing):
        names = [str(spec.get("targetNamespace") or intent.metadata.namespace or "")]
    namespaces = "|".join(promql.literal(n) for n in sorted(set(names)))
    pods = model = ""
    if isinstance(intent, MultiClusterInferenceService):
        model = str(intent.metadata.name)
        pods = promql.literal(model) + "-predictor-.*"
    query = promql.metric_query(gate, namespaces, pods, model)
    return gate.model_copy(update={"query": query, "metric": None})


def refusal(intent: Resource, policy: Policy) -> tuple[str, str] | None:
    """(reason, message) when ``policy`` refuses the intent, None when it may proceed.

    Every kind: a spoke namespace out of the namespace policy (``NamespaceNotAllowed``, the
    message naming the field and the namespace). ModelServings also: a hub namespace that may
    not own a stack, and devFlags the admin does not allow.
    """
    refused = namespace_refusals(intent, policy)
    if refused:
        return REASON_NAMESPACE, namespace_message(refused)
    gated = gate_refusal(intent, policy)
    if gated is not None:
        return gated
    if not isinstance(intent, ModelServing):
        return None
    namespace = intent.metadata.namespace or ""
    if not policy.may_own_stack(namespace):
        return REASON_NAMESPACE, (
            f"ModelServings in hub namespace {namespace!r} may not own a cluster's stack "
            "(the add-on's manager.policy.stackOwnerNamespaces does not list it); "
            "no work is written"
        )
    fields = dev_flag_fields(intent)
    if fields and not policy.allow_dev_flags:
        return REASON_DEV_FLAGS, (
            f"{' and '.join(fields)} {'is' if len(fields) == 1 else 'are'} not allowed: "
            "the add-on's configuration (manager.policy.allowDevFlags) does not allow devFlags; "
            "no work is written"
        )
    return None


DEV_FLAG_FIELDS = ("images", "manifests")
"""The fields of ``devFlags`` that replace what the agent installs."""
TENANT_KINDS = frozenset({
    ("serving.kserve.io/v1alpha1", "ServingRuntime"),
    ("serving.kserve.io/v1beta1", "InferenceService"),
    ("route.openshift.io/v1", "Route"),
    ("multicluster.x-k8s.io/v1alpha1", "ServiceExport"),
    (c.API_VERSION, c.KIND_SEALED_STORAGE_CONNECTION),
})
"""What a tenant's work may carry (anything else is refused: ``KindNotAllowed``)."""


@dataclass(frozen=True)
class Judgement:
    """Why a work may not be sent: the reason of the first refusal, and every refusal."""

    reason: str
    lines: tuple[str, ...]

    @property
    def message(self) -> str:
        """The cluster entry's message: each refused field, and that nothing was sent."""
        return "; ".join(self.lines) + " (as rendered for this cluster, overrides applied); " \
            "the work is not written"


def _namespace_lines(policy: Policy, hub: str, agent_ns: str, field_path: str,
                     namespaces: Any) -> list[str]:
    names = namespaces if isinstance(namespaces, list) else [namespaces]
    out = []
    for i, spoke in enumerate(names):
        at = f"{field_path}[{i}]" if isinstance(namespaces, list) else field_path
        why = policy.namespaces.refusal(hub, str(spoke), agent_ns)
        if why:
            out.append(f"{at}: {why}")
    return out


def _judge_manifest(manifest: Mapping[str, Any], hub: str, policy: Policy, agent_ns: str,
                    platform: bool) -> list[tuple[str, str]]:
    """(reason, line) for every refusal of one manifest of a work."""
    kind, api = str(manifest.get("kind")), str(manifest.get("apiVersion"))
    meta = manifest.get("metadata") or {}
    spec = manifest.get("spec") or {}
    out: list[tuple[str, str]] = []
    if platform:
        if kind != c.KIND_SERVING_PLATFORM:
            return [(REASON_KIND, f"a ModelServing's work carries a {kind}")]
        flags = spec.get("devFlags") or {}
        if not policy.allow_dev_flags:
            out += [(REASON_DEV_FLAGS, f"spec.devFlags.{name}: not allowed (the add-on's "
                     "manager.policy.allowDevFlags does not allow devFlags)")
                    for name in DEV_FLAG_FIELDS if flags.get(name)]
        out += [(REASON_NAMESPACE, line) for line in _namespace_lines(
            policy, hub, agent_ns, "spec.servingNamespaces", spec.get("servingNamespaces") or [])]
        return out
    if (api, kind) not in TENANT_KINDS:
        return [(REASON_KIND, f"{api} {kind} is not a kind the add-on sends for a tenant")]
    if kind == c.KIND_SEALED_STORAGE_CONNECTION:
        if meta.get("namespace") != agent_ns:
            out.append((REASON_NAMESPACE, f"a sealed connection goes only to the agent's "
                        f"namespace {agent_ns!r}, not {meta.get('namespace')!r}"))
        out += [(REASON_NAMESPACE, line) for line in _namespace_lines(
            policy, hub, agent_ns, "spec.targetNamespaces", spec.get("targetNamespaces") or [])]
        return out
    out += [(REASON_NAMESPACE, line) for line in _namespace_lines(
        policy, hub, agent_ns, "spec.targetNamespace", str(meta.get("namespace") or ""))]
    if kind == "InferenceService":
        out += [(REASON_POD, line) for line in confinement.inference_service_refusals(
            spec, "spec.template", policy.pods)]
    elif kind == "ServingRuntime":
        out += [(REASON_POD, line) for line in confinement.serving_runtime_refusals(
            spec, "spec.template", policy.pods)]
    return out


def judge_work(manifests: list[dict[str, Any]], hub_namespace: str, policy: Policy,
               agent_namespace: str, *, platform: bool = False) -> Judgement | None:
    """Why the work carrying ``manifests`` may not be sent to a cluster; None when it may.

    ``manifests`` are exactly what the work would carry (overrides merged, validated);
    ``platform`` says the work is a ModelServing's (a ServingPlatform: devFlags and serving
    namespaces are judged), else it is a tenant's (its kinds, the namespaces they go to, the
    pods they make). The reason is the first refusal's: ``NamespaceNotAllowed``,
    ``DevFlagsNotAllowed``, ``PodNotAllowed`` or ``KindNotAllowed``.
    """
    found = [item for m in manifests
             for item in _judge_manifest(m, hub_namespace, policy, agent_namespace, platform)]
    if not found:
        return None
    return Judgement(found[0][0], tuple(line for _, line in found))
