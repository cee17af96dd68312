"""``explain`` (the chain from an intent to one cluster) and the rollout texts.

The chain: the intent (has the manager seen its spec?), the Placement (is the cluster
selected, and if not, which of cluster set binding, labels, taints or the cluster count keeps
it out), the intent's entry for the cluster (phase, what it waits for), the ManifestWork
(applied? available? what the spoke reported back), and what to do next (the troubleshooting
entry for the reason). The reading is in :func:`chain`; the judging of a Placement against a
cluster is pure (:func:`why_not_selected`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from addon_api import constants as c
from addon_api.reasons import ClusterReason
from addon_cli import troubleshooting, views
from addon_cli.hub import EXIT_FORBIDDEN, EXIT_NOT_FOUND, WORK_READER_ROLE, CliError, Hub
from addon_manager.facts import naming
from addon_manager.kinds.registry import parse as parse_work

CLUSTERSET_LABEL = "cluster.open-cluster-management.io/clusterset"
GROUP_NAME_LABEL = "cluster.open-cluster-management.io/decision-group-name"


@dataclass
class Link:
    """One link of the chain."""

    name: str
    ok: bool | None
    """True: this link holds; False: the chain breaks here; None: not decided (waiting)."""
    summary: str
    evidence: list[str] = field(default_factory=list)


def platforms(model_servings: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, str, str]]:
    """(platform, phase, stack version) by cluster, from the ModelServings' status entries.

    The entry of the ModelServing that owns the cluster's stack (another one's says
    ``Conflict``); during an upgrade or downgrade the version reads ``FROM -> TO``. Read from
    the intents, not their ManifestWorks, which the fleet viewer role does not read.
    """
    out: dict[str, tuple[str, str, str]] = {}
    for ms in model_servings:
        platform = str((ms.get("spec") or {}).get("platform") or "")
        for entry in (ms.get("status") or {}).get("clusters") or []:
            if entry.get("reason") == ClusterReason.CONFLICT:
                continue
            version = str(entry.get("version") or "")
            target = str(entry.get("targetVersion") or "")
            out.setdefault(str(entry.get("cluster")), (
                platform, str(entry.get("phase") or ""),
                f"{version} -> {target}" if target and target != version else version))
    return out


def _matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> list[str]:
    """What of a label selector ``labels`` fails (empty: it matches)."""
    failed = [f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()
              if labels.get(k) != v]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        have = labels.get(str(key))
        ok = {"In": have in values, "NotIn": have not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}.get(str(op), True)
        if not ok:
            failed.append(f"{key} {op} {values}" if values else f"{key} {op}")
    return failed


def why_not_selected(placement: Mapping[str, Any], cluster: Mapping[str, Any],
                     bound_sets: Iterable[str]) -> list[str]:
    """Why ``placement`` does not select ``cluster`` (empty: nothing found against it).

    Checks what OCM checks, in its order: the cluster set (bound to the Placement's namespace
    and, when the Placement names sets, among them), the predicates' label selectors, and
    taints without a matching toleration.
    """
    spec = placement.get("spec") or {}
    meta = cluster.get("metadata") or {}
    labels = meta.get("labels") or {}
    name = meta.get("name")
    out = []
    cset = labels.get(CLUSTERSET_LABEL, "")
    bound = set(bound_sets)
    if not cset:
        out.append(f"cluster {name} is in no ManagedClusterSet (label {CLUSTERSET_LABEL})")
    elif cset not in bound:
        out.append(f"its cluster set {cset!r} is not bound to namespace "
                   f"{(placement.get('metadata') or {}).get('namespace')} (no "
                   f"ManagedClusterSetBinding {cset}; bound: {sorted(bound) or 'none'})")
    elif spec.get("clusterSets") and cset not in spec["clusterSets"]:
        out.append(f"its cluster set {cset!r} is not among the Placement's clusterSets "
                   f"{spec['clusterSets']}")
    predicates = spec.get("predicates") or []
    misses = [_matches((p.get("requiredClusterSelector") or {}).get("labelSelector") or {},
                       labels) for p in predicates]
    if predicates and all(misses):
        out.append("no predicate matches its labels: it lacks " + "; or ".join(
            ", ".join(m) for m in misses))
    tolerations = spec.get("tolerations") or []
    for taint in (cluster.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSelect", "NoSelectIfNew"):
            continue
        tolerated = any(
            t.get("key") in (None, taint.get("key")) and (
                t.get("operator") == "Exists" or t.get("value") == taint.get("value"))
            and t.get("effect") in (None, "", taint.get("effect")) for t in tolerations)
        if not tolerated:
            out.append(f"it has the taint {taint.get('key')}={taint.get('value', '')}:"
                       f"{taint.get('effect')} and the Placement does not tolerate it")
    return out


def _placement_link(hub: Hub, intent: Mapping[str, Any], cluster: str) -> Link:
    namespace = str((intent.get("metadata") or {}).get("namespace"))
    ref = ((intent.get("spec") or {}).get("placementRef") or {}).get("name")
    if not ref:
        return Link("placement", False, "the intent names no Placement (spec.placementRef)")
    try:
        placement = hub.placement(namespace, str(ref))
    except CliError as err:
        if err.code != EXIT_NOT_FOUND:
            raise
        return Link("placement", False, f"Placement {namespace}/{ref} does not exist",
                    ["create it, or point spec.placementRef at one that does"])
    decisions = hub.decisions(namespace, str(ref))
    groups = {}
    for d in decisions:
        group = ((d.get("metadata") or {}).get("labels") or {}).get(GROUP_NAME_LABEL, "")
        for entry in (d.get("status") or {}).get("decisions") or []:
            groups[str(entry.get("clusterName"))] = group
    evidence = [f"Placement {namespace}/{ref} selects {len(groups)} cluster(s)"]
    if cluster in groups:
        if groups[cluster]:
            evidence.append(f"decision group {groups[cluster]!r}")
        return Link("placement", True, f"{cluster} is selected by Placement {ref}", evidence)
    try:
        mc = hub.cluster(cluster)
    except CliError as err:
        if err.code != EXIT_NOT_FOUND:
            raise
        return Link("placement", False, f"there is no ManagedCluster named {cluster}",
                    evidence)
    bound = [str((b.get("spec") or {}).get("clusterSet") or (b.get("metadata") or {}).get(
        "name")) for b in hub.bindings(namespace)]
    reasons = why_not_selected(placement, mc, bound)
    number = (placement.get("spec") or {}).get("numberOfClusters")
    if not reasons and number is not None and len(groups) >= int(number):
        reasons.append(f"the Placement selects at most {number} cluster(s) "
                       "(spec.numberOfClusters)")
    if not reasons:
        reasons.append("nothing found against it: OCM's placement controller may not have "
                       "decided yet (see the Placement's status conditions)")
    return Link("placement", False, f"{cluster} is not selected by Placement {ref}",
                evidence + reasons)


def _entry_link(intent: Mapping[str, Any], cluster: str) -> tuple[Link, Mapping[str, Any]]:
    status = intent.get("status") or {}
    entry: Mapping[str, Any] = next(
        (e for e in status.get("clusters") or [] if e.get("cluster") == cluster), {})
    if not entry:
        more = status.get("clustersOmitted")
        return Link("status", None, f"the intent's status has no entry for {cluster}",
                    [f"{more} entries omitted from the status"] if more else []), entry
    evidence = [f"phase {entry.get('phase')}, reason {entry.get('reason') or '-'}"]
    if entry.get("message"):
        evidence.append(str(entry["message"]))
    if entry.get("waitingFor"):
        evidence.append("waiting for " + ", ".join(entry["waitingFor"]))
    if entry.get("url"):
        evidence.append(f"url {entry['url']}")
    if entry.get("revision"):
        evidence.append(f"revision {entry['revision']}")
    if entry.get("stale"):
        evidence.append(f"stale since {entry.get('staleSince')}: the cluster stopped reporting")
    ok = True if entry.get("ready") else (None if entry.get("waitingFor") else False)
    return Link("status", ok, f"{'ready' if entry.get('ready') else 'not ready'} on {cluster}",
                evidence), entry


def _work_link(hub: Hub, kind: str, namespace: str, name: str, cluster: str) -> Link:
    work = naming.work_name(kind, namespace, name)
    try:
        listed = hub.works(f"{c.LABEL_INTENT_KIND}={kind},{c.LABEL_INTENT_NAME}={name}", cluster)
    except CliError as err:
        if err.code != EXIT_FORBIDDEN:
            raise
        # The fleet viewer role reads no ManifestWorks (they may carry other systems'
        # Secrets); the intent's status entry above is what the hub says of this cluster.
        return Link("work", None, f"ManifestWork {cluster}/{work}: not readable with your rights",
                    [f"reading works needs the {WORK_READER_ROLE} ClusterRole, which reads "
                     "every system's ManifestWorks: the status link above is the hub's view"])
    found = [w for w in listed if (w.get("metadata") or {}).get("name") == work]
    if not found:
        return Link("work", None, f"no ManifestWork {cluster}/{work} on the hub",
                    ["the manager writes it once the cluster is selected and its gates pass"])
    body = found[0]
    fact = parse_work(body)
    evidence = []
    for cond in (body.get("status") or {}).get("conditions") or []:
        evidence.append(f"{cond.get('type')}={cond.get('status')} ({cond.get('reason')}): "
                        f"{cond.get('message', '')}".rstrip(": "))
    if fact is not None:
        evidence += [f"feedback {k}={v}" for k, v in fact.feedback]
        if fact.revision is not None:
            evidence.append(f"renders revision {fact.revision}")
    ok = fact is not None and fact.applied == "True" and fact.available == "True"
    summary = (f"ManifestWork {cluster}/{work}: applied {fact.applied if fact else '?'}, "
               f"available {fact.available if fact else '?'}")
    return Link("work", ok if fact and fact.reported else None, summary, evidence)


def chain(hub: Hub, intent: Mapping[str, Any], cluster: str) -> list[Link]:
    """Every link from ``intent`` to ``cluster``, read from the hub."""
    meta = intent.get("metadata") or {}
    kind, namespace, name = str(intent.get("kind")), str(meta.get("namespace")), str(
        meta.get("name"))
    status = intent.get("status") or {}
    seen = status.get("observedGeneration") == meta.get("generation")
    links = [Link("intent", seen, f"{views.short(kind)}/{name} in {namespace}: phase "
                  f"{status.get('phase') or 'Pending'}",
                  [f"generation {meta.get('generation')}, observed "
                   f"{status.get('observedGeneration')}" + ("" if seen else
                                                            ": the manager has not seen it")])]
    links.append(_placement_link(hub, intent, cluster))
    entry_link, entry = _entry_link(intent, cluster)
    links.append(entry_link)
    links.append(_work_link(hub, kind, namespace, name, cluster))
    step = next_step(entry)
    if step is not None:
        links.append(step)
    if entry and entry.get("leftovers"):
        links.append(leftovers_link(str(entry["leftovers"])))
    return links


SERVING = frozenset({"", "Ready", "Available"})
"""Reasons of a ready entry that need nothing done."""


def next_step(entry: Mapping[str, Any]) -> Link | None:
    """What to do about a cluster's entry: its reason's (or phase's) troubleshooting advice.

    For an entry not ready, and for a ready one whose reason says something is wrong all
    the same (a model serving on fewer replicas, or with a crash-looping one).
    """
    if not entry:
        return None
    value = str(entry.get("reason") or "")
    hint = troubleshooting.advice(value) if value else None
    if hint is None:
        value = str(entry.get("phase") or "")
        hint = troubleshooting.advice(value)
    if hint is None or (entry.get("ready") and str(entry.get("reason") or "") in SERVING):
        return None
    return Link("next", None, hint.todo or f"docs/troubleshooting.md, {value}",
                [hint.means] if hint.means else [])


KEPT_TODO = (
    "delete what the namespace holds (the agent then deletes the namespace) or the namespace "
    "yourself, or put it back in the ModelServing's servingNamespaces"
)
"""The next step for a namespace the agent kept (a ModelServing entry's ``leftovers``)."""


def leftovers_link(leftovers: str) -> Link:
    """The link for what the agent left on the cluster: not a failure, a cleanup to do."""
    return Link("leftovers", None, leftovers, [
        "dropped from servingNamespaces and kept by the agent because it holds objects the "
        "agent did not create; the stack is not affected",
        f"next: {KEPT_TODO}",
    ])


def render(links: Iterable[Link], colour: bool = False) -> str:
    """The chain for a person: a mark per link, its summary, its evidence indented."""
    marks = {True: ("ok", "\033[32m"), False: ("NO", "\033[31m"), None: ("..", "\033[33m")}
    lines = []
    for link in links:
        mark, tint = marks[link.ok]
        head = f"[{mark}] {link.name:<9} {link.summary}"
        lines.append(f"{tint}{head}\033[0m" if colour else head)
        lines += [f"              {e}" for e in link.evidence]
    return "\n".join(lines)


def rollout_text(intent: Mapping[str, Any]) -> str:
    """``rollout status``: where a progressive rollout stands."""
    meta = intent.get("metadata") or {}
    what = f"{views.short(str(intent.get('kind')))}/{meta.get('name')}"
    roll = (intent.get("status") or {}).get("rollout")
    if not roll:
        strategy = (((intent.get("spec") or {}).get("rollout") or {}).get("strategy") or "All")
        return f"{what}: strategy {strategy}: no progressive rollout status"
    lines = [f"{what}: {roll.get('phase')}: {roll.get('message', '')}".rstrip(": "),
             f"  revisions: stable {roll.get('stableRevision')}, target "
             f"{roll.get('targetRevision')}"
             + (f", failed {roll['failedRevision']}" if roll.get("failedRevision") else ""),
             f"  step {roll.get('step', 0)} of {roll.get('steps', 0)}: "
             + (", ".join(roll.get("stepClusters") or []) or "-")
             + f"; {roll.get('updated', 0)} cluster(s) on the target"]
    for gate in roll.get("gates") or []:
        where = f" on {gate['cluster']}" if gate.get("cluster") else ""
        lines.append(f"  gate {gate.get('gate')}: {gate.get('state')}{where}"
                     + (f": {gate['message']}" if gate.get("message") else ""))
    return "\n".join(lines)


RolloutOutcome = Literal["done", "failed", "waiting"]
"""Where ``rollout status`` leaves a rollout: done (exit 0), failed (exit 1), or not yet."""


def rollout_outcome(intent: Mapping[str, Any]) -> tuple[RolloutOutcome, str]:
    """Whether the intent's current spec has rolled out, and why not.

    Done: the manager saw the current generation and the rollout is Complete (without a
    progressive rollout: the intent is Ready on every cluster). Failed: the rollout was
    RolledBack or Halted. Anything else waits: a step in progress, a pause, an approval.
    """
    meta, status = intent.get("metadata") or {}, intent.get("status") or {}
    if status.get("observedGeneration") != meta.get("generation"):
        return "waiting", f"the manager has not seen generation {meta.get('generation')}"
    roll = status.get("rollout")
    if not roll:
        missing = views.not_ready([intent])
        return ("waiting", missing[0]) if missing else ("done", "Ready on every cluster")
    phase, message = str(roll.get("phase") or ""), str(roll.get("message") or "")
    if phase in ("RolledBack", "Halted"):
        return "failed", f"{phase}: {message}".rstrip(": ")
    if phase == "Complete":
        return "done", f"revision {roll.get('targetRevision')} is on every cluster"
    return "waiting", f"{phase}: {message}".rstrip(": ")


def history_text(revisions: Iterable[Mapping[str, Any]], roll: Mapping[str, Any]) -> str:
    """``rollout history``: every revision kept, with its role in the rollout."""
    marks = {roll.get("stableRevision"): "stable", roll.get("targetRevision"): "target",
             roll.get("failedRevision"): "failed"}
    if roll.get("stableRevision") == roll.get("targetRevision"):
        marks[roll.get("stableRevision")] = "stable, target"
    body = []
    for rev in revisions:
        number = int(rev.get("revision") or 0)
        created = str((rev.get("metadata") or {}).get("creationTimestamp") or "")
        body.append([str(number), created, marks.get(number, "")])
    return views.table(["REVISION", "CREATED", "ROLE"], body)
