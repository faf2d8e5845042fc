"""What the real node changes on the host, so that it can be put back as found.

The kubelet rewrites three kernel settings at start and, with containerd and CNI, makes a few
paths it does not let us move (its device-plugin socket directory is fixed, for one) and cgroup
folders named kubepods in every hierarchy. A snapshot taken before the node starts says what
existed; `restore` undoes the rest. One real node per machine at a time: `machine_lock`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SYSCTLS = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops")
# Made by the kubelet, containerd's shims or libcni whatever their configuration says.
FIXED_PATHS = (
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/run/containerd",
    "/var/lib/cni",
)
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_NAMES = ("kubepods", "kubepods.slice")
LOCK_PATH = Path(tempfile.gettempdir(), "gpuportal-realnode.lock")


@dataclass(frozen=True)
class HostState:
    sysctls: dict[str, str]
    paths: frozenset[str]
    cgroups: frozenset[str]


def _kubepods_cgroups() -> set[str]:
    # cgroup v1: one hierarchy per folder of the root; v2: the root is the hierarchy.
    hierarchies = [CGROUP_ROOT, *(CGROUP_ROOT.iterdir() if CGROUP_ROOT.is_dir() else ())]
    return {str(h / n) for h in hierarchies for n in CGROUP_NAMES if (h / n).is_dir()}


def snapshot() -> HostState:
    return HostState(
        sysctls={k: Path("/proc/sys", k).read_text().strip() for k in SYSCTLS},
        paths=frozenset(p for p in FIXED_PATHS if os.path.lexists(p)),
        cgroups=frozenset(_kubepods_cgroups()),
    )


def differences(before: HostState, after: HostState) -> list[str]:
    """What `after` has that `before` had not, one line each (empty: the host is as found)."""
    out = [
        f"{k} is {after.sysctls[k]}, was {v}" for k, v in before.sysctls.items() if after.sysctls.get(k) != v
    ]
    out += [f"{p} was made" for p in sorted(after.paths - before.paths)]
    out += [f"cgroup {c} was made" for c in sorted(after.cgroups - before.cgroups)]
    return out


def _folders_deepest_first(top: str) -> list[str]:
    # The shims and the kubelet remove their cgroups while we walk; os.walk skips a folder that is
    # gone (pathlib's rglob raises FileNotFoundError for it).
    return [folder for folder, _, _ in os.walk(top, topdown=False)]


def cgroup_pids(cgroups: set[str] | frozenset[str]) -> set[int]:
    """Every process inside these cgroup trees (the containers the node ran)."""
    pids: set[int] = set()
    for top in cgroups:
        for folder in _folders_deepest_first(top):
            with contextlib.suppress(OSError):
                pids.update(int(x) for x in Path(folder, "cgroup.procs").read_text().split())
    return pids


def kill_cgroup_processes(cgroups: set[str] | frozenset[str]) -> None:
    """SIGKILL everything in these cgroup trees until they are empty (at most about 5 s)."""
    for _ in range(50):
        pids = cgroup_pids(cgroups)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def remove_cgroup_tree(top: str) -> None:
    # Children first: a cgroup folder can only be removed empty, and only with rmdir.
    for folder in _folders_deepest_first(top):
        with contextlib.suppress(OSError):
            Path(folder).rmdir()


def restore(before: HostState) -> list[str]:
    """Kill what runs in new cgroups, remove them and new paths, put the settings back.

    Returns what could still not be restored (empty when the host is as found)."""
    now = snapshot()
    # A cgroup stays busy for a moment after its last process was killed: try again for a while.
    for _ in range(20):
        new_cgroups = snapshot().cgroups - before.cgroups
        if not new_cgroups:
            break
        kill_cgroup_processes(new_cgroups)
        for c in sorted(new_cgroups):
            remove_cgroup_tree(c)
        time.sleep(0.25)
    for p in sorted(now.paths - before.paths):
        shutil.rmtree(p, ignore_errors=True)
    for key, value in before.sysctls.items():
        Path("/proc/sys", key).write_text(value)
    return differences(before, snapshot())


@contextlib.contextmanager
def machine_lock(timeout: float = 120.0) -> Iterator[None]:
    """Held while a real node runs: its fixed paths and the kernel settings are machine-wide."""
    with LOCK_PATH.open("a+b") as lock:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"another real node runs on this machine ({LOCK_PATH} is held); "
                        "stop it (make cluster-down) or wait for its tests"
                    ) from None
                time.sleep(0.5)
        yield
