"""The add-on's default AddOnDeploymentConfig, which the manager owns (shell: reads and writes).

OCM's add-on manager renders the chart's AddOnTemplate for each cluster with the variables of
the AddOnDeploymentConfig the ClusterManagementAddOn names (``model-serving-defaults``). Part
of it is the hub admin's (the image, log level, namespace policy, resources: the chart's
values) and one variable is the manager's (``SEAL_VERIFY_KEY``, its public sealing key). When
Helm owned the object and the manager wrote its variable into it, every ``helm upgrade`` that
changed a value replaced the list without the key (the agents were rendered without it, then
with it again) and a GitOps tool's self-heal removed it for ever after.

So the object has one owner, the manager: the chart ships the admin's part as the ConfigMap
``--addon-config-source`` names (key ``spec.yaml``, an AddOnDeploymentConfig ``spec``), and
the manager writes the AddOnDeploymentConfig from it plus its key, at start and about once a
minute (:func:`desired` decides, :func:`publish` writes only when something differs). The
object's owner is the ClusterManagementAddOn, so uninstalling the chart removes it.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import yaml

from addon_api import constants as c
from addon_manager.shell.keeping import MANAGED_BY, keep
from addon_manager.shell.sealkeys import (
    ADC_GROUP,
    ADC_PLURAL,
    ADC_VERSION,
    with_verify_key,
)

log = logging.getLogger(__name__)

Obj = dict[str, Any]

SOURCE_KEY = "spec.yaml"
"""The key of the chart's ConfigMap that holds the AddOnDeploymentConfig ``spec``."""
CMA_PLURAL = "clustermanagementaddons"


class SourceError(ValueError):
    """The chart's ConfigMap is missing its key or does not hold a mapping."""


def source_spec(data: dict[str, str] | None, name: str) -> Obj:
    """The AddOnDeploymentConfig ``spec`` in the ConfigMap ``name``'s data.

    Raises SourceError naming the key when it is absent or not a mapping.
    """
    text = (data or {}).get(SOURCE_KEY)
    if text is None:
        raise SourceError(f"ConfigMap {name} has no key {SOURCE_KEY}")
    spec = yaml.safe_load(text)
    if not isinstance(spec, dict):
        raise SourceError(f"ConfigMap {name} key {SOURCE_KEY}: not a mapping")
    return spec


def desired(spec: Obj, verify_key: str, namespace: str, name: str,
            owner: Obj | None) -> Obj:
    """The AddOnDeploymentConfig the manager keeps. Pure.

    The admin's ``spec`` with the manager's verify key among its variables, owned by the
    ClusterManagementAddOn ``owner`` (its metadata) when there is one.
    """
    body = copy.deepcopy(spec)
    body["customizedVariables"] = with_verify_key(
        list(body.get("customizedVariables") or []), verify_key)
    meta: Obj = {"name": name, "namespace": namespace,
                 "labels": {"app.kubernetes.io/managed-by": MANAGED_BY}}
    if owner is not None:
        meta["ownerReferences"] = [{
            "apiVersion": f"{ADC_GROUP}/{ADC_VERSION}", "kind": "ClusterManagementAddOn",
            "name": str(owner["name"]), "uid": str(owner["uid"])}]
    return {"apiVersion": f"{ADC_GROUP}/{ADC_VERSION}", "kind": "AddOnDeploymentConfig",
            "metadata": meta, "spec": body}


def differs(live: Obj, want: Obj) -> bool:
    """Whether the live object lacks what ``want`` says (spec, the label, the owner). Pure."""
    meta, wanted = live.get("metadata") or {}, want["metadata"]
    return bool(
        live.get("spec") != want["spec"]
        or (meta.get("labels") or {}).get("app.kubernetes.io/managed-by") != MANAGED_BY
        or [(o.get("kind"), o.get("uid")) for o in meta.get("ownerReferences") or []]
        != [(o["kind"], o["uid"]) for o in wanted.get("ownerReferences") or []]
    )


def publish(core: Any, custom: Any, namespace: str, name: str, source: str,
            verify_key: str) -> bool:
    """Create or update the AddOnDeploymentConfig ``namespace/name``; True when it is right.

    It is made from the ConfigMap ``source`` and ``verify_key``, with no write when it already
    is so. False (and a log line) when the ConfigMap is missing or wrong: the object is then
    left as it is.
    """
    from kubernetes.client.exceptions import ApiException

    try:
        data = core.get("configmaps", namespace, source).get("data")
        spec = source_spec(data, source)
    except ApiException as err:
        log.warning("AddOnDeploymentConfig %s/%s not written: ConfigMap %s unreadable (%s)",
                    namespace, name, source, err.status)
        return False
    except (SourceError, yaml.YAMLError) as err:
        log.warning("AddOnDeploymentConfig %s/%s not written: %s", namespace, name, err)
        return False
    try:
        cma = custom.get_cluster_custom_object(ADC_GROUP, ADC_VERSION, CMA_PLURAL,
                                               c.ADDON_NAME)
        owner: Obj | None = cma.get("metadata") or None
    except ApiException as err:
        if err.status not in (403, 404):
            raise
        owner = None
    want = desired(spec, verify_key, namespace, name, owner)
    return keep(
        f"AddOnDeploymentConfig {namespace}/{name} (from ConfigMap {source})", want,
        get=lambda: dict(custom.get_namespaced_custom_object(
            ADC_GROUP, ADC_VERSION, namespace, ADC_PLURAL, name)),
        create=lambda body: custom.create_namespaced_custom_object(
            ADC_GROUP, ADC_VERSION, namespace, ADC_PLURAL, body),
        replace=lambda body: custom.replace_namespaced_custom_object(
            ADC_GROUP, ADC_VERSION, namespace, ADC_PLURAL, name, body),
        differs=differs, merged=merged)


def merged(live: Obj, want: Obj) -> Obj:
    """The body that replaces ``live``: ``want`` at its resourceVersion. Pure.

    The labels others put on the object stay.
    """
    body = copy.deepcopy(want)
    body["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
    body["metadata"]["labels"] = {**(live["metadata"].get("labels") or {}),
                                  **want["metadata"]["labels"]}
    return body
