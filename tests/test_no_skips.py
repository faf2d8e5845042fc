"""Issue 12: a skip is a failure whoever runs the suite, CI set or not, at run time or at collection
(tests/fixtures/no_skips.py, loaded here into a bare pytest run of small modules)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.bare_pytest import run_bare_pytest

MODULES = {
    "module_skip": 'import pytest\npytest.skip("gone", allow_module_level=True)\n\ndef test_x():\n    pass\n',
    "importorskip": 'import pytest\npytest.importorskip("no_such_module_here")\n\ndef test_x():\n    pass\n',
    "run_skip": 'import pytest\n\ndef test_x():\n    pytest.skip("a real part is missing")\n',
    "skip_mark": 'import pytest\n\n@pytest.mark.skip(reason="later")\ndef test_x():\n    pass\n',
}


def _run(tmp_path: Path, name: str, source: str) -> subprocess.CompletedProcess[str]:
    return run_bare_pytest(tmp_path, "tests.fixtures.no_skips", name, source)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_skip_fails_the_run_without_ci_set(tmp_path: Path, name: str) -> None:
    done = _run(tmp_path, name, MODULES[name])
    assert done.returncode != 0, done.stdout
    assert "not allowed" in done.stdout, done.stdout


def test_a_module_that_passes_passes(tmp_path: Path) -> None:
    done = _run(tmp_path, "plain", "def test_x():\n    assert True\n")
    assert done.returncode == 0, done.stdout
