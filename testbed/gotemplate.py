"""A strict subset of Go's text/template, enough for OCM's operator manifests.

OCM's cluster-manager and klusterlet operators render the RBAC manifests under
``manifests/`` of the ``open-cluster-management.io/ocm`` module with Go's text/template.
The testbed renders the same files from the Go module cache instead of copying them.
Supported: ``{{ .Field }}`` (and ``{{.A.B}}``), ``{{ if COND }}`` / ``{{ else }}`` /
``{{ end }}`` where COND is one of the conditions the caller decides, and ``{{ range ... }}``
over a range the caller declares empty. Anything else raises :class:`TemplateError`, so
an upstream change that this subset cannot render fails loudly instead of rendering wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_ACTION = re.compile(r"{{-?\s*(.*?)\s*-?}}", re.S)


class TemplateError(ValueError):
    """The template uses something outside the supported subset."""


def render(text: str, values: Mapping[str, str], conditions: Mapping[str, bool]) -> str:
    """Render ``text``: fields from ``values``, ``if`` conditions from ``conditions``.

    ``range`` blocks render nothing (the caller passes no labels, as the testbed's
    operators have none). Whitespace handling follows Go without trim markers.
    """
    out: list[str] = []
    # Stack of "is this block emitting?" flags; the bottom one is the whole document.
    stack: list[tuple[str, bool, bool]] = [("root", True, True)]
    pos = 0
    for match in _ACTION.finditer(text):
        emitting = all(frame[1] for frame in stack)
        if emitting:
            out.append(text[pos : match.start()])
        pos = match.end()
        action = match.group(1)
        word = action.split(maxsplit=1)[0] if action else ""
        if word == "if":
            cond = action[2:].strip()
            if cond not in conditions:
                raise TemplateError(f"unknown condition {cond!r}: add it to the caller's table")
            stack.append(("if", conditions[cond], conditions[cond]))
        elif word == "range":
            stack.append(("range", False, False))
        elif word == "else":
            kind, _, taken = stack.pop()
            if kind != "if":
                raise TemplateError("{{ else }} outside {{ if }}")
            stack.append(("else", not taken, taken))
        elif word == "end":
            if len(stack) == 1:
                raise TemplateError("{{ end }} without a block")
            stack.pop()
        elif action.startswith("."):
            if emitting:
                if action not in values:
                    raise TemplateError(f"no value for {action}")
                out.append(values[action])
        elif action.startswith("$"):
            if emitting:
                raise TemplateError(f"variable {action} outside a range")
        else:
            raise TemplateError(f"unsupported action {{{{ {action} }}}}")
    if len(stack) != 1:
        raise TemplateError("unclosed block")
    out.append(text[pos:])
    return "".join(out)
