"""Tenancy on shared GPUs: one project (namespace) per GPU unless the portal marks the GPU for
cross-project sharing, and MPS limits the job cannot change.

MPS runs one server per UID, and every project runs as its own UID, so on a one-project GPU the
daemon's server *is* that project. The plugin sets that server's active thread percentage and pinned
memory limit in the control daemon (`set_default_*` for the next server, `set_*` for a running one)
to the project's slices on the GPU; the CUDA_MPS_* variables in the container can only lower a
client's share below that, never raise it. The pure functions read PodResources holders; `LimitWriter`
talks to the control program (`nvidia-cuda-mps-control`, or plugin/sim/mps.py simulated).
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from plugin.devices import RESOURCE_SHARED, parse_device_id
from plugin.podresources import Holder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limit:
    thread_pct: int
    mem_mib: int


def tenants(holders: Iterable[Holder]) -> dict[str, dict[str, int]]:
    """GPU uuid -> namespace -> slices it holds there, over the shared resource only."""
    out: dict[str, dict[str, int]] = {}
    for h in holders:
        if h.resource != RESOURCE_SHARED:
            continue
        for dev in h.device_ids:
            uuid = parse_device_id(dev)[0]
            per = out.setdefault(uuid, {})
            per[h.namespace] = per.get(h.namespace, 0) + 1
    return out


def conflict(holders: list[Holder], ids: Iterable[str], cross_project: frozenset[str]) -> str | None:
    """Why the container holding `ids` must not start, or None. It must be a known holder, and every
    GPU it has slices on must hold no other namespace, unless that GPU is cross-project."""
    wanted = frozenset(ids)
    mine = next((h for h in holders if h.resource == RESOURCE_SHARED and h.device_ids == wanted), None)
    if mine is None:
        return f"no pod holds {sorted(wanted)} in PodResources; cannot tell its project"
    per_gpu = tenants(holders)
    for uuid in sorted({parse_device_id(d)[0] for d in wanted} - cross_project):
        others = sorted(set(per_gpu.get(uuid, {})) - {mine.namespace})
        if others:
            return (
                f"GPU {uuid} holds slices of {', '.join(others)}; namespace {mine.namespace} may not "
                "share it (one project per shared GPU unless an operator marks it cross-project)"
            )
    return None


def limits(holders: Iterable[Holder], slices: dict[str, int], memory_mib: dict[str, int]) -> dict[str, Limit]:
    """Per shared GPU in use: the largest share one project holds there (its server's ceiling; on a
    one-project GPU, simply that project's share). `slices`: the GPU's N, `memory_mib`: its memory."""
    out = {}
    for uuid, per in tenants(holders).items():
        n = slices.get(uuid)
        if not n or uuid not in memory_mib:
            continue
        k = min(n, max(per.values()))
        out[uuid] = Limit(thread_pct=max(1, 100 * k // n), mem_mib=memory_mib[uuid] * k // n)
    return out


def commands(limit: Limit, server_pids: Iterable[str]) -> list[str]:
    """Device 0: each daemon sees only its own GPU (CUDA_VISIBLE_DEVICES=<uuid>)."""
    lines = [
        f"set_default_active_thread_percentage {limit.thread_pct}",
        f"set_default_device_pinned_mem_limit 0 {limit.mem_mib}M",
    ]
    for pid in server_pids:
        lines += [
            f"set_active_thread_percentage {pid} {limit.thread_pct}",
            f"set_device_pinned_mem_limit {pid} 0 {limit.mem_mib}M",
        ]
    return lines


class LimitWriter:
    """Sends a GPU's limit to its control daemon when it changed; remembers what was sent."""

    def __init__(self, root: Path, control: list[str], *, timeout_s: float = 5.0) -> None:
        self.root = root
        self.control = control
        self.timeout_s = timeout_s
        self.applied: dict[str, Limit] = {}
        self._lock = threading.Lock()  # PreStartContainer (gRPC threads) and the control loop

    def forget(self, uuid: str) -> None:
        """The GPU's daemon was restarted: it lost what it was told, so tell it again."""
        with self._lock:
            self.applied.pop(uuid, None)

    def apply(self, wanted: dict[str, Limit]) -> list[str]:
        """Return the GPUs whose daemon refused or could not be reached (retried next time)."""
        with self._lock:
            return self._apply(wanted)

    def _apply(self, wanted: dict[str, Limit]) -> list[str]:
        failed = []
        for uuid, limit in sorted(wanted.items()):
            if self.applied.get(uuid) == limit:
                continue
            try:
                pids = self._run(uuid, ["get_server_list"]).split()
                self._run(uuid, commands(limit, pids))
            except (OSError, subprocess.SubprocessError) as exc:
                log.error("MPS limits for %s not set: %s", uuid, exc)
                failed.append(uuid)
                continue
            self.applied[uuid] = limit
            log.info("MPS limits for %s: %d%% of SMs, %d MiB", uuid, limit.thread_pct, limit.mem_mib)
        return failed

    def _run(self, uuid: str, lines: list[str]) -> str:
        env = os.environ | {"CUDA_MPS_PIPE_DIRECTORY": str(self.root / uuid / "pipe")}
        done = subprocess.run(  # fixed program, our own commands
            self.control,
            input="\n".join(lines) + "\n",
            capture_output=True,
            text=True,
            env=env,
            timeout=self.timeout_s,
            check=True,
        )
        return done.stdout
