"""The add-on's registration with OCM, written by the manager where no Helm chart does it.

OCM knows the add-on by its ClusterManagementAddOn (``model-serving``) and the AddOnTemplate it
names (what OCM's add-on manager deploys on each cluster). The Helm chart creates both. An OLM
bundle cannot carry either kind (docs/olm.md), so it ships them in a ConfigMap instead, key
``registration.yaml`` (a YAML stream), and the manager started with ``--registration-source``
creates them from it and puts them back when they drift, at start and about once a minute,
before it writes the AddOnDeploymentConfig the ClusterManagementAddOn owns
(:mod:`addon_manager.shell.addonconfig`).

The ConfigMap may hold only this add-on's registration: one ClusterManagementAddOn named
``model-serving`` and AddOnTemplates for it (:func:`source_objects` refuses anything else), so
whoever may write ConfigMaps in the manager's namespace gains no other object through it. The
manager never deletes a registration: removing the operator leaves it for the admin (an old
AddOnTemplate, too, once clusters have rolled to a new one).
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import yaml

from addon_api import constants as c
from addon_manager.shell.keeping import MANAGED_BY, keep

log = logging.getLogger(__name__)

Obj = dict[str, Any]

SOURCE_KEY = "registration.yaml"
"""The key of the ConfigMap that holds the registration (a YAML stream)."""
GROUP, VERSION = "addon.open-cluster-management.io", "v1alpha1"
PLURALS = {"ClusterManagementAddOn": "clustermanagementaddons",
           "AddOnTemplate": "addontemplates"}
"""The kinds a registration is made of, by their plural."""


class SourceError(ValueError):
    """The ConfigMap lacks its key, or holds something that is not this add-on's registration."""


def source_objects(data: dict[str, str] | None, name: str) -> list[Obj]:
    """The registration in the ConfigMap ``name``'s data, ClusterManagementAddOn first. Pure.

    Raises SourceError naming the key, or the object and what is wrong with it: a kind other
    than ClusterManagementAddOn and AddOnTemplate, another API version, a
    ClusterManagementAddOn not named ``model-serving`` (or none, or two), an AddOnTemplate for
    another add-on, a namespace.
    """
    text = (data or {}).get(SOURCE_KEY)
    if text is None:
        raise SourceError(f"ConfigMap {name} has no key {SOURCE_KEY}")
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise SourceError(f"ConfigMap {name} key {SOURCE_KEY}: not YAML: {err}") from err
    out: list[Obj] = []
    for number, doc in enumerate(docs, 1):
        where = f"ConfigMap {name} key {SOURCE_KEY}, object {number}"
        if not isinstance(doc, dict) or doc.get("kind") not in PLURALS:
            kind = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
            raise SourceError(f"{where}: {kind} is not part of a registration "
                              f"(only {' and '.join(PLURALS)})")
        meta = doc.get("metadata") or {}
        if doc.get("apiVersion") != f"{GROUP}/{VERSION}":
            raise SourceError(f"{where}: apiVersion {doc.get('apiVersion')}, not "
                              f"{GROUP}/{VERSION}")
        if meta.get("namespace"):
            raise SourceError(f"{where}: {doc['kind']} is cluster-scoped (metadata.namespace)")
        if doc["kind"] == "ClusterManagementAddOn" and meta.get("name") != c.ADDON_NAME:
            raise SourceError(f"{where}: ClusterManagementAddOn {meta.get('name')!r}, not "
                              f"{c.ADDON_NAME!r}")
        if doc["kind"] == "AddOnTemplate" and (doc.get("spec") or {}).get(
                "addonName") != c.ADDON_NAME:
            raise SourceError(f"{where}: AddOnTemplate {meta.get('name')!r} is not for "
                              f"add-on {c.ADDON_NAME!r} (spec.addonName)")
        if not meta.get("name"):
            raise SourceError(f"{where}: {doc['kind']} has no metadata.name")
        out.append(doc)
    if [d["kind"] for d in out].count("ClusterManagementAddOn") != 1:
        raise SourceError(f"ConfigMap {name} key {SOURCE_KEY}: needs exactly one "
                          f"ClusterManagementAddOn {c.ADDON_NAME!r}")
    return sorted(out, key=lambda d: d["kind"] != "ClusterManagementAddOn")


def desired(obj: Obj, namespace: str) -> Obj:
    """The object as the manager keeps it: the source's, labelled as the manager's. Pure.

    A ClusterManagementAddOn's default AddOnDeploymentConfig is the one the manager owns, in
    its own ``namespace`` (an OLM install may be in another namespace than the chart's).
    """
    meta = obj.get("metadata") or {}
    out = copy.deepcopy({k: v for k, v in obj.items() if k != "metadata"})
    for config in (out.get("spec") or {}).get("supportedConfigs") or []:
        if config.get("resource") == "addondeploymentconfigs" and config.get("defaultConfig"):
            config["defaultConfig"]["namespace"] = namespace
    out["metadata"] = {"name": meta["name"],
                       "labels": {**(meta.get("labels") or {}),
                                  "app.kubernetes.io/managed-by": MANAGED_BY},
                       **({"annotations": meta["annotations"]} if meta.get("annotations")
                          else {})}
    return out


def differs(live: Obj, want: Obj) -> bool:
    """Whether the live object lacks what ``want`` says: its spec, labels or annotations. Pure."""
    meta, wanted = live.get("metadata") or {}, want["metadata"]
    return bool(
        live.get("spec") != want.get("spec")
        or any((meta.get(part) or {}).get(k) != v
               for part in ("labels", "annotations")
               for k, v in (wanted.get(part) or {}).items())
    )


def apply(core: Any, custom: Any, namespace: str, source: str) -> bool:
    """Create or update the registration from the ConfigMap ``namespace/source``.

    True when every object is as the ConfigMap says (no write when it already is). False, with
    a log line naming what is wrong, when the ConfigMap is unreadable or not a registration:
    nothing is written then.
    """
    from kubernetes.client.exceptions import ApiException

    try:
        objects = source_objects(core.get("configmaps", namespace, source).get("data"), source)
    except ApiException as err:
        log.warning("add-on registration not written: ConfigMap %s/%s unreadable (%s)",
                    namespace, source, err.status)
        return False
    except SourceError as err:
        log.warning("add-on registration not written: %s", err)
        return False
    return all(_keep(custom, desired(obj, namespace)) for obj in objects)


def merged(live: Obj, want: Obj) -> Obj:
    """The body that replaces ``live``: ``want``'s spec over the live object. Pure.

    ``want``'s labels and annotations are added to the live ones.
    """
    meta = live.get("metadata") or {}
    body = {**live, "spec": copy.deepcopy(want.get("spec"))}
    body["metadata"] = {
        **meta,
        "labels": {**(meta.get("labels") or {}), **want["metadata"]["labels"]},
        "annotations": {**(meta.get("annotations") or {}),
                        **(want["metadata"].get("annotations") or {})},
    }
    return body


def _keep(custom: Any, want: Obj) -> bool:
    kind, name = want["kind"], want["metadata"]["name"]
    plural = PLURALS[kind]
    return keep(
        f"{kind} {name} (from the registration source)", want,
        get=lambda: dict(custom.get_cluster_custom_object(GROUP, VERSION, plural, name)),
        create=lambda body: custom.create_cluster_custom_object(GROUP, VERSION, plural, body),
        replace=lambda body: custom.replace_cluster_custom_object(GROUP, VERSION, plural, name,
                                                                  body),
        differs=differs, merged=merged)
