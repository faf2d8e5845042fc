"""Per-pod GPU readings of one ingest batch, handed to whoever keeps per-job figures.

gpu knows pods, not jobs (workloads sits above it), so ingest sends `pod_readings_stored` with one
`PodReading` per (pod, GPU, sample) inside its transaction; workloads' receiver turns them into the
job's peaks and busy time in one UPDATE. Building the readings is pure and costs one pass over the
batch, so a batch without pods (an idle node) costs nothing more.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from operator import attrgetter
from typing import NamedTuple

from django.dispatch import Signal

from gpu.wire import Sample
from plugin.contract import ProcessSample

# A gap longer than this between two samples of one GPU is missing telemetry, not busy time.
MAX_INTERVAL_S = 5.0
# The first sample of a GPU in a batch counts for the agent's default poll interval.
FIRST_INTERVAL_S = 1.0

# Sent with readings=list[PodReading], inside the ingest transaction (all or nothing with the samples).
pod_readings_stored = Signal()


class PodReading(NamedTuple):
    """One pod on one GPU in one sample: its own processes' memory and the GPU's SM utilisation
    (NVML reports utilisation per GPU, so on a shared GPU it includes the other tenants). A named
    tuple, not a frozen dataclass: one is made per sample, and a frozen dataclass's __init__ costs
    ingest several times as much (measured)."""

    namespace: str
    pod: str
    gpu_uuid: str
    ts: datetime
    mem_mib: int
    mem_total_mib: int
    util_gpu: int
    interval_s: float


def pod_readings(samples: list[Sample]) -> list[PodReading]:
    """Readings of every pod with a process in the samples. One pass in time order; each sample
    stands for the gap to its GPU's previous one, capped (a tenth of a batch's ingest time, measured)."""
    previous: dict[str, datetime] = {}
    readings: list[PodReading] = []
    for s in sorted(samples, key=attrgetter("ts")):
        ts, uuid = s.ts, s.gpu_uuid
        before = previous.get(uuid)
        previous[uuid] = ts
        if not s.processes:
            continue
        gap = (ts - before).total_seconds() if before is not None and ts > before else FIRST_INTERVAL_S
        interval = gap if gap < MAX_INTERVAL_S else MAX_INTERVAL_S
        for (namespace, pod), used in _pod_memory(s.processes):
            readings.append(PodReading(namespace, pod, uuid, ts, used, s.mem_total_mib, s.util_gpu, interval))
    return readings


def _pod_memory(processes: list[ProcessSample]) -> Iterable[tuple[tuple[str, str], int]]:
    """Each pod's memory on the GPU: its processes' summed. One process (the common case) needs no sum."""
    if len(processes) == 1:
        p = processes[0]
        return [((p.pod_namespace, p.pod_name), p.mem_used_mib)] if p.pod_namespace and p.pod_name else []
    mem: dict[tuple[str, str], int] = {}
    for p in processes:
        if p.pod_namespace and p.pod_name:
            key = (p.pod_namespace, p.pod_name)
            mem[key] = mem.get(key, 0) + p.mem_used_mib
    return mem.items()
