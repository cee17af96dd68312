"""The generator of docs/troubleshooting.md's marked blocks, from the families' YAML files.

``python -m addon_cli.troubleshooting`` rewrites the blocks between the doc's ``<!-- BEGIN
reasons NAME ... -->`` and ``<!-- END reasons NAME -->`` markers (``--check`` only compares):
one block per family, and the ``index`` block, a table of every value of every enum of
:mod:`addon_api.reasons` linked to where it is explained. The prose around them is hand-written.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Sequence
from enum import StrEnum
from pathlib import Path

from addon_api.reasons import (
    ENUMS,
    AlertName,
    ClusterPhase,
    ClusterReason,
    IntentConditionType,
    IntentPhase,
    IntentReason,
    PassedThroughReason,
    RolloutPhase,
    SealedConditionType,
    SealedPhase,
    SealedReason,
    ServingPlatformConditionType,
    ServingPlatformPhase,
    ServingPlatformReason,
)
from addon_cli.troubleshooting import Entry, Group, entries_of, groups

LABELS: dict[type[StrEnum], str] = {
    IntentConditionType: "intent condition",
    IntentPhase: "intent phase",
    IntentReason: "intent condition reason",
    RolloutPhase: "rollout phase",
    ClusterPhase: "cluster entry phase",
    ClusterReason: "cluster entry reason",
    ServingPlatformConditionType: "ServingPlatform condition",
    ServingPlatformPhase: "ServingPlatform phase",
    ServingPlatformReason: "ServingPlatform reason",
    SealedConditionType: "SealedStorageConnection condition",
    SealedPhase: "SealedStorageConnection phase",
    SealedReason: "SealedStorageConnection reason",
    PassedThroughReason: "cluster entry reason from OCM or KServe",
    AlertName: "alert (the chart's rules, on the hub)",
}
"""How the index of docs/troubleshooting.md names what a value of each enum is."""

HOME: dict[type[StrEnum], str] = {
    IntentConditionType: "Hub intents: conditions and phases",
    IntentPhase: "Intent phases",
    IntentReason: "Hub intents: conditions and phases",
    RolloutPhase: "Rollouts",
    ClusterPhase: "Hub intents: per-cluster entries",
    ClusterReason: "Hub intents: per-cluster entries",
    ServingPlatformConditionType: "On the cluster: ServingPlatform",
    ServingPlatformPhase: "On the cluster: ServingPlatform",
    ServingPlatformReason: "On the cluster: ServingPlatform",
    SealedConditionType: "On the cluster: SealedStorageConnection",
    SealedPhase: "On the cluster: SealedStorageConnection",
    SealedReason: "On the cluster: SealedStorageConnection",
    PassedThroughReason: "Reasons passed through from OCM and KServe",
    AlertName: "Alerts",
}
"""The heading of docs/troubleshooting.md under which each enum's values are explained; the
index links a value without an entry there (an intent condition to its "`Type` reasons")."""

INDEX = "index"
"""Name of the marked block that holds the table of every value (made from :data:`ENUMS`)."""


# Rendering ---------------------------------------------------------------------------------------

WIDTH = 100
"""Column the generated Markdown is wrapped at."""
_LINE_START = re.compile(r"^([-+*>#|=]+|\d+[.)])$")
"""Words that would start a list, heading, quote, table or underline at the start of a line."""


def wrap(text: str, first: str = "", rest: str = "") -> list[str]:
    """``text`` (one paragraph, single spaces) wrapped at :data:`WIDTH`.

    ``first``/``rest`` prefix the first and the other lines (a list item's bullet and
    indent). A word that Markdown would read as block syntax at the start of a line stays at
    the end of the line before it, even past the width.
    """
    lines: list[str] = []
    line = first
    for word in text.split(" "):
        if line.strip() == "" or line == first:
            line += word
        elif len(line) + 1 + len(word) <= WIDTH or _LINE_START.match(word):
            line += " " + word
        else:
            lines.append(line)
            line = rest + word
    lines.append(line)
    return lines


def _paragraph(text: str) -> list[str]:
    out: list[str] = []
    for item in text.split("\n"):
        if item.startswith("- "):
            out += wrap(item[2:], "- ", "  ")
        else:
            out += wrap(item)
    return out


def _code(value: str) -> str:
    return f"`{value}`"


def title(entry: Entry, sep: str = " / ") -> str:
    """The heading (or first table cell) of ``entry``."""
    return entry.title or sep.join(_code(v) for v in dict.fromkeys(str(t) for t in entry.terms))


def paragraphs(entry: Entry) -> list[str]:
    """The body of a heading entry: seen, means and todo as Markdown paragraphs."""
    paras = [p for p in entry.means.split("\n\n") if p]
    if entry.seen:
        lead = f"*{entry.seen}*"
        paras = [f"{lead} {paras[0]}", *paras[1:]] if paras else [lead]
    if entry.todo:
        mark = "**What to do**" if entry.todo.startswith("if it stays") else "**What to do:**"
        todo = f"{mark} {entry.todo}"
        paras = [*paras[:-1], f"{paras[-1]} {todo}"] if paras else [todo]
    return paras


def render(group: Group) -> list[str]:
    """The Markdown lines of one group."""
    out: list[str] = []
    if group.style == "table":
        out += ["| reason | where | comes from | meaning |", "|---|---|---|---|"]
        out += [
            f"| {title(e, ', ')} | {e.seen} | {e.source} | {e.means} |" for e in group.entries
        ]
        return out
    for entry in group.entries:
        if group.style == "list":
            names = ", ".join(f"**{t}**" for t in entry.terms)
            out += wrap(f"{names}: {entry.means}", "- ", "  ")
            continue
        if out:
            out.append("")
        out += ["#" * group.level + " " + title(entry), ""]
        for i, para in enumerate(paragraphs(entry)):
            if i:
                out.append("")
            out += _paragraph(para)
    return out


_BLOCK = re.compile(
    r"^<!-- BEGIN reasons (?P<name>[-a-z]+) [^\n]*-->\n(?P<body>.*?)"
    r"^<!-- END reasons (?P=name) -->$",
    re.DOTALL | re.MULTILINE,
)
_HEADING = re.compile(r"^(#{1,6}) (.*)$")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading (before de-duplication)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def headings(text: str) -> dict[str, str]:
    """Anchor of each heading of ``text`` by its text (the first of equal headings)."""
    lines = text.splitlines()
    out: dict[str, str] = {}
    for number, anchor in _anchors(text).items():
        heading = _HEADING.match(lines[number])
        if heading:
            out.setdefault(heading.group(2), anchor)
    return out


def _anchors(text: str) -> dict[int, str]:
    """Anchor of every heading line of ``text`` (by line number), de-duplicated as GitHub does."""
    seen: dict[str, int] = {}
    out: dict[int, str] = {}
    fenced = False
    for number, line in enumerate(text.splitlines()):
        if line.startswith("```"):
            fenced = not fenced
        heading = _HEADING.match(line)
        if heading and not fenced:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            out[number] = base if count == 0 else f"{base}-{count}"
    return out


def _entry_links(text: str) -> dict[int, tuple[str, str]]:
    """Where each entry is (id of the Entry -> its heading text and anchor) in ``text``.

    A heading entry links to its own heading; a list or table entry to the heading above it.
    """
    anchors = _anchors(text)
    lines = text.splitlines()
    families = {g.name: g for g in groups()}
    out: dict[int, tuple[str, str]] = {}
    above = ("", "")
    block: Iterator[Entry] | None = None
    style = ""
    for number, line in enumerate(lines):
        begin = re.match(r"^<!-- BEGIN reasons ([-a-z]+) ", line)
        if begin and begin.group(1) in families:
            group = families[begin.group(1)]
            block, style = iter(group.entries), group.style
            if style != "heading":
                for entry in group.entries:
                    out[id(entry)] = above
            continue
        if line.startswith("<!-- END reasons "):
            block = None
            continue
        heading = _HEADING.match(line)
        if number in anchors and heading:
            above = (heading.group(2), anchors[number])
            if block is not None and style == "heading":
                current = next(block, None)
                if current is not None:
                    out[id(current)] = above
    return out


def index(text: str) -> list[str]:
    """The table of every value, what it is and where it is explained (links into ``text``)."""
    links = _entry_links(text)
    anchors = headings(text)
    rows: dict[str, tuple[list[str], list[str]]] = {}
    for enum in ENUMS:
        for member in enum:
            kinds, see = rows.setdefault(member.value, ([], []))
            kinds.append(LABELS[enum])
            places = [links.get(id(entry), ("", "")) for entry in entries_of(member)]
            if not places:
                home = f"`{member.value}` reasons"
                home = home if enum is IntentConditionType and home in anchors else HOME[enum]
                places = [(home, anchors.get(home, ""))]
            for heading, anchor in places:
                link = f"[{heading}](#{anchor})"
                if not anchor:
                    raise ValueError(f"{enum.__name__}.{member.name}: no heading {heading!r}")
                if link not in see:
                    see.append(link)
    out = ["| value | what it is | explained in |", "|---|---|---|"]
    for value in sorted(rows, key=str.lower):
        kinds, see = rows[value]
        out.append(f"| `{value}` | {'; '.join(kinds)} | {', '.join(see)} |")
    return out


def _replace(text: str, fill: dict[str, list[str]]) -> str:
    names = [m.group("name") for m in _BLOCK.finditer(text)]
    missing = sorted(set(fill) - set(names))
    unknown = sorted(set(names) - set(fill))
    if missing or unknown or len(names) != len(set(names)):
        raise ValueError(
            f"marked blocks: missing {missing}, unknown {unknown}, found {names}"
        )

    def block(match: re.Match[str]) -> str:
        name = match.group("name")
        head = match.group(0).split("\n", 1)[0]
        return "\n".join([head, "", *fill[name], "", f"<!-- END reasons {name} -->"])

    return _BLOCK.sub(block, text)


def render_doc(text: str) -> str:
    """``text`` (docs/troubleshooting.md) with every marked block generated again."""
    fill = {g.name: render(g) for g in groups()}
    fill[INDEX] = []
    first = _replace(text, fill)
    fill[INDEX] = index(first)
    return _replace(first, fill)


DOC = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"
"""docs/troubleshooting.md of this checkout."""


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the generated blocks of docs/troubleshooting.md (``--check``: only compare)."""
    parser = argparse.ArgumentParser(
        prog="python -m addon_cli.troubleshooting", description=main.__doc__
    )
    parser.add_argument("path", nargs="?", type=Path, default=DOC)
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is not current")
    args = parser.parse_args(argv)
    text = args.path.read_text()
    new = render_doc(text)
    if args.check:
        if new != text:
            print(
                f"{args.path} is out of date: run python -m addon_cli.troubleshooting",
                file=sys.stderr,
            )
            return 1
        return 0
    if new != text:
        args.path.write_text(new)
        print(f"wrote {args.path}")
    return 0
