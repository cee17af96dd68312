"""Read the Containerfile the way a builder does: stages, their COPY lines, what they ship.

Shared by the unit tests of the image (what it promises) and the integration test that runs
the agent's bundle path with only the executables the runtime stage installs.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "Containerfile"
BIN_DIRS = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin")
"""Directories on the runtime base's default PATH."""


@dataclasses.dataclass(frozen=True)
class Copy:
    """One COPY instruction: ``from_stage`` is "" for the build context."""

    from_stage: str
    sources: tuple[str, ...]
    dest: str


@dataclasses.dataclass(frozen=True)
class Stage:
    """One ``FROM`` stage and its instructions (continuation lines joined)."""

    base: str
    name: str
    instructions: tuple[str, ...]

    def copies(self) -> list[Copy]:
        """The stage's COPY instructions."""
        found = []
        for line in self.instructions:
            words = shlex.split(line)
            if words[0].upper() != "COPY":
                continue
            flags = [w for w in words[1:] if w.startswith("--")]
            paths = [w for w in words[1:] if not w.startswith("--")]
            source = next((f.split("=", 1)[1] for f in flags if f.startswith("--from=")), "")
            found.append(Copy(source, tuple(paths[:-1]), paths[-1]))
        return found

    def runs(self) -> list[str]:
        """The stage's RUN commands."""
        return [i.split(None, 1)[1] for i in self.instructions if i.upper().startswith("RUN ")]


def instructions(text: str) -> list[str]:
    """Instructions of a Containerfile, comments dropped and continuations joined."""
    joined = re.sub(r"\\\n", " ", "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith("#")
    ))
    return [" ".join(line.split()) for line in joined.splitlines() if line.strip()]


def build_args(text: str) -> dict[str, str]:
    """Defaults of the ARGs declared before the first FROM (usable in FROM lines)."""
    found: dict[str, str] = {}
    for line in instructions(text):
        keyword, _, rest = line.partition(" ")
        if keyword.upper() == "FROM":
            break
        if keyword.upper() == "ARG":
            name, _, default = rest.partition("=")
            found[name] = default
    return found


def stages(text: str, args: dict[str, str] | None = None) -> list[Stage]:
    """The Containerfile's stages in order (the last one is the image).

    Bases are resolved against ``args`` over the ARG defaults.
    """
    values = {**build_args(text), **(args or {})}
    found: list[Stage] = []
    base, name = "", ""
    body: list[str] = []
    for line in instructions(text):
        words = line.split()
        if words[0].upper() == "FROM":
            if base:
                found.append(Stage(base, name, tuple(body)))
            base = re.sub(r"\$\{(\w+)\}|\$(\w+)",
                          lambda m: values[m.group(1) or m.group(2)], words[1])
            name, body = words[3] if len(words) > 3 else "", []
        elif base:
            body.append(line)
    if base:
        found.append(Stage(base, name, tuple(body)))
    return found


def runtime_executables(text: str) -> dict[str, str]:
    """Executables the runtime stage copies onto PATH from earlier stages: name -> path."""
    runtime = stages(text)[-1]
    found: dict[str, str] = {}
    for copy in runtime.copies():
        if copy.from_stage and copy.dest.rsplit("/", 1)[0] in BIN_DIRS:
            found[copy.dest.rsplit("/", 1)[1]] = copy.dest
    return found
