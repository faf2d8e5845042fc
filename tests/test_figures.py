"""A figure a passing test measures reaches the run's output (tests/fixtures/figures.py): pytest keeps a
passing test's own output to itself, and T12's and T08's figures were lost from `make test` so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SECTION = "figures the tests measured"


def _run(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_load.py").write_text(source)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = ["-p", "tests.fixtures.figures", "-p", "no:django", "-p", "no:cacheprovider", "-q"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args, "--rootdir", str(tmp_path), "test_load.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


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
