"""bench/cpu.py: CPU per kind of process, and what ended in between is still counted."""

from __future__ import annotations

import subprocess
import sys

from bench import cpu


def test_a_process_that_ends_between_snapshots_is_counted_as_not_read() -> None:
    before = cpu.snapshot()
    burn = "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", burn], check=True, timeout=60)  # ~1 CPU s, then gone
    into: dict[str, float] = {}
    cpu.spent(before, cpu.snapshot(), into)
    assert into[cpu.UNREAD] >= 0.8  # the child's second is not in any process read, yet it is here
    assert "machine" not in into
