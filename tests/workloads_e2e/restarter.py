"""What the kubelet does for the chart's Celery worker, for the drills that run the portal as plain
processes: start it again when it exits, or when its liveness file (portal/liveness.py) is older
than the chart's probe allows. Without it a worker stuck after a Redis outage failed a drill that
production would have survived (the probe restarts it)."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from portal import liveness
from tests.workloads_e2e.procs import stop_process

# The chart: three failed probes 10 s apart after the file's 60 s; a new pod gets 3 minutes to write it.
STALE_S = liveness.STALE_S + 30
STARTUP_S = 180


class Restarter:
    def __init__(
        self,
        start: Callable[[], subprocess.Popen[bytes]],
        alive: Path,
        *,
        stale_s: float = STALE_S,
        startup_s: float = STARTUP_S,
        every_s: float = 2.0,
    ) -> None:
        self.start, self.alive = start, alive
        self.stale_s, self.startup_s, self.every_s = stale_s, startup_s, every_s
        self.restarts = 0
        self.proc, self.started = start(), time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="restarter", daemon=True)
        self._thread.start()

    def _due(self) -> bool:
        if self.proc.poll() is not None:
            return True
        try:
            return time.time() - self.alive.stat().st_mtime > self.stale_s
        except FileNotFoundError:
            return time.time() - self.started > self.startup_s

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            if self._due():
                print(f"restarter: the worker (pid {self.proc.pid}) stopped or its liveness file went stale")
                stop_process(self.proc)
                self.alive.unlink(missing_ok=True)
                self.proc, self.started = self.start(), time.time()
                self.restarts += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        stop_process(self.proc)
