"""docs/troubleshooting.md explains every reason and phase the manager and the agent can set.

The reasons are extracted from the code with :mod:`ast` (not a hand-kept list), so a reason
added to ``addon_manager`` or ``addon_agent`` without a troubleshooting entry fails here.
What counts as "setting a reason" is the set of patterns the code uses:

* keywords ``reason=``, ``phase=``, ``error_reason=`` with a literal (also inside ``x if c else
  y`` and ``a or b``);
* dict entries ``"reason": ...`` / ``"phase": ...``;
* positional arguments of the condition/status builders (``add``, ``condition``,
  ``simple_status``) and of ``DeliveryError``;
* tuple assignments to ``phase, reason[, message]``;
* dataclass defaults ``error_reason: str = "..."``;
* module constants ``WAITING_FOR_*``, ``CONDITION_*`` and ``FAILED_*`` (tuples of reasons);
* returned ``("Reason", message)`` tuples (per-cluster problems of a render).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.glob("addon_manager/*.py"), *ROOT.glob("addon_agent/*.py"),
                  ROOT / "addon_api" / "sealing.py"])
TROUBLESHOOTING = ROOT / "docs" / "troubleshooting.md"

KEYWORDS = {"reason", "phase", "error_reason", "final_phase", "problem"}
DICT_KEYS = {"reason", "phase"}
# function name -> positions of reason/phase arguments
POSITIONAL = {
    "add": (2,),  # add(ctype, ok, reason, message) in status.aggregate
    "condition": (2,),  # addon_api.conditions.condition(ctype, ok, reason, message, ...)
    "simple_status": (0, 1),  # simple_status(phase, reason, message, ...)
    "DeliveryError": (0,),  # DeliveryError(reason, message)
}
TARGET_NAMES = {"phase", "reason"}
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
    if isinstance(target, ast.Tuple):
        return [e.id if isinstance(e, ast.Name) else "" for e in target.elts]
    return []


def reasons_in(tree: ast.AST) -> set[str]:
    """Every reason/phase string literal the module sets."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in KEYWORDS:
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
                elif len(names) == 1 and names[0].startswith(CONSTANT_PREFIXES):
                    found.update(_literals(node.value))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if node.target.id in KEYWORDS or node.target.id.startswith(CONSTANT_PREFIXES):
                found.update(_literals(node.value))
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
            for elt in node.value.elts:
                if (
                    isinstance(elt, ast.Tuple)
                    and len(elt.elts) == 2
                    and isinstance(elt.elts[0], ast.Constant)
                    and isinstance(elt.elts[0].value, str)
                ):
                    found.add(elt.elts[0].value)
    return {r for r in found if CAMEL.match(r)}


def code_reasons() -> set[str]:
    """Reasons and phases set anywhere in addon_manager/ and addon_agent/."""
    out: set[str] = set()
    for path in SOURCES:
        out |= reasons_in(ast.parse(path.read_text(), filename=str(path)))
    return out


def documented_terms(markdown: str) -> set[str]:
    """Words used as a heading, or in bold (``**Word**`` or ``**`Word`**``)."""
    terms: set[str] = set()
    for line in markdown.splitlines():
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        if heading:
            terms.update(re.findall(r"[A-Za-z]+", heading.group(1)))
    for bold in re.findall(r"\*\*(.+?)\*\*", markdown):
        terms.update(re.findall(r"[A-Za-z]+", bold))
    return terms


def test_extraction_finds_the_reasons() -> None:
    reasons = code_reasons()
    known = {
        # manager: placement, per-cluster problems, gates, intent conditions
        "PlacementNotFound",
        "NoClustersSelected",
        "Conflict",
        "ForeignWork",
        "RenderFailed",
        "SecretNotFound",
        "ApplyFailed",
        "InvalidSpec",
        "WaitingForPlatform",
        "WaitingForStorage",
        "WaitingForAgentKey",
        "DeletionBlocked",
        "WorksRemain",
        "BlockedByFailedLoad",
        "NotApplied",
        "WorkDeleting",
        "IntentsOnCluster",
        "PlatformRemoving",
        "Deleting",
        # agent: ServingPlatform and SealedStorageConnection
        "RemovalBlocked",
        "ForeignObjectsPresent",
        "ForeignObjectConflict",
        "WaitingForInferenceServices",
        "RemovedWithLeftovers",
        "NamespaceTerminating",
        "BundleError",
        "AnotherPlatformOwns",
        "ComponentsUnavailable",
        "ReplicasWarning",
        "AllComponentsAvailable",
        "KeyMismatch",
        "DecryptFailed",
        "EntryConflict",
        "NamespaceMissing",
        "Delivered",
    }
    assert known <= reasons, f"extraction missed {sorted(known - reasons)}"
    assert len(reasons) >= 45, sorted(reasons)


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
    }


def test_documented_terms_are_headings_or_bold_only() -> None:
    terms = documented_terms("# Top\n### `Foo` / `BarBaz`\ntext Qux\n**Zed** and **`Yak`**\n")
    assert {"Foo", "BarBaz", "Zed", "Yak"} <= terms
    assert "Qux" not in terms


def test_every_reason_is_in_troubleshooting() -> None:
    documented = documented_terms(TROUBLESHOOTING.read_text())
    missing = sorted(code_reasons() - documented)
    assert not missing, (
        f"docs/troubleshooting.md has no heading or bold entry for: {', '.join(missing)}"
    )
