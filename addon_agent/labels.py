"""Labels and annotations the agent puts on what it creates (how it finds its own objects)."""

from __future__ import annotations

from typing import Any, Final

from addon_api import constants as c

LABEL_PLATFORM: Final = f"{c.GROUP}/platform"
"""On stack objects: the platform (KServe or ModelMesh) they belong to."""
LABEL_STACK_VERSION: Final = f"{c.GROUP}/stack-version"
"""On stack objects: the version of the bundle they came from."""
LABEL_SERVING_NAMESPACE: Final = f"{c.GROUP}/serving-namespace"
"""On namespaces enabled for serving by the agent (value ``"true"``)."""
ANNOTATION_CREATED_BY_AGENT: Final = f"{c.GROUP}/created-by-agent"
"""On namespaces the agent created (so it may delete them again)."""
LABEL_KEPT_NAMESPACE: Final = f"{c.GROUP}/kept-namespace"
"""On a namespace the agent created and stopped serving but kept, because it held objects the
agent did not create (value ``"true"``): the one mark the agent leaves when it hands such a
namespace over, so that it still reports it after a restart and deletes it once it holds
nothing else. Removing the label (or the namespace) ends that."""
ANNOTATION_OWNED_ENTRIES: Final = f"{c.GROUP}/owned-entries"
"""On storage-config Secrets: JSON map entry name -> SealedStorageConnection ns/name."""

LABEL_STORAGE_CONFIG: Final = f"{c.GROUP}/storage-config"
"""On storage-config Secrets the agent wrote entries into (value ``"true"``)."""

MANAGED_SELECTOR: Final = f"{c.LABEL_MANAGED_BY}={c.FIELD_MANAGER}"
"""Label selector matching everything the agent created."""


def ours() -> dict[str, str]:
    """The labels on every object the agent creates."""
    return {c.LABEL_MANAGED_BY: c.FIELD_MANAGER, c.LABEL_PART_OF: c.ADDON_NAME}


def is_ours(obj: dict[str, Any]) -> bool:
    """Whether ``obj`` carries the agent's managed-by label."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(c.LABEL_MANAGED_BY) == c.FIELD_MANAGER)
