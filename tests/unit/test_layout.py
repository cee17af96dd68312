"""Who may import whom: the contracts in ``.importlinter``, run by import-linter.

``make lint`` runs them on the tree; here they run on the tree too (so ``make unit`` enforces
them), and on a copy with one planted import per contract, which must fail naming that
contract. What import-linter cannot express stays below as file checks: every Python file is
in a package the contracts analyse, and test-support modules live in ``testbed.support``
(``tests/`` and ``bench/`` share their helpers there; a helper that ``bench/`` needs moves
there instead of being imported from ``tests/``).
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
FLOOR_PLAN = ("layers", "roles-apart", "cli-without-agent", "product-without-harness",
              "harness-without-tests")
"""The contracts between top-level packages (ids in ``.importlinter``)."""


def root_packages() -> list[str]:
    """The top-level packages ``.importlinter`` analyses."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    return config["importlinter"]["root_packages"].split()


def contract_names() -> dict[str, str]:
    """Each contract's id (``[importlinter:contract:ID]``) and its name."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    prefix = "importlinter:contract:"
    return {s.removeprefix(prefix): config[s]["name"] for s in config.sections()
            if s.startswith(prefix)}


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` run in ``tree`` on its ``.importlinter`` (it imports from its cwd)."""
    assert LINT_IMPORTS.exists(), "import-linter is missing: pip install -e '.[dev]'"
    env = {**os.environ, "COLUMNS": "400", "PYTHONPATH": str(tree)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_tree_keeps_every_import_contract() -> None:
    out = lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    for name in contract_names().values():
        assert f"{name} KEPT" in out.stdout, name


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The analysed packages and ``.importlinter``, copied (each test plants in its own copy)."""
    into = tmp_path_factory.mktemp("layout")
    for package in root_packages():
        shutil.copytree(ROOT / package, into / package,  # the console's npm tree: no Python
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules",
                                                      "static"))
    shutil.copy2(ROOT / ".importlinter", into / ".importlinter")
    return into


def test_the_unplanted_copy_passes(tree_copy: Path) -> None:
    out = lint_imports(tree_copy)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    # Whole packages (and the entry, whose modules are fixed): robust to moves inside them.
    [
        ("addon_agent/planted.py", "import addon_manager", {"layers", "roles-apart"}),
        ("addon_manager/planted.py", "from addon_agent import main", {"layers", "roles-apart"}),
        ("addon_api/planted.py", "import addon_cli", {"layers"}),
        # inside a function, and indirect: the entry imports the agent
        ("addon_manager/planted.py", "def f() -> None:\n    import model_serving_addon.cli",
         {"layers", "roles-apart"}),
        ("addon_cli/planted.py", "import addon_agent", {"cli-without-agent"}),
        ("addon_cli/planted.py", "from testbed import support",
         {"product-without-harness"}),
        ("model_serving_addon/planted.py", "import bench", {"product-without-harness"}),
        ("bench/planted.py", "import tests", {"harness-without-tests"}),
        ("testbed/support/planted.py", "import tests.unit", {"harness-without-tests"}),
    ],
)
def test_a_planted_import_breaks_its_contract(
    tree_copy: Path, tmp_path: Path, module: str, line: str, broken: set[str]
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(tree_copy, tree)
    (tree / module).write_text(f'"""Planted by the layout test."""\n\n{line}\n')
    out = lint_imports(tree)
    assert out.returncode == 1, out.stdout + out.stderr
    names = contract_names()
    # Only the floor plan's contracts: those appended for the layers inside a role may well
    # object to a module that is in none of their layers.
    for contract in FLOOR_PLAN:
        verdict = "BROKEN" if contract in broken else "KEPT"
        assert f"{names[contract]} {verdict}" in out.stdout, (contract, out.stdout)
    planted = module.removesuffix(".py").replace("/", ".")
    assert planted in out.stdout


def test_every_python_file_is_in_a_package_the_contracts_analyse() -> None:
    outside = [
        path.relative_to(ROOT)
        for package in root_packages()
        for path in (ROOT / package).rglob("*.py")
        # node_modules: npm's packages of a page (some carry a Python file), not our code
        if "__pycache__" not in path.parts and "node_modules" not in path.parts
        and any(not (folder / "__init__.py").exists()
                for folder in path.parents if folder.is_relative_to(ROOT / package))
    ]
    assert not outside, "add an __init__.py so import-linter sees these files"


def test_support_modules_live_in_the_library() -> None:
    assert not sorted(p.relative_to(ROOT) for p in (ROOT / "tests").rglob("*_support.py"))
    assert not (ROOT / "tests" / "helpers.py").exists()
