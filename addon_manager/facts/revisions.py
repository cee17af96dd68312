"""An intent's revisions: numbered copies of its spec, kept on the hub as ControllerRevisions.

Pure. A revision holds what a change is made of: the spec without ``rollout`` (how a change
travels is not a change) and without ``placementRef`` (which clusters, not what they run).
Each revision is a ControllerRevision in the intent's namespace, owned by the intent (the
garbage collector removes them with it), labelled with the intent's kind and name, named
``<intent>-<digest>``; its ``revision`` is the number. A spec equal to an earlier revision's
reuses that revision's number.

A revision is trusted only when its name carries the manager's seal: an HMAC, under the
manager's hash key, of the intent it belongs to and of its content (:func:`sealed_name`). A
ControllerRevision anyone else wrote (with the manager's labels, say, and a spec of their
choosing) is not a revision of the intent: a rollback or an undo never renders it, and it is
never pruned (it is not the manager's to delete). Whatever revision is rendered, the manager
judges the work it makes under today's policy (:func:`addon_manager.engine.policy.judge_work`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from addon_api import constants as c
from addon_manager.facts.canonical import canonical_hash, keyed_canonical_hash

API_VERSION = "apps/v1"
PATH = "/apis/apps/v1/namespaces/{namespace}/controllerrevisions"
NOT_CONTENT = ("rollout", "placementRef")


@dataclass(frozen=True)
class RevisionFact:
    """One kept revision as the manager's index holds it."""

    number: int
    digest: str
    name: str
    spec: Mapping[str, Any]


def content(spec: Mapping[str, Any]) -> dict[str, Any]:
    """What a revision keeps of an intent's spec."""
    return {k: v for k, v in spec.items() if k not in NOT_CONTENT}


def digest(spec: Mapping[str, Any]) -> str:
    """The digest of a spec's revision content (16 hex digits)."""
    return canonical_hash(content(spec))[:16]


def sealed_name(key: bytes, kind: str, namespace: str, name: str,
                spec: Mapping[str, Any]) -> str:
    """The name the manager gives revision content ``spec`` of an intent.

    ``<name>-<10 hex digits of an HMAC under key>`` of the intent (kind, namespace, name)
    and the content: only the manager can make it.
    """
    seal = keyed_canonical_hash(key, [kind, namespace, name, content(spec)])
    return f"{name}-{seal[:10]}"


def trusted(facts: Iterable[RevisionFact], key: bytes, kind: str, namespace: str,
            name: str) -> list[RevisionFact]:
    """The revisions among ``facts`` that the manager wrote (their names carry its seal)."""
    return [f for f in facts if f.name == sealed_name(key, kind, namespace, name, f.spec)]


def parse(obj: Mapping[str, Any]) -> tuple[tuple[str, str, str], RevisionFact] | None:
    """(intent key, fact) of a ControllerRevision the manager wrote; None for others."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    if labels.get(c.LABEL_MANAGED_BY) != c.FIELD_MANAGER:
        return None
    kind, name = labels.get(c.LABEL_INTENT_KIND), labels.get(c.LABEL_INTENT_NAME)
    spec = (obj.get("data") or {}).get("spec")
    number = obj.get("revision")
    if not kind or not name or not isinstance(spec, Mapping) or not isinstance(number, int):
        return None
    return ((str(kind), str(meta.get("namespace", "")), str(name)),
            RevisionFact(number, digest(spec), str(meta.get("name", "")), spec))


@dataclass(frozen=True)
class Revisions:
    """What the intent's current spec means for its revisions."""

    target: int
    """The number of the current spec's revision."""
    create: dict[str, Any] | None
    """A ControllerRevision to create first (the spec is new), else None."""
    known: dict[int, Mapping[str, Any]]
    """Every revision's content by number (the one to create included)."""


def resolve(kind: str, body: Mapping[str, Any], kept: Iterable[RevisionFact],
            key: bytes, numbered: Iterable[int] = ()) -> Revisions:
    """The target revision of ``body`` (an intent), creating a new one when its spec is new.

    ``kept`` are the trusted revisions (:func:`trusted`); a new one is numbered above them
    and above ``numbered`` (every other number seen, so that no number means two specs).
    """
    meta = body.get("metadata") or {}
    spec = content(body.get("spec") or {})
    mine = digest(spec)
    facts = sorted(kept, key=lambda f: f.number)
    known = {f.number: f.spec for f in facts}
    for fact in facts:
        if fact.digest == mine:
            return Revisions(fact.number, None, known)
    number = max([f.number for f in facts] + list(numbered) + [0]) + 1
    known[number] = spec
    name = sealed_name(key, kind, str(meta.get("namespace", "")), str(meta.get("name", "")), spec)
    return Revisions(number, controller_revision(kind, meta, spec, number, name), known)


def controller_revision(kind: str, meta: Mapping[str, Any], spec: Mapping[str, Any],
                        number: int, revision_name: str) -> dict[str, Any]:
    """The ControllerRevision keeping revision ``number`` of an intent.

    Named ``revision_name`` (:func:`sealed_name`).
    """
    name = str(meta.get("name", ""))
    return {
        "apiVersion": API_VERSION,
        "kind": "ControllerRevision",
        "metadata": {
            "name": revision_name,
            "namespace": str(meta.get("namespace", "")),
            "labels": {c.LABEL_MANAGED_BY: c.FIELD_MANAGER, c.LABEL_PART_OF: c.ADDON_NAME,
                       c.LABEL_INTENT_KIND: kind, c.LABEL_INTENT_NAME: name},
            "ownerReferences": [{
                "apiVersion": c.API_VERSION, "kind": kind, "name": name,
                "uid": str(meta.get("uid", "")), "controller": True,
            }],
        },
        "revision": number,
        "data": {"spec": dict(spec)},
    }


def to_prune(kept: Iterable[RevisionFact], in_use: Iterable[int], limit: int) -> list[str]:
    """Names of the revisions to delete: beyond ``limit`` and used by nothing, oldest first."""
    used = set(in_use)
    facts = sorted(kept, key=lambda f: f.number, reverse=True)
    keep = {f.number for f in facts if f.number in used}
    for fact in facts:
        if len(keep) >= limit:
            break
        keep.add(fact.number)
    return [f.name for f in reversed(facts) if f.number not in keep]
