"""The drills' stand-in for the kubelet restarts a worker that exited or whose liveness file went
stale, and leaves one alone while the file stays fresh (real processes, short limits)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.workloads_e2e.procs import wait_for
from tests.workloads_e2e.restarter import Restarter


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "600"], start_new_session=True)


def test_a_fresh_file_keeps_the_worker_and_a_stale_one_restarts_it(tmp_path: Path) -> None:
    alive = tmp_path / "alive"
    alive.touch()
    restarter = Restarter(_sleeper, alive, stale_s=1.0, startup_s=60, every_s=0.1)
    first = restarter.proc
    try:
        for _ in range(15):  # 1.5 s, touched as a working consumer would
            alive.touch()
            time.sleep(0.1)
        assert (restarter.restarts, first.poll()) == (0, None)
        wait_for(lambda: restarter.restarts == 1, 5, "a restart once the file is stale", every=0.05)
        assert first.poll() is not None
        assert restarter.proc.poll() is None
    finally:
        restarter.close()


def test_a_worker_that_exits_is_started_again(tmp_path: Path) -> None:
    restarter = Restarter(_sleeper, tmp_path / "alive", stale_s=60, startup_s=60, every_s=0.1)
    try:
        restarter.proc.kill()
        wait_for(lambda: restarter.restarts == 1, 5, "a restart of the exited worker", every=0.05)
        assert restarter.proc.poll() is None
    finally:
        restarter.close()
