"""Who may import whom: the product imports no harness, and the test-support library
(``testbed``, with ``testbed.support``) and ``bench/`` never import ``tests/``.

``tests/`` and ``bench/`` share their helpers through ``testbed.support``; a helper that
``bench/`` needs moves there instead of being imported from ``tests/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("model_serving_addon", "addon_api", "addon_manager", "addon_agent", "addon_cli")
HARNESS = ("testbed", "tests", "bench")


def imported_packages(path: Path) -> set[str]:
    """Top-level packages a module imports (absolute imports only)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [*((p, HARNESS) for p in PRODUCT), ("testbed", ("tests",)), ("bench", ("tests",)),
     # Manager and agent share only addon_api; the fleet command line may use the manager's
     # rendering, and nothing of the product uses the command line.
     ("addon_api", ("model_serving_addon", "addon_manager", "addon_agent", "addon_cli")),
     ("addon_manager", ("addon_agent", "addon_cli")),
     ("addon_agent", ("addon_manager", "addon_cli"))],
)
def test_imports_go_one_way(folder: str, forbidden: tuple[str, ...]) -> None:
    wrong = {
        str(path.relative_to(ROOT)): sorted(imported_packages(path) & set(forbidden))
        for path in sorted((ROOT / folder).rglob("*.py"))
    }
    assert not {k: v for k, v in wrong.items() if v}


def test_support_modules_live_in_the_library() -> None:
    assert not sorted(p.relative_to(ROOT) for p in (ROOT / "tests").rglob("*_support.py"))
    assert not (ROOT / "tests" / "helpers.py").exists()
