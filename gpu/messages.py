"""Every message the gpu app sends over the channel layer, as TypedDicts, so the sender and the consumers
are type-checked against one shape.

Only gpu/broadcast.py builds and sends them (gpu/frames.py builds the frames in them); consumers name
their handlers after `type` (`gpu.samples` -> `gpu_samples`). Frames are small and flat so the browser
can use them as-is.
"""

from __future__ import annotations

from typing import Literal, TypedDict


class ProcessFrame(TypedDict):
    """A process in a frame: the contract's ProcessSample as JSON, every field of it (gpu/frames.py).
    Typed here: the two the portal reads to keep each tenant's processes apart."""

    pod_namespace: str | None
    pod_name: str | None


class GpuFacts(TypedDict):
    """What the portal adds to a sample in a frame: the GPU as it names it, and its state."""

    uuid: str
    node: str
    index: int
    health: str
    sharing_mode: str
    in_service: bool


class GpuFrame(GpuFacts):
    """The latest sample of one GPU plus what the portal knows about it, built by gpu/frames.py.

    It holds every field of the contract's sample but `gpu_uuid` (plugin/contract.py: GpuSample), as
    JSON under its own name, which the browser reads; they are derived from the declaration and not
    repeated here. Typed here: the sample's fields the portal's own code reads (a frame is a dict with
    at least these keys)."""

    ts: str  # RFC 3339, from the agent
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
    held_for: str  # "project/job" the queue holds the node for; redacted for non-operators


class NodeStateMessage(TypedDict):
    type: Literal["node.state"]
    nodes: dict[str, NodeFrame]
    sent_at: float


GroupMessage = SamplesMessage | NodeStateMessage
