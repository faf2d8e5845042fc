"""A malformed environment variable stops the start with a message naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("name", "value"),
    [("GPUPORTAL_SWEEP_SECONDS", "soon"), ("GPUPORTAL_LOG_FOLLOW_IDLE_SECONDS", "."), ("EMAIL_PORT", "smtp")],
)
def test_a_malformed_number_stops_the_start_naming_the_variable(name: str, value: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import portal.settings"],
        cwd=ROOT,
        env={**os.environ, name: value},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert f"ImproperlyConfigured: {name}: " in result.stderr
