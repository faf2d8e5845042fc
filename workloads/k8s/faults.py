"""Chaos hooks for the worker-kill tests: SIGKILL this process at a named point.

Off unless GPUPORTAL_FAULT_DIR names a directory. A file `<point>` in it holds a count; each
time the point is reached with a count above zero, the count drops by one and the process dies
by SIGKILL, exactly like an OOM kill or a node loss between two steps of a reconcile.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
from pathlib import Path


def fault_point(name: str) -> None:
    directory = os.environ.get("GPUPORTAL_FAULT_DIR")
    if not directory:
        return
    path = Path(directory) / name
    if not path.exists():
        return
    with path.open("r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        left = 0
        with contextlib.suppress(ValueError):
            left = int(handle.read().strip() or 0)
        if left <= 0:
            return
        handle.seek(0)
        handle.truncate()
        handle.write(str(left - 1))
        handle.flush()
        os.fsync(handle.fileno())
    with (Path(directory) / "kills.log").open("a") as out:
        out.write(f"{os.getpid()} {name}\n")
    os.kill(os.getpid(), signal.SIGKILL)
