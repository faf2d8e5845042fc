"""One MPS control daemon per shared GPU, supervised: started, restarted on crash with backoff.

Each daemon gets its own pipe, log and shm directories under `root/<uuid>/` (mounted into the
containers that hold slices of that GPU, see allocator.grant_shared). MPS talks through /dev/shm, so
with `isolate_shm` each daemon runs in its own mount namespace with `root/<uuid>/shm` bound on
/dev/shm: containers on one GPU share that directory, and no other. With the real backend the
command is `nvidia-cuda-mps-control -f` (foreground, so we can watch it); with the simulated backend
plugin/sim/mps.py plays the daemon, supervised by exactly the same code.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

REAL_COMMAND = ["nvidia-cuda-mps-control", "-f"]
REAL_CONTROL = ["nvidia-cuda-mps-control"]
_SIM = str(Path(__file__).parent / "sim" / "mps.py")
STANDIN_COMMAND = [sys.executable, _SIM]
STANDIN_CONTROL = [sys.executable, _SIM, "control"]
# A private mount namespace whose /dev/shm is the GPU's own directory ($0), then the daemon ($@).
SHM_WRAPPER = [
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "--",
    "sh",
    "-c",
    'mount --bind "$0" /dev/shm && exec "$@"',
]


@dataclass
class _Daemon:
    uuid: str
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    not_before: float = 0.0
    backoff: float = 0.0
    restarts: int = 0


class MpsSupervisor:
    def __init__(
        self,
        root: Path,
        command: list[str],
        *,
        on_change: Callable[[set[str]], None] = lambda down: None,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        stable_s: float = 60.0,
        tick_s: float = 0.2,
        isolate_shm: bool = False,
    ) -> None:
        self.root = root
        self.command = command
        self.isolate_shm = isolate_shm
        self.on_change = on_change
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.stable_s = stable_s
        self.tick_s = tick_s
        self._daemons: dict[str, _Daemon] = {}
        self._wanted: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mps", daemon=True)
        self._last_down: set[str] | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        with self._lock:
            for d in self._daemons.values():
                self._terminate(d)

    def ensure(self, uuids: set[str]) -> None:
        with self._lock:
            self._wanted = set(uuids)
        self.tick()

    def pid(self, uuid: str) -> int | None:
        with self._lock:
            d = self._daemons.get(uuid)
            return d.proc.pid if d and d.proc and d.proc.poll() is None else None

    def restarts(self, uuid: str) -> int:
        with self._lock:
            return self._daemons[uuid].restarts if uuid in self._daemons else 0

    def down(self) -> set[str]:
        with self._lock:
            return {u for u in self._wanted if not self._running(self._daemons.get(u))}

    def _run(self) -> None:
        while not self._stop.wait(self.tick_s):
            self.tick()

    def tick(self) -> None:
        now = time.monotonic()
        with self._lock:
            for uuid in set(self._daemons) - self._wanted:
                self._terminate(self._daemons.pop(uuid))
            for uuid in self._wanted:
                self._supervise(self._daemons.setdefault(uuid, _Daemon(uuid)), now)
        down = self.down()
        if down != self._last_down:
            self._last_down = down
            self.on_change(down)

    @staticmethod
    def _running(d: _Daemon | None) -> bool:
        return bool(d and d.proc and d.proc.poll() is None)

    def _supervise(self, d: _Daemon, now: float) -> None:
        if self._running(d):
            if now - d.started_at > self.stable_s:
                d.backoff = 0.0  # ran long enough: the next crash restarts at once again
            return
        if d.proc is not None:  # it was running and died
            log.warning(
                "MPS daemon for %s exited with %s; restart in %.1fs", d.uuid, d.proc.returncode, d.backoff
            )
            d.proc = None
            d.not_before = now + d.backoff
            d.backoff = min(self.backoff_max_s, max(self.backoff_initial_s, d.backoff * 2))
            d.restarts += 1
        if now >= d.not_before:
            self._spawn(d, now)

    def argv(self, uuid: str) -> list[str]:
        if not self.isolate_shm:
            return list(self.command)
        return [*SHM_WRAPPER, str(self.root / uuid / "shm"), *self.command]

    def _spawn(self, d: _Daemon, now: float) -> None:
        pipe, logs, shm = (self.root / d.uuid / sub for sub in ("pipe", "log", "shm"))
        for path in (pipe, logs, shm):
            path.mkdir(parents=True, exist_ok=True)
        shm.chmod(0o1777)  # as /dev/shm itself: every project UID on this GPU may create segments
        env = os.environ | {
            "CUDA_VISIBLE_DEVICES": d.uuid,
            "CUDA_MPS_PIPE_DIRECTORY": str(pipe),
            "CUDA_MPS_LOG_DIRECTORY": str(logs),
        }
        try:
            d.proc = subprocess.Popen(
                self.argv(d.uuid), env=env, stdin=subprocess.DEVNULL, start_new_session=True
            )
        except OSError as exc:
            log.error("cannot start MPS daemon for %s: %s", d.uuid, exc)
            d.not_before = now + max(self.backoff_initial_s, d.backoff)
            return
        d.started_at = now
        log.info("MPS daemon for %s started (pid %d)", d.uuid, d.proc.pid)

    @staticmethod
    def _terminate(d: _Daemon) -> None:
        if d.proc is None or d.proc.poll() is not None:
            return
        d.proc.terminate()
        try:
            d.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            d.proc.kill()
            d.proc.wait(timeout=5)
