"""bench/cpu.py: CPU per kind of process, and a process that ends between snapshots still counts."""

from __future__ import annotations

import subprocess
import sys
import time

from bench import cpu

# About one CPU second, then the process ends; "locust" in its command line names its kind.
BURN = "import time  # locust\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass"
LOCUST = "load generator (locust)"
THIS = "this process (the benchmark or test)"


def test_a_process_that_ends_between_snapshots_counts_as_its_own_kind() -> None:
    child = subprocess.Popen([sys.executable, "-c", BURN])
    time.sleep(0.3)  # exec'd: the first snapshot sees it as locust
    before = cpu.snapshot()
    child.wait(timeout=60)  # this process waits for it: the kernel adds its CPU to ours as a child's
    into: dict[str, float] = {}
    cpu.spent(before, cpu.snapshot(), into)
    assert into[LOCUST] >= 0.6  # the part after the first snapshot
    assert into.get(cpu.UNREAD, 0.0) < 0.3


def test_one_born_and_ended_in_between_counts_as_its_parents() -> None:
    before = cpu.snapshot()
    subprocess.run([sys.executable, "-c", BURN], check=True, timeout=60)
    into: dict[str, float] = {}
    cpu.spent(before, cpu.snapshot(), into)
    assert into[THIS] >= 0.8
    assert into.get(LOCUST, 0.0) == 0.0  # never seen alive: its kind is not known
    assert into.get(cpu.UNREAD, 0.0) < 0.3
