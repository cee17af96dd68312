"""How an intent's spec changes reach its clusters: at once, or step by step behind gates.

A change to a MultiClusterInferenceService or MultiClusterServingRuntime is a numbered
revision kept on the hub. With spec.rollout.strategy: All every selected cluster gets the
newest revision at once (the behaviour without rollout). With Progressive or
ProgressivePerGroup the clusters move in steps; each step's clusters must pass the gates
(Ready, minSuccessTime, an optional metric query, an optional approval) before the next
step starts, and a failed gate or a passed progressDeadline pauses the rollout or returns
every cluster to the last revision that was Ready everywhere (failurePolicy).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field

from addon_api.base import (
    ApiModel,
    Cel,
    DnsSubdomain,
    StatusText,
    Timestamp,
    set_list,
)

DURATION_RE = r"^([0-9]{1,6}(s|m|h))+$"
Duration = Annotated[str, Field(max_length=32, pattern=DURATION_RE)]
"""A duration such as 30s, 5m or 1h30m."""

_UNITS = {"s": 1, "m": 60, "h": 3600}


def seconds(duration: str) -> float:
    """The seconds of a :data:`Duration` ("1m30s" -> 90)."""
    if re.fullmatch(DURATION_RE, duration) is None:
        raise ValueError(f"{duration!r} is not a duration such as 30s, 5m or 1h30m")
    return float(sum(int(n) * _UNITS[u] for n, u in re.findall(r"([0-9]+)(s|m|h)", duration)))


PERCENT_RE = r"^([1-9][0-9]?|100)%$"

Strategy = Literal["All", "Progressive", "ProgressivePerGroup"]
FailurePolicy = Literal["Pause", "Rollback"]


def _concurrency_ok(value: int | str) -> bool:
    if isinstance(value, int):
        return value >= 1
    return re.fullmatch(PERCENT_RE, value) is not None


METRIC_NAME_RE = r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"
LABEL_NAME_RE = r"^[a-zA-Z_][a-zA-Z0-9_]*$"
SCOPE_LABELS = ("cluster", "namespace", "pod")
"""Labels the manager sets on a ``metric`` gate's selector (a gate may not set them)."""


class MetricGate(ApiModel):
    """A metric every step's clusters must keep within bounds before the rollout goes on.

    Either ``metric`` (a metric name: the manager selects only the series of this intent's
    own model pods, on the step's clusters) or ``query`` (free PromQL; only for intents in
    the hub namespaces the platform admin trusts with the stack, see
    manager.policy.stackOwnerNamespaces). The manager evaluates it against the Prometheus or
    Thanos URL of its configuration (--prometheus-url) once the step's clusters are Ready for
    minSuccessTime. The gate passes when the result has at least one sample and every sample
    is within maxValue / minValue; a sample outside them fails the step; an empty result
    waits (until progressDeadline).
    """

    cel_rules = (
        Cel("has(self.maxValue) || has(self.minValue)",
            "set maxValue, minValue or both: the bound(s) every sample must keep",
            lambda g: g.max_value is not None or g.min_value is not None),
        Cel("has(self.metric) != has(self.query)",
            "set exactly one of metric and query",
            lambda g: (g.metric is None) != (g.query is None)),
        Cel("!has(self.labels) || self.labels.all(k, k.matches('" + LABEL_NAME_RE + "')"
            " && !(k in ['cluster', 'namespace', 'pod']))",
            "labels must be Prometheus label names other than cluster, namespace and pod "
            "(the manager scopes those)",
            lambda g: all(re.fullmatch(LABEL_NAME_RE, k) and k not in SCOPE_LABELS
                          for k in g.labels), field_path=".labels"),
    )

    metric: Annotated[str, Field(min_length=1, max_length=256, pattern=METRIC_NAME_RE)] | None = (
        None)
    """A metric the model servers export (e.g. ``request_predict_seconds_count``). The manager
    selects it on the step's clusters for this intent's own pods only (its target
    namespace, pods named after the model; for a model, also its series without pods
    labelled ``inferenceservice`` with its name, as the chart's recording rules keep them,
    e.g. ``model_serving:request_predict_seconds:p99``) and takes the largest value per
    cluster: with ``rate``, of its per-second rate (a counter)."""
    rate: Duration | None = None
    """With ``metric``: judge its per-second rate over this window (e.g. ``1m``)."""
    labels: Annotated[dict[str, Annotated[str, Field(max_length=256)]],
                      Field(max_length=8)] = Field(default_factory=dict)
    """With ``metric``: more label matchers (equality), e.g. ``{code: "500"}``."""
    query: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    """Free PromQL instant query; $clusters is replaced by the step's clusters (a regex).
    Refused (MetricQueryNotAllowed) for intents outside the platform admin's namespaces."""
    max_value: float | None = None
    """Largest value a sample may have (e.g. an error ratio of 0.05)."""
    min_value: float | None = None
    """Smallest value a sample may have (e.g. a request rate of 1)."""


class Rollout(ApiModel):
    """How a change of this intent's spec reaches its clusters."""

    cel_rules = (
        Cel("type(self.maxConcurrency) == int ? self.maxConcurrency >= 1"
            f" : self.maxConcurrency.matches('{PERCENT_RE}')",
            "spec.rollout.maxConcurrency must be a count of at least 1 or a percentage"
            " from 1% to 100%",
            lambda r: _concurrency_ok(r.max_concurrency),
            field_path=".maxConcurrency"),
        Cel("self.strategy == 'ProgressivePerGroup' || !has(self.mandatoryGroups)"
            " || size(self.mandatoryGroups) == 0",
            "spec.rollout.mandatoryGroups needs strategy ProgressivePerGroup",
            lambda r: r.strategy == "ProgressivePerGroup" or not r.mandatory_groups,
            field_path=".mandatoryGroups"),
    )

    strategy: Strategy = "All"
    """All: every cluster gets a change at once. Progressive: at most maxConcurrency
    clusters per step, in cluster name order. ProgressivePerGroup: one step per decision
    group of the Placement (spec.decisionStrategy.groups), mandatoryGroups first,
    at most maxConcurrency clusters at a time within a group."""
    max_concurrency: int | str = Field(
        default=1, json_schema_extra={"x-kubernetes-int-or-string": True})
    """Clusters per step: a count (1) or a percentage of the selected clusters
    ("25%", at least one cluster)."""
    mandatory_groups: Annotated[list[DnsSubdomain], set_list(16)] = Field(default_factory=list)
    """Decision groups (by name) that go first, in this order (ProgressivePerGroup)."""
    min_success_time: Duration = "30s"
    """How long a step's clusters must all stay Ready before the step passes. Keep it above
    the OCM work agent's status sync interval (10s by default), so that KServe has reported
    on the new revision at least once more before the next step starts."""
    progress_deadline: Duration = "10m"
    """How long a step may take (from its start to passing every gate) before it fails."""
    failure_policy: FailurePolicy = "Rollback"
    """What a failed step does: Rollback returns every cluster on the new revision to the
    last good one and holds there until the spec changes again; Pause stops the rollout where
    it is (resume by changing the spec or with the undo annotation)."""
    metric_gate: MetricGate | None = None
    """A query each step's clusters must also pass (after minSuccessTime)."""
    manual_approval: bool = False
    """Each step after the first waits until the intent is annotated
    rollout.modelserving.opendatahub.io/approve with <revision>/<step>."""
    revision_history_limit: Annotated[int, Field(ge=1, le=100)] = 10
    """Revisions kept on the hub (the current, the last good and the newest others)."""


RolloutPhaseName = Literal[
    "Progressing", "WaitingForApproval", "Paused", "Halted", "RolledBack", "Complete"]
GateName = Literal["Ready", "MinSuccessTime", "Metric", "Approval", "ProgressDeadline"]
GateState = Literal["Pending", "Passed", "Failed"]


class GateResult(ApiModel):
    """What one gate of the current step saw."""

    gate: GateName
    """Which gate."""
    state: GateState = "Pending"
    """Pending (not decided yet), Passed or Failed."""
    cluster: Annotated[str, Field(max_length=253)] = ""
    """The cluster the result is about (a failure names the first cluster that failed)."""
    message: StatusText = ""
    """What the gate saw."""


class RolloutStatus(ApiModel):
    """Where a rollout stands (only with a Progressive strategy)."""

    phase: RolloutPhaseName = "Complete"
    """Progressing, WaitingForApproval, Paused (annotated), Halted (a step failed under
    failurePolicy Pause), RolledBack (a step failed and every cluster went back to
    stableRevision) or Complete (every cluster is on targetRevision)."""
    stable_revision: Annotated[int, Field(ge=1)] | None = None
    """The last revision that was Ready on every selected cluster (what a rollback returns to
    and what clusters not reached yet keep)."""
    target_revision: Annotated[int, Field(ge=1)] | None = None
    """The revision being rolled out (the spec's)."""
    failed_revision: Annotated[int, Field(ge=1)] | None = None
    """A revision that failed and was rolled back; it is not tried again until the spec
    changes."""
    step: Annotated[int, Field(ge=0)] = 0
    """The step in progress (1 is the first; 0 before any)."""
    steps: Annotated[int, Field(ge=0)] = 0
    """Steps the rollout has in all, as the clusters are selected now."""
    updated: Annotated[int, Field(ge=0)] = 0
    """Clusters whose work carried targetRevision when this status was computed (before the
    writes of the same reconcile: a rollback shows them until the next one)."""
    step_clusters: Annotated[list[DnsSubdomain], set_list(100)] = Field(default_factory=list)
    """The clusters of the step in progress (at most 100 listed)."""
    step_started: Timestamp | None = None
    """When the step in progress started."""
    step_ready_since: Timestamp | None = None
    """Since when every cluster of the step is Ready (reset when one is not)."""
    gates: Annotated[list[GateResult], Field(max_length=8)] = Field(default_factory=list)
    """What each gate of the step in progress (or of the step that failed) saw."""
    message: StatusText = ""
    """The rollout in one sentence."""
