"""The cluster's CRDs as the agent reads them on every resync, without re-reading megabytes.

A stack's CRDs are large (KServe's InferenceService CRD alone is hundreds of kilobytes), and
the agent looks at each of them several times per resync: to decide whether it is the
agent's, to wait until it is Established, to report status, to find a stack's objects. A
full GET makes the API server decode, convert and encode all of it, and the client parse
it, every time. :class:`CrdCache` asks first for the CRD's metadata alone and reads the
whole object again only when its resourceVersion moved since the last full read.
"""

from __future__ import annotations

from typing import Any

from addon_agent.io.kube import Kube

Obj = dict[str, Any]

CRD_API = "apiextensions.k8s.io/v1"
CRD_KIND = "CustomResourceDefinition"


class CrdCache:
    """Full CRDs by name, re-read only after they changed. Callers must not mutate them."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube
        self._full: dict[str, tuple[str, Obj]] = {}

    def get(self, name: str, *, cached: bool = True) -> Obj | None:
        """The CRD ``name``, or None when it does not exist.

        ``cached`` lets the API server answer the metadata from its watch cache, which can
        trail a write by a moment: fine for polling (Established, status); a decision that
        must see the latest state (whose CRD it is) passes ``cached=False``, a consistent
        read (:meth:`~addon_agent.io.kube.Kube.latest_metadata`).
        """
        meta = (self._kube.metadata(CRD_API, CRD_KIND, name, cached=True) if cached
                else self._kube.latest_metadata(CRD_API, CRD_KIND, name))
        if meta is None:
            self._full.pop(name, None)
            return None
        known = self._full.get(name)
        if known is not None and known[0] == str(meta.get("resourceVersion", "")):
            return known[1]
        full = self._kube.get(CRD_API, CRD_KIND, name)
        if full is None:
            self._full.pop(name, None)
            return None
        self._full[name] = (str(full.get("metadata", {}).get("resourceVersion", "")), full)
        return full
