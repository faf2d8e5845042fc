"""A simulated NVML with pynvml's names, shapes and error codes (see `plugin.nvml.NvmlLib`).

Used by the tests, the demo and the benchmarks. Every call costs `call_cost_s` of CPU (a busy wait,
because real NVML calls are ioctls that burn CPU, and the agent's CPU cost per poll is what the
benchmarks measure). Faults are injected with `inject_xid`, `inject_dbe`, `fail` / `recover`;
utilisation follows `note_allocation`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

import pynvml

from plugin import nvml

DEFAULT_MODEL = "NVIDIA GeForce RTX 5090"
DEFAULT_MEMORY_MIB = 32 * 1024
BASE_USED_MIB = 300  # driver/context reservation a real idle card reports


@dataclass
class SimGpu:
    index: int
    uuid: str
    name: str = DEFAULT_MODEL
    memory_mib: int = DEFAULT_MEMORY_MIB
    pcie_switch: int = 0
    numa_node: int = 0
    load: float = 0.0
    processes: dict[int, int] = field(default_factory=dict)  # pid -> MiB
    sbe: int = 0
    dbe: int = 0
    failed_code: int | None = None
    reserved_mib: int = 0  # the driver's reservation: in v1's `used`, not in v2's


@dataclass(frozen=True)
class SimHandle:
    index: int


@dataclass(frozen=True)
class SimMemory:
    total: int
    used: int
    free: int
    reserved: int = 0


@dataclass(frozen=True)
class SimUtil:
    gpu: int
    memory: int


@dataclass(frozen=True)
class SimPci:
    busId: str


@dataclass(frozen=True)
class SimProcess:
    pid: int
    usedGpuMemory: int


@dataclass(frozen=True)
class SimEvent:
    device: SimHandle
    eventType: int
    eventData: int


@dataclass(eq=False)  # identity semantics: two empty sets are still different sets
class _EventSet:
    handles: dict[int, int] = field(default_factory=dict)  # index -> mask
    queue: deque[SimEvent] = field(default_factory=deque)


def sim_uuid(index: int, seed: str = "0") -> str:
    """Stable, realistic-looking UUIDs: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (40 chars)."""
    h = f"{index:04x}{int.from_bytes(seed.encode()[:4].ljust(4, b'0'), 'big'):08x}"
    return f"GPU-5a90{h[:4]}-{h[4:8]}-4{h[8:11]}-8{index:03x}-{index:04x}{h[:8]}"


def default_gpus(count: int = 4, seed: str = "0", memory_mib: int = DEFAULT_MEMORY_MIB) -> list[SimGpu]:
    """Pairs of GPUs share a PCIe switch; the first half of the cards sit on NUMA node 0."""
    half = max(1, count // 2)
    return [
        SimGpu(i, sim_uuid(i, seed), memory_mib=memory_mib, pcie_switch=i // 2, numa_node=i // half)
        for i in range(count)
    ]


class SimNvml:
    """One simulated node. Thread-safe: the plugin's health loop and gRPC threads share it."""

    def __init__(
        self,
        gpus: list[SimGpu] | None = None,
        *,
        nvlink_pairs: set[frozenset[int]] | None = None,
        call_cost_s: float = 100e-6,
    ) -> None:
        self.gpus = gpus if gpus is not None else default_gpus()
        self.nvlink_pairs = nvlink_pairs or set()
        self.call_cost_s = call_cost_s
        self.calls = 0
        self._global_fail: int | None = None
        self._sets: list[_EventSet] = []
        self._cond = threading.Condition()

    # -- fault and load injection (not part of pynvml) --------------------------------------------
    def by_uuid(self, uuid: str) -> SimGpu:
        return next(g for g in self.gpus if g.uuid == uuid)

    def inject_xid(self, uuid: str, xid: int) -> None:
        self._post(self.by_uuid(uuid).index, nvml.EVENT_XID, xid)

    def inject_dbe(self, uuid: str) -> None:
        gpu = self.by_uuid(uuid)
        gpu.dbe += 1
        self._post(gpu.index, nvml.EVENT_DBE, 0)

    def fail(self, code: int = nvml.ERROR_UNKNOWN) -> None:
        """Every call fails from now on (driver crash, library gone)."""
        with self._cond:
            self._global_fail = code
            self._cond.notify_all()

    def recover(self) -> None:
        with self._cond:
            self._global_fail = None
            self._cond.notify_all()

    def note_allocation(self, uuid: str, fraction: float) -> None:
        """Utilisation follows allocations: a container given k/N of a GPU keeps ~k/N of it busy."""
        gpu = self.by_uuid(uuid)
        gpu.load = max(0.0, min(1.0, gpu.load + fraction))

    def add_process(self, uuid: str, pid: int, mem_mib: int) -> None:
        self.by_uuid(uuid).processes[pid] = mem_mib

    def _post(self, index: int, event_type: int, data: int) -> None:
        with self._cond:
            for es in self._sets:
                if es.handles.get(index, 0) & event_type:
                    es.queue.append(SimEvent(SimHandle(index), event_type, data))
            self._cond.notify_all()

    def _call(self, handle: SimHandle | None = None) -> SimGpu | None:
        """Charge the per-call cost and raise the injected error, as the real library would."""
        self.calls += 1
        if self.call_cost_s > 0:
            end = time.perf_counter() + self.call_cost_s
            while time.perf_counter() < end:
                pass
        if self._global_fail is not None:
            raise pynvml.NVMLError(self._global_fail)
        if handle is None:
            return None
        gpu = self.gpus[handle.index]
        if gpu.failed_code is not None:
            raise pynvml.NVMLError(gpu.failed_code)
        return gpu

    def _gpu(self, handle: SimHandle) -> SimGpu:
        gpu = self._call(handle)
        if gpu is None:  # only when called without a handle, which _gpu never does
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpu

    # -- the pynvml subset ------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self._call()

    def nvmlShutdown(self) -> None:
        pass

    def nvmlSystemGetDriverVersion(self) -> str:
        self._call()
        return "575.00-sim"

    def nvmlDeviceGetCount(self) -> int:
        self._call()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimHandle:
        self._call()
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return SimHandle(index)

    def nvmlDeviceGetUUID(self, handle: SimHandle) -> str:
        return self._gpu(handle).uuid

    def nvmlDeviceGetName(self, handle: SimHandle) -> str:
        return self._gpu(handle).name

    def nvmlDeviceGetMinorNumber(self, handle: SimHandle) -> int:
        return self._gpu(handle).index

    def nvmlDeviceGetMemoryInfo(self, handle: SimHandle, version: int | None = None) -> SimMemory:
        gpu = self._gpu(handle)
        total = gpu.memory_mib << 20
        used = min(total, (BASE_USED_MIB + sum(gpu.processes.values())) << 20)
        reserved = gpu.reserved_mib << 20
        if version is None:  # v1, as the real library: the reservation counts as used
            return SimMemory(
                total=total, used=min(total, used + reserved), free=max(0, total - used - reserved)
            )
        return SimMemory(total=total, used=used, free=max(0, total - used - reserved), reserved=reserved)

    def nvmlDeviceGetPciInfo(self, handle: SimHandle) -> SimPci:
        return SimPci(busId=f"00000000:{0x18 + 0x10 * self._gpu(handle).index:02X}:00.0")

    def nvmlDeviceGetNumaNodeId(self, handle: SimHandle) -> int:
        return self._gpu(handle).numa_node

    def nvmlDeviceGetUtilizationRates(self, handle: SimHandle) -> SimUtil:
        gpu = self._gpu(handle)
        util = round(100 * gpu.load * 0.9)
        return SimUtil(gpu=util, memory=util // 2)

    def nvmlDeviceGetTemperature(self, handle: SimHandle, sensor: int) -> int:
        return 30 + round(45 * self._gpu(handle).load)

    def nvmlDeviceGetPowerUsage(self, handle: SimHandle) -> int:
        return 25_000 + round(550_000 * self._gpu(handle).load)  # milliwatts, 575 W board

    def nvmlDeviceGetClockInfo(self, handle: SimHandle, clock: int) -> int:
        gpu = self._gpu(handle)
        if clock == nvml.CLOCK_MEM:
            return 14_001 if gpu.load else 405
        return 2_407 if gpu.load else 210

    def nvmlDeviceGetTotalEccErrors(self, handle: SimHandle, error_type: int, counter_type: int) -> int:
        gpu = self._gpu(handle)
        return gpu.dbe if error_type == nvml.ECC_UNCORRECTED else gpu.sbe

    def nvmlDeviceGetComputeRunningProcesses(self, handle: SimHandle) -> list[SimProcess]:
        gpu = self._gpu(handle)
        return [SimProcess(pid, mib << 20) for pid, mib in sorted(gpu.processes.items())]

    def nvmlDeviceGetTopologyCommonAncestor(self, a: SimHandle, b: SimHandle) -> int:
        ga, gb = self._gpu(a), self._gpu(b)
        if ga.pcie_switch == gb.pcie_switch:
            return int(pynvml.NVML_TOPOLOGY_SINGLE)
        return int(pynvml.NVML_TOPOLOGY_NODE if ga.numa_node == gb.numa_node else pynvml.NVML_TOPOLOGY_SYSTEM)

    def nvmlDeviceGetP2PStatus(self, a: SimHandle, b: SimHandle, index: int) -> int:
        self._call()
        linked = frozenset((a.index, b.index)) in self.nvlink_pairs
        return (
            nvml.P2P_OK if linked and index == nvml.P2P_NVLINK else int(pynvml.NVML_P2P_STATUS_NOT_SUPPORTED)
        )

    def nvmlEventSetCreate(self) -> _EventSet:
        self._call()
        es = _EventSet()
        with self._cond:
            self._sets.append(es)
        return es

    def nvmlDeviceRegisterEvents(self, handle: SimHandle, event_types: int, event_set: _EventSet) -> None:
        self._gpu(handle)
        with self._cond:
            event_set.handles[handle.index] = event_set.handles.get(handle.index, 0) | event_types

    def nvmlEventSetWait_v2(self, event_set: _EventSet, timeout_ms: int) -> SimEvent:
        self._call()
        with self._cond:
            self._cond.wait_for(lambda: event_set.queue or self._global_fail is not None, timeout_ms / 1000)
            if self._global_fail is not None:
                raise pynvml.NVMLError(self._global_fail)
            if not event_set.queue:
                raise pynvml.NVMLError(nvml.ERROR_TIMEOUT)
            return event_set.queue.popleft()

    def nvmlEventSetFree(self, event_set: _EventSet) -> None:
        with self._cond:
            if event_set in self._sets:
                self._sets.remove(event_set)
