"""Device discovery over the NVML Protocol: what GPUs this node has and how they are wired."""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass

from plugin import names, nvml
from plugin.nvml import NvmlLib

log = logging.getLogger(__name__)

RESOURCE_GPU = names.GPU_RESOURCE
RESOURCE_SHARED = names.SHARED_RESOURCE
SLICE_SEP = "::"


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str
    memory_mib: int
    minor: int
    numa_node: int | None
    pci_bus_id: str


@dataclass(frozen=True)
class Node:
    """The node's GPUs plus their pairwise link distance (NVLink < same switch < ... < system)."""

    gpus: tuple[Gpu, ...]
    distance: dict[frozenset[str], int]

    def by_uuid(self, uuid: str) -> Gpu | None:
        return next((g for g in self.gpus if g.uuid == uuid), None)

    def pair_distance(self, a: str, b: str) -> int:
        return self.distance.get(frozenset((a, b)), nvml.TOPOLOGY_SYSTEM)


def _numa(lib: NvmlLib, handle: object) -> int | None:
    try:
        node = lib.nvmlDeviceGetNumaNodeId(handle)
    except nvml.NVMLError:  # older drivers, or not NUMA: no topology hint rather than a wrong one
        return None
    return node if node >= 0 else None


def _as_str(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def discover(lib: NvmlLib) -> Node:
    gpus: list[Gpu] = []
    handles = []
    for index in range(lib.nvmlDeviceGetCount()):
        h = lib.nvmlDeviceGetHandleByIndex(index)
        handles.append(h)
        gpus.append(
            Gpu(
                index=index,
                uuid=_as_str(lib.nvmlDeviceGetUUID(h)),
                name=_as_str(lib.nvmlDeviceGetName(h)),
                memory_mib=int(lib.nvmlDeviceGetMemoryInfo(h).total) >> 20,
                minor=lib.nvmlDeviceGetMinorNumber(h),
                numa_node=_numa(lib, h),
                pci_bus_id=_as_str(lib.nvmlDeviceGetPciInfo(h).busId),
            )
        )
    distance = {}
    for (ga, ha), (gb, hb) in itertools.combinations(zip(gpus, handles, strict=True), 2):
        distance[frozenset((ga.uuid, gb.uuid))] = _link(lib, ha, hb)
    return Node(tuple(gpus), distance)


def _link(lib: NvmlLib, a: object, b: object) -> int:
    try:
        if lib.nvmlDeviceGetP2PStatus(a, b, nvml.P2P_NVLINK) == nvml.P2P_OK:
            return nvml.LINK_NVLINK
    except nvml.NVMLError:
        pass  # no NVLink support on this card: fall through to the PCIe level
    try:
        return int(lib.nvmlDeviceGetTopologyCommonAncestor(a, b))
    except nvml.NVMLError:
        return nvml.TOPOLOGY_SYSTEM


def slice_id(uuid: str, n: int) -> str:
    return f"{uuid}{SLICE_SEP}{n}"


def parse_device_id(device_id: str) -> tuple[str, int | None]:
    """'<uuid>' -> (uuid, None); '<uuid>::<n>' -> (uuid, n). Raises ValueError on garbage."""
    uuid, sep, n = device_id.partition(SLICE_SEP)
    if not uuid:
        raise ValueError(device_id)
    if not sep:
        return uuid, None
    if not n.isdigit():
        raise ValueError(device_id)
    return uuid, int(n)
