"""The hub CRDs, brought to the manager's own schema when it starts to act.

Helm installs a chart's ``crds/`` once and never upgrades them: after ``helm upgrade`` the
new manager would run against the old CRDs, and the API server would prune every field the
old schema does not know from what users write. So the manager applies the CRDs of the kinds
it serves (generated from the same models it validates with, :func:`addon_api.crdgen.crd`)
by server-side apply as it starts to lead, marked with its version
(:data:`VERSION_ANNOTATION`). A CRD already marked with a newer version is left alone: an
older manager (a replica of the release before, during a rolling update) never takes fields
away from a newer one's CRD.

The manager's ClusterRole may patch only these CRDs (by name) and create none: Helm creates
them at the first install. A CRD that is missing is reported and skipped.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from addon_api import constants as c
from addon_api.crdgen import crd
from addon_api.hub import HUB_RESOURCES

log = logging.getLogger(__name__)

VERSION_ANNOTATION = f"{c.GROUP}/crd-version"
"""The version of the manager that last applied a CRD."""


def desired(version: str) -> list[dict[str, Any]]:
    """The hub CRDs as this manager (``version``) applies them."""
    out = []
    for cls in HUB_RESOURCES:
        obj = crd(cls)
        obj["metadata"]["annotations"] = {VERSION_ANNOTATION: version}
        out.append(obj)
    return out


def _release(version: str) -> tuple[int, ...] | None:
    """``0.1.0`` (or ``v0.1.0``, ``0.2.0rc1``: the leading numbers) as a tuple; None if none."""
    found = re.match(r"v?(\d+(?:\.\d+)*)", version.strip())
    return tuple(int(part) for part in found.group(1).split(".")) if found else None


def newer(live: str, mine: str) -> bool:
    """Whether a CRD marked ``live`` comes from a newer manager than ``mine``."""
    theirs, ours = _release(live), _release(mine)
    return theirs is not None and ours is not None and theirs > ours


def ensure(api: client.ApiClient, version: str) -> list[str]:
    """Apply the hub CRDs that are not a newer manager's; the names applied."""
    extensions = client.ApiextensionsV1Api(api)
    applied = []
    for obj in desired(version):
        name = obj["metadata"]["name"]
        try:
            live = extensions.read_custom_resource_definition(name)
        except ApiException as err:
            if err.status == 404:
                log.error("hub CRD %s is not installed (helm install installs it): the "
                          "manager cannot serve its kind", name)
            else:
                log.error("cannot read hub CRD %s: %s %s", name, err.status, err.reason)
            continue
        meta = live.metadata
        marked = ((meta.annotations if meta else None) or {}).get(VERSION_ANNOTATION) or ""
        if newer(marked, version):
            log.warning("hub CRD %s was applied by a newer manager (%s); this one (%s) leaves "
                        "it as it is", name, marked, version)
            continue
        try:
            extensions.patch_custom_resource_definition(
                name, obj, field_manager=c.FIELD_MANAGER, force=True,
                _content_type="application/apply-patch+yaml")
        except ApiException as err:
            log.error("cannot apply hub CRD %s (%s %s): the manager's role needs patch on it; "
                      "the kind keeps its old schema", name, err.status, err.reason)
            continue
        applied.append(name)
    if applied:
        log.info("hub CRDs at version %s: %s", version, ", ".join(applied))
    return applied
