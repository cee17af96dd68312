"""Prometheus metrics of the manager (served on ``/metrics``).

An intent's namespace is the label ``intent_namespace``, never ``namespace``: a scrape through
prometheus-operator (``honorLabels: false``, also OpenShift's user-workload monitoring) sets
``namespace`` to the scraped pod's and renames the exposed one, so intents of different
namespaces would merge.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterable

from prometheus_client import Counter, Gauge, Histogram

from addon_api.reasons import IntentConditionType, RolloutPhase
from addon_api.rollout import RolloutStatus

WORK_APPLIES = Counter(
    "model_serving_manifestwork_applies_total", "ManifestWorks written (server-side apply).",
    ["kind"],
)
WORK_SKIPS = Counter(
    "model_serving_manifestwork_skips_total",
    "ManifestWorks left alone because their render hash already matched.", ["kind"],
)
WORK_DELETES = Counter(
    "model_serving_manifestwork_deletes_total", "ManifestWorks deleted.", ["kind"]
)
WORK_ERRORS = Counter(
    "model_serving_manifestwork_errors_total",
    "ManifestWork writes that failed after retries, or were refused (foreign owner).",
    ["kind", "reason"],
)
API_WRITES = Counter(
    "model_serving_api_writes_total",
    "Every write request the manager sends to the hub API server (retries included).",
    ["verb", "resource"],
)
RECONCILE_SECONDS = Histogram(
    "model_serving_reconcile_duration_seconds", "Duration of one intent reconcile.", ["kind"],
    buckets=(0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
FANOUT_SECONDS = Histogram(
    "model_serving_fanout_duration_seconds",
    "Time to write every changed ManifestWork of one intent reconcile.", ["kind"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
INTENT_CONDITIONS = Gauge(
    "model_serving_intent_condition",
    "1 when the intent's condition has this status.",
    ["kind", "intent_namespace", "name", "condition", "status"],
)
CLUSTERS_DESIRED = Gauge(
    "model_serving_intent_clusters_desired", "Clusters an intent should be on.",
    ["kind", "intent_namespace", "name"],
)
CLUSTERS_READY = Gauge(
    "model_serving_intent_clusters_ready", "Clusters where an intent is ready.",
    ["kind", "intent_namespace", "name"],
)
CLUSTER_STALE = Gauge(
    "model_serving_cluster_stale",
    "Intents whose report from this cluster is out of date (its work agent or add-on agent "
    "stopped reporting for longer than --stale-after); no series while none is. The label is "
    "managed_cluster: ACM's metrics collector sets 'cluster' to the cluster it scrapes.",
    ["managed_cluster"],
)

ROLLOUT_STEP = Gauge(
    "model_serving_rollout_step",
    "The step a progressive rollout is at (0 before the first; the last step once complete).",
    ["kind", "intent_namespace", "name"],
)
ROLLOUT_PHASE = Gauge(
    "model_serving_rollout_phase",
    "1 for the phase a progressive rollout is in (Progressing, WaitingForApproval, Paused, "
    "Halted, RolledBack, Complete), 0 for the others.",
    ["kind", "intent_namespace", "name", "phase"],
)
ROLLOUT_STEPS = Counter(
    "model_serving_rollout_steps_total",
    "Ended steps of progressive rollouts, by outcome (Passed, RolledBack, Halted).",
    ["kind", "outcome"],
)
ROLLOUT_METRIC_GATE = Counter(
    "model_serving_rollout_metric_gate_total",
    "Metric gate queries of progressive rollouts, by answer (Passed, Failed, Pending).",
    ["kind", "outcome"],
)

ENDPOINT_SPILLOVER_QUERIES = Counter(
    "model_serving_endpoint_spillover_queries_total",
    "Spillover metric queries of fleet endpoints (spec.endpoint.spillover), by answer "
    "(Answered, NoAnswer: no --prometheus-url or the query failed).",
    ["kind", "outcome"],
)

ADDON_AVAILABLE = Gauge(
    "model_serving_addon_available",
    "1 when OCM reports the add-on Available on the cluster (its agent renews its lease), 0 "
    "when not; no series while OCM has not said or the cluster has no add-on.",
    ["managed_cluster"],
)


def addon_available(cluster: str, available: bool | None) -> None:
    """Record a cluster's add-on availability (None: unknown, or the add-on went)."""
    if available is None:
        with contextlib.suppress(KeyError):
            ADDON_AVAILABLE.remove(cluster)
    else:
        ADDON_AVAILABLE.labels(cluster).set(1 if available else 0)


Intent = tuple[str, str, str]
"""(kind, namespace, name)."""


class StaleClusters:
    """Which clusters each intent shows as Stale; keeps ``model_serving_cluster_stale``.

    A cluster's series is the number of intents whose entry for it is Stale, and goes away
    when none is (and when those intents go).
    """

    def __init__(self) -> None:
        self.by_intent: dict[Intent, frozenset[str]] = {}
        self.counts: collections.Counter[str] = collections.Counter()

    def observe(self, intent: Intent, stale: Iterable[str]) -> None:
        """Record the clusters ``intent`` shows as Stale now."""
        new = frozenset(stale)
        old = self.by_intent.get(intent, frozenset())
        if new == old:
            return
        if new:
            self.by_intent[intent] = new
        else:
            self.by_intent.pop(intent, None)
        self.counts.update(new - old)
        self.counts.subtract(old - new)
        for cluster in new ^ old:
            if self.counts[cluster] > 0:
                CLUSTER_STALE.labels(cluster).set(self.counts[cluster])
            else:
                del self.counts[cluster]
                with contextlib.suppress(KeyError):
                    CLUSTER_STALE.remove(cluster)

    def forget(self, intent: Intent) -> None:
        """An intent went: its stale clusters no longer count."""
        self.observe(intent, ())


def forget_intent(kind: str, namespace: str, name: str) -> None:
    """Drop the per-intent series of a deleted intent."""
    for gauge in (CLUSTERS_DESIRED, CLUSTERS_READY):
        with contextlib.suppress(KeyError):
            gauge.remove(kind, namespace, name)
    for cond in IntentConditionType:
        for status in ("True", "False"):
            with contextlib.suppress(KeyError):
                INTENT_CONDITIONS.remove(kind, namespace, name, cond, status)
    with contextlib.suppress(KeyError):
        ROLLOUT_STEP.remove(kind, namespace, name)
    for phase in RolloutPhase:
        with contextlib.suppress(KeyError):
            ROLLOUT_PHASE.remove(kind, namespace, name, phase.value)


def rollout(kind: str, namespace: str, name: str, status: RolloutStatus) -> None:
    """Record where an intent's progressive rollout stands."""
    ROLLOUT_STEP.labels(kind, namespace, name).set(status.step)
    for phase in RolloutPhase:
        ROLLOUT_PHASE.labels(kind, namespace, name, phase.value).set(
            1 if status.phase == phase.value else 0)

READY = Gauge(
    "model_serving_manager_ready",
    "1 once kopf delivers watch events to handlers (its indexes are populated).",
)

LEADER = Gauge(
    "model_serving_manager_leader",
    "1 while this replica holds the manager Lease and acts; 0 while it stands by.",
)

INFORMER_SYNCED = Gauge(
    "model_serving_manager_informer_synced",
    "1 once an informer has listed every object of its resource (ManifestWork, "
    "ManagedCluster, ManagedClusterAddOn); a standby with all three at 1 takes over without "
    "listing.",
    ["resource"],
)

SHARDS_HELD = Gauge(
    "model_serving_manager_shards_held",
    "Shards this replica holds and writes (sharded managers, --shards).",
)

INTENT_SHARD = Gauge(
    "model_serving_intent_shard_held",
    "1 for each intent whose shard this replica holds: which replica writes which intent "
    "(sharded managers, --shards).",
    ["kind", "intent_namespace", "name", "shard", "replica"],
)


def intent_shard(kind: str, namespace: str, name: str, shard: int, replica: str,
                 held: bool) -> None:
    """Record whether this replica holds (and writes) an intent's shard."""
    labels = (kind, namespace, name, str(shard), replica)
    if held:
        INTENT_SHARD.labels(*labels).set(1)
    else:
        with contextlib.suppress(KeyError):
            INTENT_SHARD.remove(*labels)
