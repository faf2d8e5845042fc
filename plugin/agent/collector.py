"""One poll = one GpuSample per GPU, read through the NVML Protocol (real or simulated).

Cost matters (the agent must stay within 1.2x of a bare NVML polling loop): handles are resolved
once, fields a card does not support (ECC on GeForce) are not asked again, and attribution work
happens only for new processes.
XIDs arrive on a separate event thread and are reported once, in the next sample of that GPU.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

from plugin import nvml
from plugin.agent.attribution import Attributor
from plugin.contract import GpuSample
from plugin.nvml import NvmlLib

log = logging.getLogger(__name__)


def rfc3339_ms(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Collector:
    def __init__(self, lib: NvmlLib, attributor: Attributor) -> None:
        self.lib = lib
        self.attributor = attributor
        self.handles: list[Any] = [lib.nvmlDeviceGetHandleByIndex(i) for i in range(lib.nvmlDeviceGetCount())]
        self.uuids = [_s(lib.nvmlDeviceGetUUID(h)) for h in self.handles]
        self.names = [_s(lib.nvmlDeviceGetName(h)) for h in self.handles]
        self._no_ecc: set[int] = set()
        self._mem_v1: set[int] = set()
        self._xids: dict[str, int] = {}
        self._lock = threading.Lock()
        self.errors = 0

    def poll(self) -> list[GpuSample]:
        ts = rfc3339_ms(dt.datetime.now(dt.UTC))
        raw = []
        for i, h in enumerate(self.handles):
            try:
                raw.append((i, self._read(i, h), self.lib.nvmlDeviceGetComputeRunningProcesses(h)))
            except nvml.NVMLError as exc:
                self.errors += 1  # one bad GPU must not cost the others their sample
                log.warning("GPU %s: NVML read failed: %s", self.uuids[i], nvml.error_text(exc))
        self.attributor.begin_poll({p.pid for _, _, procs in raw for p in procs})
        return [self._sample(ts, i, fields, procs) for i, fields, procs in raw]

    def _read(self, i: int, h: Any) -> tuple[Any, Any, int, int, int, int, int, int]:
        lib = self.lib
        util = lib.nvmlDeviceGetUtilizationRates(h)
        mem = self._memory(i, h)
        temp = lib.nvmlDeviceGetTemperature(h, nvml.TEMPERATURE_GPU)
        power = lib.nvmlDeviceGetPowerUsage(h)
        sm = lib.nvmlDeviceGetClockInfo(h, nvml.CLOCK_SM)
        memclk = lib.nvmlDeviceGetClockInfo(h, nvml.CLOCK_MEM)
        sbe, dbe = self._ecc(i, h)
        return util, mem, temp, power, sm, memclk, sbe, dbe

    def _memory(self, i: int, h: Any) -> Any:
        """v2 where the driver has it, so `used` matches nvidia-smi (no reserved memory); else v1."""
        if i not in self._mem_v1:
            try:
                return self.lib.nvmlDeviceGetMemoryInfo(h, nvml.MEMORY_V2)
            except nvml.NVMLError as exc:
                if not nvml.is_missing(exc):
                    raise
                self._mem_v1.add(i)
        return self.lib.nvmlDeviceGetMemoryInfo(h)

    def _ecc(self, i: int, h: Any) -> tuple[int, int]:
        if i in self._no_ecc:
            return 0, 0
        try:
            return (
                self.lib.nvmlDeviceGetTotalEccErrors(h, nvml.ECC_CORRECTED, nvml.ECC_VOLATILE),
                self.lib.nvmlDeviceGetTotalEccErrors(h, nvml.ECC_UNCORRECTED, nvml.ECC_VOLATILE),
            )
        except nvml.NVMLError as exc:
            if not nvml.is_not_supported(exc):
                raise
            self._no_ecc.add(i)  # GeForce cards have no ECC: don't pay for the question every second
            return 0, 0

    def _sample(self, ts: str, i: int, fields: tuple[Any, ...], procs: list[Any]) -> GpuSample:
        util, mem, temp, power, sm, memclk, sbe, dbe = fields
        uuid = self.uuids[i]
        with self._lock:
            xid = self._xids.pop(uuid, None)
        return GpuSample(
            gpu_uuid=uuid,
            ts=ts,
            util_gpu=int(util.gpu),
            util_mem=int(util.memory),
            mem_used_mib=int(mem.used) >> 20,
            mem_total_mib=int(mem.total) >> 20,
            temp_c=float(temp),
            power_w=round(power / 1000.0, 3),
            sm_clock_mhz=int(sm),
            mem_clock_mhz=int(memclk),
            ecc_sbe=int(sbe),
            ecc_dbe=int(dbe),
            xid=xid,
            processes=[self.attributor.attribute(uuid, p.pid, _mib(p.usedGpuMemory)) for p in procs],
        )

    def note_xid(self, uuid: str, xid: int) -> None:
        with self._lock:
            self._xids[uuid] = xid


def _mib(value: int | None) -> int:
    return 0 if value is None else int(value) >> 20  # None: not available under some drivers / MIG


def _s(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


class XidWatcher:
    """Feeds every XID (application ones included: the portal shows them to the job's owner)."""

    def __init__(self, lib: NvmlLib, collector: Collector) -> None:
        self.lib = lib
        self.collector = collector
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="xid", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _register(self, handle: Any, event_set: Any) -> None:
        try:
            self.lib.nvmlDeviceRegisterEvents(handle, nvml.EVENT_XID, event_set)
        except nvml.NVMLError as exc:
            if not nvml.is_not_supported(exc):
                raise
            log.warning("XID events not supported on one GPU; its samples carry xid=null")

    def _run(self) -> None:
        event_set: Any = None
        while not self._stop.is_set():
            try:
                if event_set is None:
                    event_set = self.lib.nvmlEventSetCreate()
                    for h in self.collector.handles:
                        self._register(h, event_set)
                ev = self.lib.nvmlEventSetWait_v2(event_set, 500)
                self.collector.note_xid(_s(self.lib.nvmlDeviceGetUUID(ev.device)), int(ev.eventData))
            except nvml.NVMLError as exc:
                if nvml.error_code(exc) != nvml.ERROR_TIMEOUT:
                    event_set = None  # re-register once NVML answers again; no hot loop meanwhile
                    self._stop.wait(1.0)
