"""The telemetry wire contract between the node agent and the portal (docs/telemetry-contract.md).

The portal's ingest endpoint is written against exactly these fields; change both sides together.
"""

from __future__ import annotations

from typing import TypedDict

INGEST_PATH = "/api/v1/ingest/samples"
MAX_SAMPLES_PER_BATCH = 5000


class ProcessSample(TypedDict):
    pid: int
    mem_used_mib: int
    pod_uid: str | None
    pod_namespace: str | None
    pod_name: str | None
    container: str | None


class GpuSample(TypedDict):
    gpu_uuid: str
    ts: str  # RFC 3339, UTC, milliseconds: "2026-11-30T12:00:00.123Z"
    util_gpu: int  # 0-100
    util_mem: int  # 0-100
    mem_used_mib: int
    mem_total_mib: int
    temp_c: float
    power_w: float
    sm_clock_mhz: int
    mem_clock_mhz: int
    ecc_sbe: int
    ecc_dbe: int
    xid: int | None  # last XID seen on this GPU since the previous sample
    processes: list[ProcessSample]


class IngestBatch(TypedDict):
    node: str
    agent_version: str
    samples: list[GpuSample]


class IngestAccepted(TypedDict):
    accepted: int
    duplicates: int


class IngestRejected(TypedDict):
    errors: list[object]
