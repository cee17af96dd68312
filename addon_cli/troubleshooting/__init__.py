"""What each phase and reason means, as data: the prose of docs/troubleshooting.md and ``explain``.

The values themselves are the enums of :mod:`addon_api.reasons` (the contract the manager and
the agent set); what a reader is told about them lives here, one YAML file per block of
``docs/troubleshooting.md`` (a family of reasons, e.g. ``cluster-problems.yaml``), shipped as
package data. The controllers never load it: ``explain`` reads it through :func:`advice`, and
``python -m addon_cli.troubleshooting`` (:mod:`addon_cli.troubleshooting.doc`, run by ``make
crds``) writes the doc's marked blocks from it.

A file holds ``style`` (``heading``: one heading of ``level`` per entry; ``list``: one bullet per
entry, the values in bold; ``table``: one row reason | where | comes from | meaning), ``level``
and ``entries``. An entry has ``terms``, the values it explains written ``EnumName.Value``
(``IntentReason.PlacementNotFound``; ``IntentReason.Removing`` is not
``ServingPlatformReason.Removing``), and the text fields of :class:`Entry`. In a text field,
lines are joined with single spaces (wrap them freely), a blank line separates paragraphs and a
line starting with ``- `` starts a list item (indent its continuation lines). A new member of a
documented enum needs an entry: ``tests/unit/test_docs.py`` fails until it has one and the doc
is regenerated.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict

from addon_api.reasons import (
    ENUMS,
    IntentConditionType,
    SealedConditionType,
    ServingPlatformConditionType,
)

FAMILIES: tuple[str, ...] = (
    "intent-placement",
    "intent-ready",
    "intent-progressing",
    "intent-degraded",
    "intent-deletion",
    "intent-phases",
    "rollout",
    "cluster-before",
    "cluster-problems",
    "cluster-on-its-way",
    "cluster-stale",
    "cluster-reports",
    "platform",
    "sealed",
    "passed-through",
    "alerts",
)
"""Every family (``<name>.yaml``, the doc's block ``<name>``), in the order of the doc."""

DOCUMENTED: tuple[type[StrEnum], ...] = tuple(
    e
    for e in ENUMS
    if e not in (IntentConditionType, ServingPlatformConditionType, SealedConditionType)
)
"""The enums each of whose members has an entry (condition types are explained in the prose
around the entries, which is organised by them)."""

Style = Literal["heading", "list", "table"]


@dataclass(frozen=True)
class Entry:
    r"""What docs/troubleshooting.md says about one or more values set together.

    ``seen`` is where a reader sees them (rendered in italics first), ``means`` what they mean
    (Markdown; paragraphs separated by ``\n\n``, list items start with ``\n- ``), ``todo``
    what to do (after **What to do:**; one starting "if it stays" reads **What to do** if it
    stays). ``title`` replaces the heading made from the values; ``source`` (tables only) says
    whose word the value is.
    """

    terms: tuple[StrEnum, ...]
    seen: str = ""
    means: str = ""
    todo: str = ""
    title: str = ""
    source: str = ""


@dataclass(frozen=True)
class Group:
    """The entries of one family: one marked block of docs/troubleshooting.md."""

    name: str
    entries: tuple[Entry, ...]
    style: Style = "heading"
    level: int = 3


class _EntrySource(BaseModel):
    """An entry as its YAML file writes it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    terms: list[str]
    seen: str = ""
    means: str = ""
    todo: str = ""
    title: str = ""
    source: str = ""


class _GroupSource(BaseModel):
    """A family's YAML file."""

    model_config = ConfigDict(extra="forbid", strict=True)

    style: Style = "heading"
    level: int = 3
    entries: list[_EntrySource]


_MEMBERS: dict[str, StrEnum] = {
    f"{enum.__name__}.{member.value}": member for enum in ENUMS for member in enum
}


def unwrap(text: str) -> str:
    r"""A text field as written in YAML, as one line per paragraph or list item.

    Lines are joined with single spaces, except that a line starting with ``- `` starts a
    list item (``\n- ``); paragraphs stay separated by a blank line (``\n\n``).
    """
    paragraphs: list[str] = []
    for paragraph in text.strip().split("\n\n"):
        items: list[str] = []
        for line in paragraph.split("\n"):
            if not items or line.startswith("- "):
                items.append(line.strip())
            else:
                items[-1] += " " + line.strip()
        paragraphs.append("\n".join(items))
    return "\n\n".join(paragraphs)


def term(name: str, family: str = "") -> StrEnum:
    """The enum member ``name`` (``EnumName.Value``) names; ValueError if it names none."""
    try:
        return _MEMBERS[name]
    except KeyError:
        raise ValueError(
            f"{family}: {name!r} is no member of an enum of addon_api.reasons "
            "(write EnumName.Value)"
        ) from None


def parse(name: str, text: str) -> Group:
    """The family ``name`` from the text of its YAML file."""
    source = _GroupSource.model_validate(yaml.safe_load(text))
    return Group(
        name,
        tuple(
            Entry(
                tuple(term(t, name) for t in e.terms),
                seen=unwrap(e.seen),
                means=unwrap(e.means),
                todo=unwrap(e.todo),
                title=unwrap(e.title),
                source=unwrap(e.source),
            )
            for e in source.entries
        ),
        style=source.style,
        level=source.level,
    )


@functools.cache
def groups() -> tuple[Group, ...]:
    """Every family, read once from the package's YAML files, in the order of the doc."""
    folder = resources.files(__name__)
    return tuple(parse(name, (folder / f"{name}.yaml").read_text()) for name in FAMILIES)


def entries_of(member: StrEnum) -> list[Entry]:
    """The entries that explain ``member``.

    By identity: ``IntentReason.REMOVING`` is not ``ServingPlatformReason.REMOVING``.
    """
    return [
        e
        for g in groups()
        for e in g.entries
        if any(type(t) is type(member) and t is member for t in e.terms)
    ]


def advice(value: str) -> Entry | None:
    """The first entry for a phase or reason value that says something, if there is one."""
    for group in groups():
        for entry in group.entries:
            if any(str(t) == value for t in entry.terms) and (entry.means or entry.todo):
                return entry
    return None
