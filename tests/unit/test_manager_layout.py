"""The layers inside the manager: the ``manager-layers`` contract of ``.importlinter``.

Each package imports only those below it (shell > engine > kinds > facts, the entry point
``addon_manager.main`` above them); an import that goes up breaks the contract, naming it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.unit.test_layout import contract_names, lint_imports, tree_copy

__all__ = ["tree_copy"]  # the fixture, shared with the floor plan's test

LAYERS = ("addon_manager.shell", "addon_manager.engine", "addon_manager.kinds",
          "addon_manager.facts")


def test_each_layer_is_a_package_that_says_what_it_may_import() -> None:
    import importlib

    for name in LAYERS:
        doc = importlib.import_module(name).__doc__ or ""
        assert "import" in doc, name


@pytest.mark.parametrize(
    ("module", "line"),
    [
        ("addon_manager/facts/planted.py", "from addon_manager.kinds import registry"),
        ("addon_manager/kinds/planted.py", "from addon_manager.engine import plan"),
        ("addon_manager/engine/planted.py", "def f() -> None:\n    import addon_manager.shell"),
        ("addon_manager/shell/planted.py", "from addon_manager import main"),
    ],
)
def test_an_import_up_a_layer_breaks_the_manager_layers(
    tree_copy: Path, tmp_path: Path, module: str, line: str
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(tree_copy, tree)
    (tree / module).write_text(f'"""Planted by the manager layout test."""\n\n{line}\n')
    out = lint_imports(tree)
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"{contract_names()['manager-layers']} BROKEN" in out.stdout, out.stdout
    assert module.removesuffix(".py").replace("/", ".") in out.stdout


def test_the_manager_never_loads_the_generated_core_api() -> None:
    """The kubernetes client's ``CoreV1Api`` costs a manager start about 0.7 CPU-seconds to
    import; the manager's core-group requests go through ``addon_manager.shell.corev1``."""
    root = Path(__file__).resolve().parents[2] / "addon_manager"
    naming = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                    if "CoreV1Api" in p.read_text() and p.name != "corev1.py")
    assert naming == []
