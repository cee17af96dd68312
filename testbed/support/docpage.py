r"""A documentation page's commands and YAML, in page order, for the docs tests. Pure.

A docs test runs what a reader would type: each ```sh block's commands (a ``\`` at the end
of a line continues it; ``#`` starts a comment outside quotes) and each ```yaml block's
objects, under the heading they appear in. Variables the page's reader has set (``$HUB``,
``${HUB}``) are expanded as a shell would: inside double quotes one word, bare split at spaces.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

import yaml

FENCE = re.compile(r"^```(\w*)\s*$")
VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


@dataclass(frozen=True)
class Step:
    """A command (``argv``) or the objects of a YAML block (``objects``), and where."""

    heading: str
    line: int
    text: str
    argv: tuple[str, ...] = ()
    objects: tuple[dict[str, Any], ...] = ()


def steps(markdown: str, env: dict[str, str] | None = None) -> list[Step]:
    """Every command and YAML block of ``markdown``, in order.

    ``env``: the variables the reader has set, expanded in the commands (others are left as
    written). Raises ValueError naming the line of a command shlex cannot split or a block
    left open.
    """
    out: list[Step] = []
    heading = ""
    block: list[str] | None = None
    language, start = "", 0
    for number, line in enumerate(markdown.splitlines(), 1):
        fence = FENCE.match(line)
        if block is None:
            if fence:
                block, language, start = [], fence.group(1), number
            elif line.startswith("#"):
                heading = line.lstrip("#").strip()
            continue
        if not fence:
            block.append(line)
            continue
        if language == "sh":
            out += _commands(heading, start, block, env or {})
        elif language == "yaml":
            text = "\n".join(block)
            objects = tuple(o for o in yaml.safe_load_all(text) if o)
            out.append(Step(heading, start + 1, text, objects=objects))
        block = None
    if block is not None:
        raise ValueError(f"line {start}: a ``` block is never closed")
    return out


def expand(command: str, env: dict[str, str]) -> str:
    """``command`` with the variables of ``env`` replaced by their values.

    Before the command is split into words, as a shell does: quoted, a value stays one word.
    """
    return VARIABLE.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), command)


def _commands(heading: str, start: int, lines: list[str], env: dict[str, str]) -> list[Step]:
    out: list[Step] = []
    pending, first = "", 0
    for offset, line in enumerate(lines, 1):
        if not pending:
            first = start + offset
        pending += line
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        try:
            argv = shlex.split(expand(pending, env), comments=True)
        except ValueError as err:
            raise ValueError(f"line {first}: {err}: {pending!r}") from None
        if argv:
            out.append(Step(heading, first, " ".join(pending.split()), argv=tuple(argv)))
        pending = ""
    return out
