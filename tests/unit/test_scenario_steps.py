"""Scenario steps (tests/conftest.py): a step that ``needs`` an earlier one fails at once,
naming it, when that step did not pass; a step without the marker still runs."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
CONFTEST = ROOT / "tests" / "conftest.py"
INI = """
[pytest]
markers =
    testbed: harness
    needs(*steps): earlier steps
"""


@pytest.fixture
def steps(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytest run (in a subprocess) with this project's tests/conftest.py."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the conftest imports testbed
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makeini(INI)
    return pytester


def test_a_failed_step_fails_the_steps_that_need_it_and_no_other(steps: pytest.Pytester) -> None:
    steps.makepyfile(
        """
        import pytest

        class TestScenario:
            def test_1_setup(self):
                pass

            @pytest.mark.needs("test_1_setup")
            def test_2_breaks(self):
                assert False, "broken"

            @pytest.mark.needs("test_2_breaks")
            def test_3_builds_on_2(self):
                raise RuntimeError("must not run")

            @pytest.mark.needs("test_1_setup")
            def test_4_independent_of_2(self):
                pass

            @pytest.mark.parametrize("n", [1, 2])
            def test_5_rounds(self, n):
                assert n == 1

            @pytest.mark.needs("test_5_rounds")
            def test_6_after_rounds(self):
                raise RuntimeError("must not run")

            def test_7_no_needs(self):
                pass
        """
    )
    result = steps.runpytest("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=4)
    for step, needed in (("test_3_builds_on_2", "test_2_breaks"),
                         ("test_6_after_rounds", "test_5_rounds")):
        result.stdout.fnmatch_lines(
            [f"_* TestScenario.{step} _*", f"not run: needs step {needed}, which failed"],
            consecutive=True,
        )
    result.stdout.no_fnmatch_line("*must not run*")


def test_a_step_run_alone_says_what_did_not_run(steps: pytest.Pytester) -> None:
    steps.makepyfile(
        """
        import pytest

        class TestScenario:
            def test_1_setup(self):
                pass

            @pytest.mark.needs("test_1_setup")
            def test_2_next(self):
                pass
        """
    )
    result = steps.runpytest("-q", "-p", "no:cacheprovider", "-k", "test_2")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["not run: needs step test_1_setup, which did not run"])


@pytest.mark.parametrize("needed", ["test_2_later", "test_9_missing"])
def test_needs_must_name_an_earlier_step(steps: pytest.Pytester, needed: str) -> None:
    steps.makepyfile(
        f"""
        import pytest

        class TestScenario:
            @pytest.mark.needs({needed!r})
            def test_1_first(self):
                pass

            def test_2_later(self):
                pass
        """
    )
    result = steps.runpytest("-q", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*needs({needed!r}) must name an earlier step*"])
