"""A figure a passing test measures reaches the run's output (tests/fixtures/figures.py): pytest keeps a
passing test's own output to itself, so without this the load test's and the outage drills'
figures would not show in `make test`'s output."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.bare_pytest import run_bare_pytest

SECTION = "figures the tests measured"


def _run(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    return run_bare_pytest(tmp_path, "tests.fixtures.figures", "load", source)


def test_a_passing_tests_figures_are_printed_after_the_run(tmp_path: Path) -> None:
    done = _run(tmp_path, "def test_x(figures):\n    figures('T99: 10 users\\nreads p95 42 ms')\n")
    assert done.returncode == 0, done.stdout
    _, found, after = done.stdout.partition(SECTION)
    assert found, done.stdout
    assert "test_load.py::test_x:\n  T99: 10 users\n  reads p95 42 ms\n" in after, done.stdout


def test_a_run_without_figures_has_no_section(tmp_path: Path) -> None:
    done = _run(tmp_path, "def test_x():\n    print('not a figure')\n")
    assert done.returncode == 0, done.stdout
    assert SECTION not in done.stdout, done.stdout
