"""Let go of the cluster before the add-on's rights go (``model-serving-addon agent-release``).

When a hub admin disables the add-on on a cluster, OCM deletes the agent's Deployment, its
ClusterRoles and bindings together. Objects that still carry the agent's finalizer could then
never be deleted, and the plaintext credentials the agent wrote into ``storage-config`` Secrets
would stay behind. The chart's AddOnTemplate therefore carries a Job marked as OCM's pre-delete
hook (``addon.open-cluster-management.io/addon-pre-delete``): OCM runs it, with the agent's
ServiceAccount and rights, before it removes anything else, and waits for it to complete.

The Job runs :func:`release`, which

* removes every entry the agent wrote into ``storage-config`` Secrets (a Secret the agent
  created goes once it is empty; other writers' entries are never touched);
* removes the agent's finalizer from every SealedStorageConnection and ServingPlatform, so
  OCM's work agent can delete them when their works go.

It does not uninstall the serving stack: models keep serving (with the credentials they
already downloaded). To remove the stack, delete the ModelServing (or take the cluster out of
its Placement) before disabling the add-on (docs/user-guide.md).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes.dynamic.exceptions import ConflictError, NotFoundError

from addon_agent.io import delivery
from addon_agent.io.kube import Kube, api_client_for
from addon_api import constants as c

log = logging.getLogger(__name__)

FINALIZER = f"{c.GROUP}/agent"
"""The finalizer the agent (kopf) puts on the objects it handles."""
API = f"{c.GROUP}/{c.VERSION}"


@dataclass
class Released:
    """What :func:`release` let go of."""

    connections: list[str] = field(default_factory=list)
    """``namespace/name`` of the SealedStorageConnections whose entries were removed."""
    finalizers: list[str] = field(default_factory=list)
    """``Kind namespace/name`` of the objects the agent's finalizer was removed from."""


def without_finalizer(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch that drops the agent's finalizer from ``obj`` (None: it has none).

    It carries the object's resourceVersion, so a finalizer someone else adds meanwhile is
    never lost: the patch then fails with a conflict and is made again.
    """
    meta = obj.get("metadata") or {}
    finalizers = list(meta.get("finalizers") or [])
    if FINALIZER not in finalizers:
        return None
    return {"metadata": {"finalizers": [f for f in finalizers if f != FINALIZER],
                         "resourceVersion": meta.get("resourceVersion")}}


def _drop_finalizer(kube: Kube, kind: str, name: str, namespace: str | None) -> bool:
    for _ in range(5):
        obj = kube.get(API, kind, name, namespace)
        patch = without_finalizer(obj) if obj is not None else None
        if patch is None:
            return False
        try:
            kube.patch(API, kind, name, patch, namespace)
            return True
        except ConflictError:
            continue
        except NotFoundError:
            return False
    raise RuntimeError(f"{kind} {namespace or ''}/{name} kept changing: its finalizer stays")


def release(kube: Kube) -> Released:
    """Remove the agent's credentials entries and finalizers from the cluster (see module)."""
    out = Released()
    for sealed in kube.list(API, c.KIND_SEALED_STORAGE_CONNECTION):
        meta = sealed["metadata"]
        delivery.remove(kube, meta["namespace"], meta["name"])
        out.connections.append(f"{meta['namespace']}/{meta['name']}")
        if _drop_finalizer(kube, c.KIND_SEALED_STORAGE_CONNECTION, meta["name"],
                           meta["namespace"]):
            out.finalizers.append(
                f"{c.KIND_SEALED_STORAGE_CONNECTION} {meta['namespace']}/{meta['name']}")
    for platform in kube.list(API, c.KIND_SERVING_PLATFORM):
        name = platform["metadata"]["name"]
        if _drop_finalizer(kube, c.KIND_SERVING_PLATFORM, name, None):
            out.finalizers.append(f"{c.KIND_SERVING_PLATFORM} /{name}")
    return out


def main(argv: Sequence[str]) -> int:
    """Run :func:`release` once and exit 0 (the pre-delete hook's Job)."""
    parser = argparse.ArgumentParser(prog="model-serving-addon agent-release")
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"),
                        help="kubeconfig of the managed cluster (default: $KUBECONFIG, else "
                        "in-cluster)")
    args = parser.parse_args(list(argv))
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    done = release(Kube(api_client_for(args.kubeconfig)))
    sys.stdout.write(
        f"released: entries of {len(done.connections)} sealed connection(s) removed "
        f"({', '.join(done.connections) or 'none'}); the agent's finalizer removed from "
        f"{', '.join(done.finalizers) or 'nothing'}\n")
    return 0
