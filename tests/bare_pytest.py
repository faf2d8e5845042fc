"""A bare pytest run of one small test module with one of the suite's own plugins loaded: how the
plugins in tests/fixtures/ (no_skips, figures) are tested as a user of pytest meets them. CI is left
out of its environment: the plugins behave the same whoever runs the suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_bare_pytest(tmp_path: Path, plugin: str, name: str, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / f"test_{name}.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"PYTHONPATH": str(REPO)}
    args = ["-p", plugin, "-p", "no:django", "-p", "no:cacheprovider", "-q"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args, "--rootdir", str(tmp_path), f"test_{name}.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
