"""MPS control daemons are supervised: a killed daemon comes back, with growing backoff."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from plugin.devices import RESOURCE_SHARED
from plugin.mps import STANDIN_COMMAND, MpsSupervisor
from plugin.sim.kubelet import TestKubelet
from plugin.sim.nvml import SimNvml
from plugin.tests.conftest import MakeDaemon


def _until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.05)


def test_a_killed_stand_in_daemon_is_restarted(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml
) -> None:
    uuid = sim.gpus[1].uuid
    daemon = make_daemon({uuid: {"mode": "shared", "slices": 2}})
    _until(lambda: daemon.mps.pid(uuid) is not None)
    old = daemon.mps.pid(uuid)
    assert old is not None
    assert (daemon.cfg.mps_root / uuid / "pipe").is_dir()
    os.kill(old, signal.SIGKILL)
    _until(lambda: daemon.mps.pid(uuid) not in (None, old))
    assert daemon.mps.restarts(uuid) == 1
    kubelet.wait_devices(RESOURCE_SHARED, lambda d: set(d.values()) == {"Healthy"}, timeout=5)


def test_a_crash_looping_daemon_backs_off(short_dir: Path) -> None:
    sup = MpsSupervisor(
        short_dir, [sys.executable, "-c", "pass"], backoff_initial_s=0.2, backoff_max_s=0.8, tick_s=0.05
    )
    sup.start()
    try:
        sup.ensure({"GPU-x"})
        time.sleep(2.5)
        restarts = sup.restarts("GPU-x")
    finally:
        sup.stop()
    # 0 + 0.2 + 0.4 + 0.8 + 0.8 ... (plus python start-up each time): a handful, not hundreds.
    assert 2 <= restarts <= 6


def test_a_gpu_no_longer_shared_has_its_daemon_stopped(short_dir: Path) -> None:
    down: list[set[str]] = []
    sup = MpsSupervisor(short_dir, list(STANDIN_COMMAND), on_change=down.append)
    sup.ensure({"GPU-a", "GPU-b"})
    pid = sup.pid("GPU-a")
    assert pid is not None
    sup.ensure({"GPU-b"})
    assert sup.pid("GPU-a") is None
    assert sup.down() == set()
    sup.stop()
    assert sup.pid("GPU-b") is None
