"""The per-test CPU report's summary (bench/cpu_per_test.py)."""

from __future__ import annotations

import json

from bench.cpu_per_test import Cost, by_module, read, render


def test_costs_are_summed_per_module_costliest_first() -> None:
    lines = [json.dumps({"test": t, "cpu": c, "wall": w}) for t, c, w in (
        ("tests/a.py::test_1", 2.0, 1.0), ("tests/b.py::test_1", 5.0, 3.0),
        ("tests/a.py::test_2@g", 4.5, 2.0))] + [""]
    costs = read(lines)
    assert costs[0] == Cost("tests/a.py::test_1", 2.0, 1.0)
    assert by_module(costs) == [("tests/a.py", 6.5, 3.0), ("tests/b.py", 5.0, 3.0)]
    report = render(costs, top=2).splitlines()
    assert report[0] == "3 tests, 11.5 CPU-seconds, 6.0 s"
    assert report[3:5] == ["     5.0     3.0  tests/b.py::test_1",
                           "     4.5     2.0  tests/a.py::test_2@g"]
