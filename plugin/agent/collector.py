"""One poll = one GpuSample per GPU, read through the NVML Protocol (real or simulated).

Cost matters (the agent must stay within 1.2x of a bare NVML polling loop): handles are resolved
once, fields a card does not support (ECC on GeForce) are not asked again, and attribution work
happens only for new processes.
XIDs arrive on a separate event thread and are reported once, in the next sample of that GPU.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from plugin import nvml
from plugin.agent.attribution import Attributor
from plugin.contract import GpuSample
from plugin.nvml import NvmlLib

log = logging.getLogger(__name__)


class UtcClock:
    """RFC 3339 UTC with milliseconds ("2026-11-30T12:00:00.123Z"), paid on every poll: the date and
    minute are formatted once a minute, the rest is two numbers (a quarter of datetime's cost)."""

    def __init__(self) -> None:
        self._minute: tuple[int, str] = (-1, "")  # one tuple: a reader never sees half an update

    def now(self) -> str:
        sec, ms = divmod(time.time_ns() // 1_000_000, 1000)
        minute, second = divmod(sec, 60)
        if self._minute[0] != minute:
            self._minute = (minute, time.strftime("%Y-%m-%dT%H:%M:", time.gmtime(sec)))
        return f"{self._minute[1]}{second:02d}.{ms:03d}Z"


class Collector:
    def __init__(self, lib: NvmlLib, attributor: Attributor) -> None:
        self.lib = lib
        self.attributor = attributor
        self.handles: list[Any] = [lib.nvmlDeviceGetHandleByIndex(i) for i in range(lib.nvmlDeviceGetCount())]
        self.uuids = [_s(lib.nvmlDeviceGetUUID(h)) for h in self.handles]
        self.names = [_s(lib.nvmlDeviceGetName(h)) for h in self.handles]
        self._no_ecc: set[int] = set()
        self._mem_version: list[int | None] = [nvml.MEMORY_V2] * len(self.handles)  # None: v1
        self._xids: dict[str, int] = {}
        self._lock = threading.Lock()
        self.errors = 0
        self.clock = UtcClock()

    def poll(self) -> list[GpuSample[str]]:
        ts = self.clock.now()
        samples: list[GpuSample[str]] = []
        procs_of: list[list[Any]] = []
        for i, h in enumerate(self.handles):
            try:
                sample, procs = self._read(ts, i, h)
            except nvml.NVMLError as exc:
                self.errors += 1  # one bad GPU must not cost the others their sample
                log.warning("GPU %s: NVML read failed: %s", self.uuids[i], nvml.error_text(exc))
                continue
            samples.append(sample)
            procs_of.append(procs)
        pids = {p.pid for procs in procs_of for p in procs}
        self.attributor.begin_poll(pids)
        if pids:
            attribute = self.attributor.attribute
            for sample, procs in zip(samples, procs_of, strict=True):
                uuid = sample.gpu_uuid
                sample.processes = [attribute(uuid, p.pid, _mib(p.usedGpuMemory)) for p in procs]
        return samples

    def _read(self, ts: str, i: int, h: Any) -> tuple[GpuSample[str], list[Any]]:
        """One GPU's fields, straight into its sample: pynvml already answers Python ints."""
        lib = self.lib
        uuid = self.uuids[i]
        util = lib.nvmlDeviceGetUtilizationRates(h)
        try:
            mem = lib.nvmlDeviceGetMemoryInfo(h, self._mem_version[i])
        except nvml.NVMLError as exc:
            mem = self._memory_v1(i, h, exc)
        sample = GpuSample(
            gpu_uuid=uuid,
            ts=ts,
            util_gpu=util.gpu,
            util_mem=util.memory,
            mem_used_mib=mem.used >> 20,
            mem_total_mib=mem.total >> 20,
            temp_c=float(lib.nvmlDeviceGetTemperature(h, nvml.TEMPERATURE_GPU)),
            power_w=lib.nvmlDeviceGetPowerUsage(h) / 1000,  # mW: already 3 decimals at most
            sm_clock_mhz=lib.nvmlDeviceGetClockInfo(h, nvml.CLOCK_SM),
            mem_clock_mhz=lib.nvmlDeviceGetClockInfo(h, nvml.CLOCK_MEM),
            ecc_sbe=0,
            ecc_dbe=0,
            xid=self._take_xid(uuid) if self._xids else None,  # read unlocked: a miss waits one poll
            processes=[],
        )
        if i not in self._no_ecc:
            sample.ecc_sbe, sample.ecc_dbe = self._ecc(i, h)
        return sample, lib.nvmlDeviceGetComputeRunningProcesses(h)

    def _memory_v1(self, i: int, h: Any, exc: nvml.NVMLError) -> Any:
        """v2 is asked first (`used` as nvidia-smi shows it, without reserved memory); else v1."""
        if self._mem_version[i] is None or not nvml.is_missing(exc):
            raise exc
        self._mem_version[i] = None
        return self.lib.nvmlDeviceGetMemoryInfo(h)

    def _ecc(self, i: int, h: Any) -> tuple[int, int]:
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

    def _take_xid(self, uuid: str) -> int | None:
        with self._lock:
            return self._xids.pop(uuid, None)

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
