"""What the agent applied and has not removed yet: the inventory ConfigMap (I/O).

Beside the objects, the ConfigMap keeps what each last write of the agent left
(:class:`Applied`), so that a restarted agent applies again only what changed since (see
:func:`addon_agent.io.applier.unchanged_since`), not the whole stack.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

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


class Applied(NamedTuple):
    """What one write of the agent left: the hash of what it applied and the object it made."""

    digest: str
    resource_version: str
    uid: str
    generation: int | None
    """``metadata.generation`` after the write; None for kinds that keep none."""


class Inventory:
    """The ConfigMap :data:`INVENTORY_CONFIGMAP` in the agent's namespace."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self._applied: dict[Ref, Applied] | None = None

    def _data(self) -> dict[str, str]:
        cm = self.kube.get("v1", "ConfigMap", INVENTORY_CONFIGMAP, self.namespace)
        return dict((cm or {}).get("data") or {})

    def load(self) -> list[Ref]:
        """Every object the agent applied and has not removed yet."""
        return [Ref(*item) for item in json.loads(self._data().get("objects", "[]"))]

    @property
    def applied(self) -> dict[Ref, Applied]:
        """What the agent's last write of each object left.

        Read from the ConfigMap once (as an earlier agent process saved it), kept up to date
        by the applier, saved with the objects by :meth:`save`.
        """
        if self._applied is None:
            self._applied = {
                Ref(*item[:4]): Applied(item[4], item[5], item[6], item[7])
                for item in json.loads(self._data().get("applied", "[]"))
                if isinstance(item, list) and len(item) == 8
            }
        return self._applied

    def save(self, refs: list[Ref]) -> None:
        """Record ``refs`` (duplicates dropped, order kept).

        With what the agent applied of each (:attr:`applied`).
        """
        unique = list(dict.fromkeys(refs))
        applied = self.applied
        self.kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": INVENTORY_CONFIGMAP,
                    "namespace": self.namespace,
                    "labels": lb.ours(),
                },
                "data": {
                    "objects": json.dumps([r.as_list() for r in unique]),
                    "applied": json.dumps([[*r.as_list(), *applied[r]] for r in unique
                                           if r in applied]),
                },
            }
        )
