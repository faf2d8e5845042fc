"""Every message the gpu app sends over the channel layer, as TypedDicts, so the sender and the consumers
are type-checked against one shape.

Only gpu/broadcast.py builds and sends them; consumers name their handlers after `type`
(`gpu.samples` -> `gpu_samples`). Frames are small and flat so the browser can use them as-is.
"""

from __future__ import annotations

from typing import Literal, TypedDict


class ProcessFrame(TypedDict):
    pid: int
    mem_used_mib: int
    pod_namespace: str | None
    pod_name: str | None
    container: str | None


class GpuFrame(TypedDict):
    """The latest sample of one GPU plus what the portal knows about it."""

    uuid: str
    node: str
    index: int
    ts: str  # RFC 3339, from the agent
    util_gpu: int
    util_mem: int
    mem_used_mib: int
    mem_total_mib: int
    temp_c: float
    power_w: float
    sm_clock_mhz: int
    mem_clock_mhz: int
    xid: int | None
    health: str
    sharing_mode: str
    in_service: bool
    processes: list[ProcessFrame]


class SamplesMessage(TypedDict):
    """Latest frames keyed by GPU UUID; merging two of these keeps the newer frame per GPU."""

    type: Literal["gpu.samples"]
    gpus: dict[str, GpuFrame]
    sent_at: float  # unix seconds when broadcast.py handed it to the layer (push-lag metric)


class NodeFrame(TypedDict):
    name: str
    cordoned: bool
    desired_cordoned: bool | None
    ready: bool
    deleted: bool
    gpu_model: str
    gpu_count: int


class NodeStateMessage(TypedDict):
    type: Literal["node.state"]
    nodes: dict[str, NodeFrame]
    sent_at: float


GroupMessage = SamplesMessage | NodeStateMessage
