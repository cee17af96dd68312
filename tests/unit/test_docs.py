"""docs/troubleshooting.md is generated from the troubleshooting data, and the code sets only
the values of the enums.

Every phase and reason is a member of an enum in :mod:`addon_api.reasons`; what each means is
data in :mod:`addon_cli.troubleshooting` (one YAML file per family), from which ``python -m
addon_cli.troubleshooting`` writes the doc's entries. So:

* the doc must be what the generator makes of the data (edit an entry, regenerate);
* every enum member a reader can meet has an entry;
* every reason/phase *string literal* the code still sets or compares must be a value of an
  enum, so a new literal reason without a member fails here. Neither the agent nor the manager
  sets or compares any (both use the enums); a Kubernetes Event's reason (``kopf.event`` and
  friends) is not a status reason and is not checked.

The literals are extracted from the code with :mod:`ast`. What counts as "setting a reason" is
the set of patterns the code uses:

* keywords ``reason=``, ``phase=``, ``error_reason=`` with a literal (also inside ``x if c else
  y`` and ``a or b``);
* dict entries ``"reason": ...`` / ``"phase": ...``;
* positional arguments of the condition/status builders (``add``, ``condition``,
  ``simple_status``), of ``DeliveryError`` and of ``Unreadable``;
* tuple assignments to ``phase, reason[, message]``, and assignments to ``invalid`` (a
  plan's ``(reason, message)`` when it refuses an intent);
* dataclass defaults ``error_reason: str = "..."``;
* module constants ``REASON``, ``WAITING_FOR_*``, ``CONDITION_*``, ``FAILED_*`` and
  ``REASON_*`` (tuples of reasons);
* returned ``("Reason", message)`` tuples (per-cluster problems of a render), also flat
  (``return "Reason", message``);
* comparisons of a phase or reason (``x.phase``, ``x.reason``, ``work.value("phase")``, a name
  ``phase``/``reason``) with a literal or a tuple of literals (``==``, ``!=``, ``in``).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from addon_api import common, reasons
from addon_cli import troubleshooting
from addon_cli.troubleshooting import doc

ROOT = Path(__file__).resolve().parents[2]
AGENT_SOURCES = sorted([*ROOT.glob("addon_agent/*.py"), ROOT / "addon_api" / "sealing.py",
                        ROOT / "addon_api" / "tenancy.py"])
MANAGER_SOURCES = sorted(ROOT.glob("addon_manager/*.py"))
SOURCES = sorted([*MANAGER_SOURCES, *AGENT_SOURCES])
TROUBLESHOOTING = ROOT / "docs" / "troubleshooting.md"

KEYWORDS = {"reason", "phase", "error_reason", "final_phase", "problem"}
DICT_KEYS = {"reason", "phase"}
# function name -> positions of reason/phase arguments
POSITIONAL = {
    "add": (2,),  # add(ctype, ok, reason, message) in status.aggregate
    "condition": (2,),  # addon_api.conditions.condition(ctype, ok, reason, message, ...)
    "simple_status": (0, 1),  # simple_status(phase, reason, message, ...)
    "DeliveryError": (0,),  # DeliveryError(reason, message)
    "Unreadable": (0,),  # addon_manager.shell.execute.Unreadable(reason, message)
}
TARGET_NAMES = {"phase", "reason"}
COMPARED = {"phase", "reason", "error_reason", "spoke_phase"}
"""Names and attributes whose comparisons with a literal are checked."""
EVENT_CALLS = {"event", "info", "warn", "exception"}
"""kopf's Event functions (``kopf.event(..., reason=...)``): Event reasons are not checked."""
CONSTANT_PREFIXES = ("WAITING_FOR_", "CONDITION_", "FAILED_", "REASON_")
CAMEL = re.compile(r"^[A-Z][A-Za-z]+$")


def _literals(node: ast.AST | None) -> Iterator[str]:
    """String literals a value expression can evaluate to."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.IfExp):
        yield from _literals(node.body)
        yield from _literals(node.orelse)
    elif isinstance(node, ast.BoolOp):
        for value in node.values:
            yield from _literals(value)
    elif isinstance(node, (ast.Tuple, ast.List)):
        for elt in node.elts:
            yield from _literals(elt)


def _func_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _target_names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Attribute):
        return [target.attr]
    if isinstance(target, ast.Tuple):
        return [e.id if isinstance(e, ast.Name) else "" for e in target.elts]
    return []


def _is_phase_or_reason(node: ast.AST) -> bool:
    """Whether ``node`` reads a phase or a reason (see :data:`COMPARED`)."""
    if isinstance(node, ast.Name):
        return node.id in COMPARED
    if isinstance(node, ast.Attribute):
        return node.attr in COMPARED
    return (
        isinstance(node, ast.Call)
        and _func_name(node) == "value"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value in COMPARED
    )


def _event_keywords(tree: ast.AST) -> set[int]:
    """Ids of the keywords of ``kopf.event``/``info``/``warn``/``exception`` calls."""
    return {
        id(kw)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "kopf"
        and node.func.attr in EVENT_CALLS
        for kw in node.keywords
    }


def reasons_in(tree: ast.AST) -> set[str]:
    """Every reason/phase string literal the module sets or compares."""
    found: set[str] = set()
    events = _event_keywords(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in KEYWORDS and id(node) not in events:
            found.update(_literals(node.value))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value in DICT_KEYS:
                    found.update(_literals(value))
        elif isinstance(node, ast.Call) and _func_name(node) in POSITIONAL:
            for pos in POSITIONAL[_func_name(node)]:
                if pos < len(node.args):
                    found.update(_literals(node.args[pos]))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names = _target_names(target)
                if len(names) > 1 and isinstance(node.value, ast.Tuple):
                    for tname, value in zip(names, node.value.elts, strict=False):
                        if tname in TARGET_NAMES:
                            found.update(_literals(value))
                elif len(names) == 1 and (
                    names[0] in ("REASON", "invalid") or names[0].startswith(CONSTANT_PREFIXES)
                ):
                    found.update(_literals(node.value))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if node.target.id in KEYWORDS or node.target.id.startswith(CONSTANT_PREFIXES):
                found.update(_literals(node.value))
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_is_phase_or_reason(x) for x in operands):
                for x in operands:
                    found.update(_literals(x))
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
            first = node.value.elts[0] if node.value.elts else None
            if (
                len(node.value.elts) == 2
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
            ):
                found.add(first.value)
            for elt in node.value.elts:
                if (
                    isinstance(elt, ast.Tuple)
                    and len(elt.elts) == 2
                    and isinstance(elt.elts[0], ast.Constant)
                    and isinstance(elt.elts[0].value, str)
                ):
                    found.add(elt.elts[0].value)
    return {r for r in found if CAMEL.match(r)}


def code_reasons(sources: list[Path] = SOURCES) -> dict[str, set[str]]:
    """Reason and phase literals set in ``sources`` (default: manager and agent), by file."""
    out: dict[str, set[str]] = {}
    for path in sources:
        found = reasons_in(ast.parse(path.read_text(), filename=str(path)))
        if found:
            out[str(path.relative_to(ROOT))] = found
    return out


def test_extraction_sees_each_pattern() -> None:
    src = """
def f(err, ok):
    x = Status(reason="KwReason", phase="A" if ok else "KwPhase")
    y = {"reason": "DictReason", "phase": err or "DictPhase"}
    add("Ready", ok, "AddReason", "m")
    simple_status("SimplePhase", "SimpleReason", "m", 1)
    phase, reason = "TuplePhase", "TupleReason"
    raise DeliveryError("RaisedReason", "m")
WAITING_FOR_X = "ConstReason"
class C:
    error_reason: str = "DefaultReason"
def g():
    return None, [], ("ReturnedReason", f"x {g}")
def h(work, x, out):
    out.invalid = ("InvalidReason", "m")
    if work.value("phase") == "ComparedPhase" or x.reason in ("InReason", "InOtherReason"):
        return "FlatReason", "m"
    kopf.event(x, type="Warning", reason="EventReason", message="m")
    return Unreadable("UnreadableReason", "m")
"""
    got = reasons_in(ast.parse(src))
    assert got >= {
        "KwReason",
        "KwPhase",
        "DictReason",
        "DictPhase",
        "AddReason",
        "SimplePhase",
        "SimpleReason",
        "TuplePhase",
        "TupleReason",
        "RaisedReason",
        "ConstReason",
        "DefaultReason",
        "ReturnedReason",
        "ComparedPhase",
        "InReason",
        "InOtherReason",
        "FlatReason",
        "UnreadableReason",
        "InvalidReason",
    }
    assert "EventReason" not in got


def test_troubleshooting_is_what_the_data_generates() -> None:
    text = TROUBLESHOOTING.read_text()
    assert doc.render_doc(text) == text, (
        "docs/troubleshooting.md is out of date with addon_cli/troubleshooting/*.yaml: "
        "run python -m addon_cli.troubleshooting"
    )


def test_every_reason_the_code_sets_is_an_enum_value() -> None:
    values = reasons.values()
    unknown = {
        path: sorted(found - values)
        for path, found in code_reasons().items()
        if found - values
    }
    assert not unknown, (
        f"reasons/phases set as literals that no enum of addon_api/reasons.py has: {unknown}; "
        "add a member (with its entry in addon_cli/troubleshooting/) and use it"
    )


def test_the_agent_sets_phases_and_reasons_only_through_the_enums() -> None:
    assert code_reasons(AGENT_SOURCES) == {}


def test_the_manager_sets_and_compares_phases_and_reasons_only_through_the_enums() -> None:
    assert code_reasons(MANAGER_SOURCES) == {}


def test_a_new_literal_reason_fails() -> None:
    got = reasons_in(ast.parse('x = Status(reason="NoSuchReasonAnywhere", phase=P.AVAILABLE)'))
    assert got == {"NoSuchReasonAnywhere"} and not got <= reasons.values()


@pytest.mark.parametrize("enum", troubleshooting.DOCUMENTED, ids=lambda e: e.__name__)
def test_every_member_has_an_entry(enum: type[reasons.StrEnum]) -> None:
    missing = [m.name for m in enum if not troubleshooting.entries_of(m)]
    assert not missing, (
        f"{enum.__name__} members without an entry in addon_cli/troubleshooting/*.yaml: {missing}"
    )


def test_every_value_is_in_the_index_and_every_entry_in_the_doc() -> None:
    text = TROUBLESHOOTING.read_text()
    for value in reasons.values():
        assert f"| `{value}` |" in text, value
    titles = {
        doc.title(e) for g in troubleshooting.groups() if g.style == "heading" for e in g.entries
    }
    headings = set(doc.headings(text))
    assert titles <= headings, sorted(titles - headings)


def test_generator_rejects_missing_or_unknown_blocks() -> None:
    text = TROUBLESHOOTING.read_text()
    with pytest.raises(ValueError, match="missing"):
        doc.render_doc(text.replace("BEGIN reasons sealed ", "BEGIN reasons sealed-x "))


def test_generated_markdown_never_starts_a_line_with_block_syntax() -> None:
    lines = doc.wrap("a " * 45 + "- b " + "c " * 60 + "# d " + "e " * 60)
    assert all(len(line) <= doc.WIDTH + 2 for line in lines)
    assert not any(re.match(r"^([-+*>#|=]+|\d+[.)]) ", line) for line in lines)


def test_phase_enums_are_the_crd_and_model_enums() -> None:
    for plural, enum in (
        ("servingplatforms", reasons.ServingPlatformPhase),
        ("sealedstorageconnections", reasons.SealedPhase),
    ):
        crd = yaml.safe_load((ROOT / "crds" / f"{plural}.modelserving.opendatahub.io.yaml")
                             .read_text())
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert schema["properties"]["status"]["properties"]["phase"]["enum"] == [
            m.value for m in enum
        ]
    assert list(typing.get_args(common.IntentPhase)) == [m.value for m in reasons.IntentPhase]


def test_cli_check_reports_a_stale_doc(tmp_path: Path) -> None:
    path = tmp_path / "troubleshooting.md"
    path.write_text(TROUBLESHOOTING.read_text().replace("#### `Resolved`", "#### `Resolvd`"))
    assert doc.main([str(path), "--check"]) == 1
    assert doc.main([str(path)]) == 0
    assert doc.main([str(path), "--check"]) == 0
    assert path.read_text() == TROUBLESHOOTING.read_text()


def test_every_family_file_is_listed_and_every_listed_family_has_a_file() -> None:
    folder = ROOT / "addon_cli" / "troubleshooting"
    assert sorted(p.stem for p in folder.glob("*.yaml")) == sorted(troubleshooting.FAMILIES)
    assert [g.name for g in troubleshooting.groups()] == list(troubleshooting.FAMILIES)


def test_the_loader_joins_wrapped_lines_and_keeps_paragraphs_and_list_items() -> None:
    text = "one\ntwo\n\n- a\n  b\n- c\n\nlast\n"
    assert troubleshooting.unwrap(text) == "one two\n\n- a b\n- c\n\nlast"
    group = troubleshooting.parse("x", (
        "style: list\nentries:\n"
        "  - terms: [IntentReason.Removing, ServingPlatformReason.Removing]\n"
        "    means: |-\n      wrapped\n      text\n"
    ))
    (entry,) = group.entries
    assert entry.terms == (reasons.IntentReason.REMOVING, reasons.ServingPlatformReason.REMOVING)
    assert entry.terms[0] is not entry.terms[1]
    assert (group.style, group.level, entry.means) == ("list", 3, "wrapped text")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("entries:\n  - terms: [IntentReason.NoSuchValue]\n", "no member of an enum"),
        ("entries:\n  - terms: [IntentReason.REMOVING]\n", "write EnumName.Value"),
        ("entries:\n  - terms: []\n    meaning: typo\n", "meaning"),
        ("style: box\nentries: []\n", "style"),
    ],
    ids=["unknown-value", "member-name", "unknown-key", "unknown-style"],
)
def test_the_loader_rejects_unknown_terms_keys_and_styles(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        troubleshooting.parse("x", text)


def test_the_controllers_load_no_prose() -> None:
    # The manager and agent import the enums only; the prose and its YAML stay unloaded.
    code = (
        "import sys, addon_manager.main, addon_agent.main, addon_api.reasons;"
        "print(sorted(m for m in sys.modules if m.startswith('addon_cli')))"
    )
    found = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout
    assert found.strip() == "[]"
    assert not hasattr(reasons, "Entry") and not hasattr(reasons, "GROUPS")
