"""The telemetry wire contract between the node agent and the portal, declared once
(docs/telemetry-contract.md).

The agent builds and encodes these Structs; the portal decodes a request body into them (gpu/wire.py)
and derives the rest from the sample: its stored columns (gpu/storage.py) and its live frame
(gpu/frames.py). A field added here reaches all of them (gpu/tests/test_sample_fields.py walks each
through them); its table column needs a migration.

The bounds are the contract's, not only the portal's: a batch outside them is refused with a 400,
which the agent drops without retrying, so the agent must keep to them as much as the portal checks
them. msgspec checks them only when decoding, so building and encoding a sample costs the agent
nothing for them.

The timestamp is RFC 3339 text on the wire: the agent writes that text itself (its clock stamps exact
milliseconds, cheaper than a datetime), the portal reads it as an aware datetime (gpu/wire.py). A
sample is generic in that one type, `Stamp`: `GpuSample[str]` is the agent's, `GpuSample[datetime]`
the portal's.
"""

from __future__ import annotations

from typing import Annotated, Generic, TypeVar

from msgspec import Meta, Struct

INGEST_PATH = "/api/v1/ingest/samples"
MAX_SAMPLES_PER_BATCH = 5000
MAX_PROCESSES = 256  # per GPU and sample

Stamp = TypeVar("Stamp")

Count = Annotated[int, Meta(ge=0, le=1 << 62)]  # stored as a Postgres bigint
Percent = Annotated[int, Meta(ge=0, le=100)]
MiB = Annotated[int, Meta(ge=0, le=(1 << 31) - 1)]  # stored as a Postgres integer
Mhz = Annotated[int, Meta(ge=0, le=100_000)]
Xid = Annotated[int, Meta(ge=0, le=(1 << 31) - 1)]
Celsius = Annotated[float, Meta(ge=-100.0, le=200.0)]
Watts = Annotated[float, Meta(ge=0.0, le=10_000.0)]
KubeName = Annotated[str, Meta(max_length=253)]


class ProcessSample(Struct, kw_only=True):
    """A compute process on the GPU; the pod fields are None where attribution found no pod."""

    pid: Count
    mem_used_mib: Count
    pod_uid: KubeName | None = None  # from /proc/<pid>/cgroup
    pod_namespace: KubeName | None = None  # from the kubelet's PodResources API
    pod_name: KubeName | None = None
    container: KubeName | None = None


class GpuSample(Struct, Generic[Stamp], kw_only=True):
    """One GPU's reading at one poll."""

    gpu_uuid: Annotated[str, Meta(min_length=1, max_length=64)]
    ts: Stamp  # RFC 3339, UTC, milliseconds: "2026-11-30T12:00:00.123Z"
    util_gpu: Percent
    util_mem: Percent
    mem_used_mib: MiB
    mem_total_mib: MiB
    temp_c: Celsius
    power_w: Watts
    sm_clock_mhz: Mhz
    mem_clock_mhz: Mhz
    ecc_sbe: Count
    ecc_dbe: Count
    xid: Xid | None = None  # last XID seen on this GPU since the previous sample
    processes: Annotated[list[ProcessSample], Meta(max_length=MAX_PROCESSES)]


class IngestBatch(Struct, Generic[Stamp], kw_only=True):
    node: Annotated[str, Meta(min_length=1, max_length=253)]
    agent_version: str = ""
    samples: list[GpuSample[Stamp]]


class IngestAccepted(Struct):
    """The portal's answer to a stored batch (200)."""

    accepted: int
    duplicates: int
