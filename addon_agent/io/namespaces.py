"""Serving namespaces: enable the listed ones, disable the ones dropped from the list.

A namespace the agent created is deleted again only while it holds nothing the agent did not
create (:func:`addon_agent.pure.removal.user_objects` over :func:`contents`); otherwise it is kept:
handed over with one mark, :data:`~addon_agent.labels.LABEL_KEPT_NAMESPACE`, by which the agent
finds it again (after a restart too), reports it in the ServingPlatform's status
(:func:`addon_agent.pure.status.with_kept`) and deletes it once it holds nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from addon_agent import labels as lb
from addon_agent.io.kube import Kube
from addon_agent.pure import removal
from addon_api import constants as c

log = logging.getLogger(__name__)

MONITORING_ROLEBINDING = "model-serving-monitoring"
SKIPPED_GROUPS = ("metrics.k8s.io/",)
"""API groups whose namespaced kinds are not objects anyone stores (live metrics)."""


def desired_labels(platform: str) -> dict[str, str]:
    """Labels the agent sets on a serving namespace for ``platform``."""
    out = {lb.LABEL_SERVING_NAMESPACE: "true"}
    if platform == "ModelMesh":
        out[c.MODELMESH_ENABLED_LABEL] = "true"
    return out


POD_SECURITY = {
    "pod-security.kubernetes.io/enforce": "baseline",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
}
"""Pod Security levels of a serving namespace: tenants' model pods must meet ``baseline``
(no host namespaces, hostPath, privileged containers, added capabilities beyond baseline's)
and are warned and audited against ``restricted``. Not ``enforce: restricted``: KServe's
storage initializer and ModelMesh's injected containers set neither
``allowPrivilegeEscalation`` nor a seccomp profile, so restricted would refuse every model pod
on plain Kubernetes (OpenShift's restricted-v2 fills those in)."""


def pod_security_labels(existing: dict[str, str]) -> dict[str, str]:
    """The Pod Security labels the agent sets, given the namespace's labels now.

    A level someone else set is left as it is (an admin's stricter ``enforce: restricted``
    stays; so does one the admin chose to relax): only absent ones, or the agent's own, are
    set.
    """
    return {k: v for k, v in POD_SECURITY.items() if existing.get(k) in (None, v)}


def namespace_patch(name: str, platform: str, created: bool,
                    existing_labels: dict[str, str] | None = None) -> dict[str, Any]:
    """The server-side apply body of one enabled serving namespace."""
    labels = desired_labels(platform)
    labels.update(pod_security_labels(existing_labels or {}))
    if created:
        labels.update(lb.ours())
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if created:
        meta["annotations"] = {lb.ANNOTATION_CREATED_BY_AGENT: "true"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def monitoring_rolebinding(namespace: str, subject: tuple[str, str]) -> dict[str, Any]:
    """RoleBinding letting Prometheus read the serving namespace (monitoring enabled).

    ``subject`` is the (namespace, name) of Prometheus' ServiceAccount. ``subjects`` is an
    atomic list for server-side apply: applying another subject replaces the old one.
    """
    sa_namespace, sa_name = subject
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": MONITORING_ROLEBINDING, "namespace": namespace, "labels": lb.ours()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": sa_name, "namespace": sa_namespace}],
    }


KEPT_SELECTOR = f"{lb.LABEL_KEPT_NAMESPACE}=true"


def is_kept(ns: dict[str, Any]) -> bool:
    """Whether the agent kept namespace ``ns`` (created by it, dropped, holding data)."""
    return (ns["metadata"].get("labels") or {}).get(lb.LABEL_KEPT_NAMESPACE) == "true"


def reconcile(
    kube: Kube, wanted: Sequence[str], platform: str, monitoring: tuple[str, str] | None
) -> dict[str, list[str]]:
    """Enable ``wanted`` namespaces and disable the ones the agent enabled before.

    ``monitoring`` is the Prometheus ServiceAccount (namespace, name) the monitoring
    RoleBinding names, or None when monitoring is off (the RoleBindings are removed).

    Returns the namespaces the agent keeps and what each holds that it did not create: the
    ones disabled now that hold such objects, and those kept earlier that still do. A kept
    namespace that holds nothing else any more is deleted; one that is wanted again is the
    agent's again (as created by it).
    """
    enabled = kube.list("v1", "Namespace", label_selector=f"{lb.LABEL_SERVING_NAMESPACE}=true")
    kept_before = kube.list("v1", "Namespace", label_selector=KEPT_SELECTOR)
    for name in wanted:
        existing = kube.get("v1", "Namespace", name)
        created = existing is None or is_kept(existing) or (
            (existing["metadata"].get("annotations") or {}).get(lb.ANNOTATION_CREATED_BY_AGENT)
            == "true"
        )
        have = dict((existing or {}).get("metadata", {}).get("labels") or {})
        kube.apply(namespace_patch(name, platform, created, have))
        if monitoring is not None:
            kube.apply(monitoring_rolebinding(name, monitoring))
        else:
            _drop_rolebinding(kube, name)
    held: dict[str, list[str]] = {}
    for ns in enabled:
        name = ns["metadata"]["name"]
        if name not in wanted:
            theirs = disable(kube, ns)
            if theirs:
                held[name] = theirs
    for ns in kept_before:
        name = ns["metadata"]["name"]
        if name in wanted or name in held:
            continue
        theirs = holds_user_objects(kube, name)
        if theirs:
            held[name] = theirs
        elif not ns["metadata"].get("deletionTimestamp"):
            log.info("deleting namespace %s: the agent created and kept it, and it holds "
                     "nothing else now", name)
            kube.delete("v1", "Namespace", name)
    return held


def _drop_rolebinding(kube: Kube, namespace: str) -> None:
    rb = kube.get("rbac.authorization.k8s.io/v1", "RoleBinding", MONITORING_ROLEBINDING, namespace)
    if rb is not None and lb.is_ours(rb):
        kube.delete(
            "rbac.authorization.k8s.io/v1", "RoleBinding", MONITORING_ROLEBINDING, namespace
        )


def contents(kube: Kube, names: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """Every object in the namespaces ``names``, of every namespaced kind the API server lists.

    Namespaces that do not exist or are terminating are left out; ``kind`` is set on each
    object.

    A kind the agent may not list (a CRD whose vendor did not aggregate it into the ``view``
    role the agent is bound to) stands in each namespace as one object marked
    :data:`~addon_agent.pure.removal.UNSEEN` (:func:`~addon_agent.pure.removal.unseen`): what
    the agent cannot see may hold data, so it counts as an object the agent did not create. A
    kind that went between discovery and the list (its CRD deleted) holds nothing.
    """
    wanted = []
    for name in names:
        ns = kube.get("v1", "Namespace", name)
        if ns is not None and not ns["metadata"].get("deletionTimestamp"):
            wanted.append(name)
    if not wanted:
        return {}
    kinds = [k for k in kube.namespaced_kinds() if not k[0].startswith(SKIPPED_GROUPS)]
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in wanted}
    for api_version, kind in kinds:
        if kind in removal.DERIVED_KINDS:
            continue
        for name in wanted:
            try:
                items = kube.list(api_version, kind, namespace=name)
            except ResourceNotFoundError:
                break  # the kind went (its CRD was deleted): nothing of it is left anywhere
            except ApiException as err:
                if err.status == 404:
                    break
                log.info("cannot list %s %s in %s (%s): counted as holding data",
                         api_version, kind, name, err.status)
                out[name].append(removal.unseen(api_version, kind, name))
                continue
            out[name] += [{**item, "kind": item.get("kind") or kind} for item in items]
    return out


def holds_user_objects(kube: Kube, name: str) -> list[str]:
    """What the agent did not create in namespace ``name`` (see :func:`contents`)."""
    return removal.user_objects(contents(kube, [name]).get(name, []))


def disable(kube: Kube, ns: dict[str, Any], checked: bool = False) -> list[str]:
    """Undo what the agent did to a namespace; delete it only when the agent created it.

    A namespace the agent created that holds objects the agent did not create is not deleted
    (unless ``checked``: the caller already found it holds none): it is handed over as a
    pre-existing one would be, losing the agent's labels and annotation, but marked kept
    (:data:`~addon_agent.labels.LABEL_KEPT_NAMESPACE`). Returns what such a kept namespace
    holds (empty when it was deleted, or was not the agent's).
    """
    name = ns["metadata"]["name"]
    labels: dict[str, str] = {}
    theirs: list[str] = []
    if (ns["metadata"].get("annotations") or {}).get(lb.ANNOTATION_CREATED_BY_AGENT) == "true":
        theirs = [] if checked else holds_user_objects(kube, name)
        if not theirs:
            log.info("deleting namespace %s: the agent created it and it holds nothing else",
                     name)
            kube.delete("v1", "Namespace", name)
            return []
        log.warning(
            "namespace %s was created by the agent but holds objects it did not create "
            "(%s): kept, and no longer the agent's", name, ", ".join(theirs[:20])
        )
        labels = {lb.LABEL_KEPT_NAMESPACE: "true"}
    _drop_rolebinding(kube, name)
    # Applying an intent of only the kept mark drops every other field the agent's field
    # manager owned (its labels and annotation).
    meta: dict[str, Any] = {"name": name, **({"labels": labels} if labels else {})}
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
    return theirs


def created_by_agent(kube: Kube) -> list[str]:
    """Serving namespaces the agent created (the ones a removal deletes)."""
    return sorted(
        ns["metadata"]["name"]
        for ns in kube.list("v1", "Namespace", label_selector=f"{lb.LABEL_SERVING_NAMESPACE}=true")
        if (ns["metadata"].get("annotations") or {}).get(lb.ANNOTATION_CREATED_BY_AGENT) == "true"
    )


def kept(kube: Kube) -> list[str]:
    """Namespaces the agent kept when they stopped being serving namespaces (by name)."""
    return sorted(ns["metadata"]["name"]
                  for ns in kube.list("v1", "Namespace", label_selector=KEPT_SELECTOR))


def disable_all(kube: Kube, keep: frozenset[str] = frozenset()) -> None:
    """Disable every namespace the agent enabled (platform removal), but those in ``keep``.

    Those are left as they are: a removal never deletes what they still hold (the caller
    found what they hold: the others hold nothing the agent did not create). Namespaces the
    agent kept earlier (:func:`kept`) and not in ``keep`` are deleted: the caller found that
    they hold nothing else now.
    """
    for ns in kube.list("v1", "Namespace", label_selector=f"{lb.LABEL_SERVING_NAMESPACE}=true"):
        if ns["metadata"]["name"] not in keep:
            disable(kube, ns, checked=True)
    for ns in kube.list("v1", "Namespace", label_selector=KEPT_SELECTOR):
        name = ns["metadata"]["name"]
        if name not in keep and not ns["metadata"].get("deletionTimestamp"):
            log.info("deleting namespace %s: the agent created and kept it, and it holds "
                     "nothing else now", name)
            kube.delete("v1", "Namespace", name)
