"""What the agent applied and has not removed yet: the inventory ConfigMap (I/O)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from addon_agent import labels as lb
from addon_agent.io.kube import Kube
from addon_agent.pure import planning

Obj = dict[str, Any]
INVENTORY_CONFIGMAP = "model-serving-agent-inventory"


@dataclass(frozen=True)
class Ref:
    """Identity of an object the agent applied."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Obj) -> Ref:
        """The Ref of an object."""
        meta = obj["metadata"]
        return cls(obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])

    def as_list(self) -> list[str]:
        """JSON form."""
        return [self.api_version, self.kind, self.namespace, self.name]

    def phase(self) -> int:
        """The apply phase of the object's kind (:func:`addon_agent.pure.planning.phase_of`)."""
        return planning.phase_of({"kind": self.kind})


class Inventory:
    """The ConfigMap :data:`INVENTORY_CONFIGMAP` in the agent's namespace."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace

    def load(self) -> list[Ref]:
        """Every object the agent applied and has not removed yet."""
        cm = self.kube.get("v1", "ConfigMap", INVENTORY_CONFIGMAP, self.namespace)
        raw = ((cm or {}).get("data") or {}).get("objects", "[]")
        return [Ref(*item) for item in json.loads(raw)]

    def save(self, refs: list[Ref]) -> None:
        """Record ``refs`` (duplicates dropped, order kept)."""
        unique = list(dict.fromkeys(refs))
        self.kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": INVENTORY_CONFIGMAP,
                    "namespace": self.namespace,
                    "labels": lb.ours(),
                },
                "data": {"objects": json.dumps([r.as_list() for r in unique])},
            }
        )
