"""Pure allocation policy: which devices to prefer, and what a container gets for the ones it got.

Everything here is a function of its arguments (no NVML, no gRPC), so the Hypothesis properties in
plugin/tests/test_allocator.py can hammer it. Visibility is always by GPU UUID, never by relative index.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from plugin.devices import parse_device_id

MAX_COMBINATIONS = 5000  # beyond this, greedy nearest-neighbour instead of exhaustive search
CONTAINER_MPS_ROOT = "/mps"


def preferred_whole(
    available: Sequence[str], must: Sequence[str], size: int, distance: Callable[[str, str], int]
) -> list[str]:
    """Pick `size` GPUs including `must` that are closest to each other (NVLink, then PCIe switch)."""
    chosen = list(dict.fromkeys(must))[:size]
    rest = sorted(set(available) - set(chosen))
    need = size - len(chosen)
    if need <= 0 or need > len(rest):
        return chosen + rest[: max(0, need)]
    if math.comb(len(rest), need) > MAX_COMBINATIONS:
        return _greedy(chosen, rest, need, distance)

    def cost(extra: Iterable[str]) -> int:
        return sum(distance(a, b) for a, b in itertools.combinations(chosen + list(extra), 2))

    return chosen + list(min(itertools.combinations(rest, need), key=cost))


def _greedy(chosen: list[str], rest: list[str], need: int, distance: Callable[[str, str], int]) -> list[str]:
    picked = list(chosen) or [rest[0]]
    pool = [g for g in rest if g not in picked]
    while len(picked) < len(chosen) + need:
        best = min(pool, key=lambda g: sum(distance(g, p) for p in picked))
        picked.append(best)
        pool.remove(best)
    return picked


def preferred_slices(available: Sequence[str], must: Sequence[str], size: int) -> list[str]:
    """Best-fit packing: one card with the smallest leftover that fits, else the fewest cards
    (largest free first, the last one best-fit). GPUs already touched by `must` are filled first."""
    chosen = list(dict.fromkeys(must))[:size]
    free: dict[str, list[str]] = {}
    for dev in sorted(set(available) - set(chosen), key=_slice_key):
        free.setdefault(parse_device_id(dev)[0], []).append(dev)
    need = size - len(chosen)
    for uuid in dict.fromkeys(parse_device_id(d)[0] for d in chosen):
        take = free.pop(uuid, [])[:need]
        chosen += take
        need -= len(take)
    while need > 0 and free:
        fits = [u for u, ids in free.items() if len(ids) >= need]
        uuid = (
            min(fits, key=lambda u: (len(free[u]), u)) if fits else max(free, key=lambda u: (len(free[u]), u))
        )
        take = free.pop(uuid)[:need]
        chosen += take
        need -= len(take)
    return chosen


def _slice_key(dev: str) -> tuple[str, int]:
    uuid, n = parse_device_id(dev)
    return uuid, n or 0


@dataclass(frozen=True)
class SharedShare:
    """k of a GPU's N slices, and the limits that follow from it."""

    uuid: str
    k: int
    n: int
    memory_mib: int

    @property
    def thread_pct(self) -> int:
        return (100 * self.k) // self.n  # floor: the shares of one GPU never sum above 100

    @property
    def mem_limit_mib(self) -> int:
        return (self.memory_mib * self.k) // self.n


@dataclass
class Grant:
    """What one container gets; server.py turns it into a ContainerAllocateResponse."""

    envs: dict[str, str] = field(default_factory=dict)
    mounts: list[tuple[str, str, bool]] = field(default_factory=list)  # (container, host, read_only)


def grant_whole(uuids: Iterable[str], device_ids: Iterable[str]) -> Grant:
    visible = ",".join(uuids)
    return Grant(envs=_visibility(visible, device_ids))


def grant_shared(shares: Sequence[SharedShare], device_ids: Iterable[str], mps_host_root: str) -> Grant:
    """Compute share: one thread percentage per process, so the minimum over the cards (never above any
    card's entitlement); the exact per-card values go in GPU_PORTAL_MPS_THREAD_PERCENTAGES for
    one-process-per-GPU jobs. Memory: per card, exactly k/N of it."""
    ordered = sorted(shares, key=lambda s: (-s.k, s.uuid))
    primary = ordered[0].uuid
    envs = _visibility(",".join(s.uuid for s in ordered), device_ids)
    envs |= {
        "CUDA_MPS_PIPE_DIRECTORY": f"{CONTAINER_MPS_ROOT}/{primary}/pipe",
        "CUDA_MPS_LOG_DIRECTORY": f"{CONTAINER_MPS_ROOT}/{primary}/log",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(min(s.thread_pct for s in ordered)),
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": ",".join(f"{s.uuid}={s.mem_limit_mib}M" for s in ordered),
        "GPU_PORTAL_MPS_THREAD_PERCENTAGES": ",".join(f"{s.uuid}={s.thread_pct}" for s in ordered),
    }
    mounts = [
        (f"{CONTAINER_MPS_ROOT}/{s.uuid}/pipe", f"{mps_host_root}/{s.uuid}/pipe", False) for s in ordered
    ]
    mounts += [(f"{CONTAINER_MPS_ROOT}/{s.uuid}/log", f"{mps_host_root}/{s.uuid}/log", True) for s in ordered]
    # MPS talks through /dev/shm: the primary GPU's own directory, which its daemon has as /dev/shm.
    mounts.append(("/dev/shm", f"{mps_host_root}/{primary}/shm", False))  # noqa: S108
    return Grant(envs=envs, mounts=mounts)


def _visibility(uuids: str, device_ids: Iterable[str]) -> dict[str, str]:
    return {
        "NVIDIA_VISIBLE_DEVICES": uuids,
        "CUDA_VISIBLE_DEVICES": uuids,
        # Lets the agent tie a process to the exact kubelet allocation (PodResources device ids).
        "GPU_PORTAL_DEVICE_IDS": ",".join(sorted(device_ids)),
    }
