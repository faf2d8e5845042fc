"""Per-pod GPU readings of one ingest batch, handed to whoever keeps per-job figures.

gpu knows pods, not jobs (workloads sits above it), so ingest sends `pod_readings_stored` with one
`PodReading` per (pod, GPU, sample) inside its transaction; workloads' receiver turns them into the
job's peaks and busy time in one UPDATE. Building the readings is pure and costs one pass over the
batch, so a batch without pods (an idle node) costs nothing more.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from django.dispatch import Signal

from gpu.samples import Sample

# A gap longer than this between two samples of one GPU is missing telemetry, not busy time.
MAX_INTERVAL_S = 5.0
# The first sample of a GPU in a batch counts for the agent's default poll interval.
FIRST_INTERVAL_S = 1.0

# Sent with readings=list[PodReading], inside the ingest transaction (all or nothing with the samples).
pod_readings_stored = Signal()


class PodReading(NamedTuple):
    """One pod on one GPU in one sample: its own processes' memory and the GPU's SM utilisation
    (NVML reports utilisation per GPU, so on a shared GPU it includes the other tenants). A named
    tuple, not a frozen dataclass: one is made per sample, and a frozen dataclass's __init__ cost
    ingest several times as much (B6)."""

    namespace: str
    pod: str
    gpu_uuid: str
    ts: datetime
    mem_mib: int
    mem_total_mib: int
    util_gpu: int
    interval_s: float


def _intervals(samples: list[Sample]) -> list[float]:
    """Seconds each sample stands for: the gap to its GPU's previous sample, capped."""
    previous: dict[str, datetime] = {}
    out = []
    for s in samples:
        before = previous.get(s.gpu_uuid)
        gap = (s.ts - before).total_seconds() if before is not None and s.ts > before else FIRST_INTERVAL_S
        out.append(min(gap, MAX_INTERVAL_S))
        previous[s.gpu_uuid] = s.ts
    return out


def pod_readings(samples: list[Sample]) -> list[PodReading]:
    """Readings of every pod with a process in the samples (samples in time order, as ingest keeps)."""
    ordered = sorted(samples, key=lambda s: s.ts)
    readings: list[PodReading] = []
    for s, interval in zip(ordered, _intervals(ordered), strict=True):
        mem: dict[tuple[str, str], int] = {}
        for p in s.processes:
            if p.pod_namespace and p.pod_name:
                key = (p.pod_namespace, p.pod_name)
                mem[key] = mem.get(key, 0) + p.mem_used_mib
        readings.extend(
            PodReading(ns, pod, s.gpu_uuid, s.ts, used, s.mem_total_mib, s.util_gpu, interval)
            for (ns, pod), used in mem.items()
        )
    return readings
