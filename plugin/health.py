"""GPU health from NVML events, with a written recovery rule.

Rule (docs/plugin.md "Health"): a GPU is unhealthy while
  * NVML itself fails (any call other than a wait timeout): every GPU, fail closed;
  * a critical event hit it less than `recovery_s` ago (critical = any XID except the application
    XIDs 13/31/43/45/68/109, or an ECC double-bit error), or its last probe failed;
  * it raised XID 79 (fallen off the bus) at any time since the plugin started.
It turns healthy again after `recovery_s` with no new critical event and a passing probe. While NVML
is failing every GPU's clock is re-armed, so recovery after an outage also waits one clean interval.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from plugin import nvml
from plugin.nvml import NvmlLib

log = logging.getLogger(__name__)

APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})  # the job's fault, not the GPU's (upstream list)
FATAL_XIDS = frozenset({79})  # GPU has fallen off the bus: needs a reset, never self-heals
WAIT_MS = 200


class HealthRule:
    """Pure bookkeeping for the rule above; the clock is passed in so tests need no sleeping."""

    def __init__(self, uuids: list[str], *, recovery_s: float) -> None:
        self.uuids = list(uuids)
        self.recovery_s = recovery_s
        self._last_critical: dict[str, tuple[float, str]] = {}
        self._fatal: dict[str, str] = {}
        self._nvml_error: str | None = None

    def on_xid(self, uuid: str, xid: int, now: float) -> bool:
        if xid in APPLICATION_XIDS:
            log.info("GPU %s: application XID %d ignored", uuid, xid)
            return False
        if xid in FATAL_XIDS:
            self._fatal[uuid] = f"XID {xid}"
        self.on_critical(uuid, f"XID {xid}", now)
        return True

    def on_critical(self, uuid: str, reason: str, now: float) -> None:
        log.warning("GPU %s: critical event %s", uuid, reason)
        self._last_critical[uuid] = (now, reason)

    def on_nvml_failure(self, reason: str, now: float) -> None:
        if self._nvml_error is None:
            log.error("NVML failed (%s): reporting every GPU unhealthy", reason)
        self._nvml_error = reason
        for uuid in self.uuids:
            self._last_critical[uuid] = (now, f"NVML failure: {reason}")

    def on_nvml_ok(self) -> None:
        self._nvml_error = None

    def status(self, now: float) -> dict[str, str | None]:
        """uuid -> None when healthy, else the reason."""
        out: dict[str, str | None] = {}
        for uuid in self.uuids:
            at, reason = self._last_critical.get(uuid, (None, ""))
            if self._nvml_error is not None:
                out[uuid] = f"NVML failure: {self._nvml_error}"
            elif uuid in self._fatal:
                out[uuid] = self._fatal[uuid]
            elif at is not None and now - at < self.recovery_s:
                out[uuid] = reason
            else:
                out[uuid] = None
        return out


class HealthMonitor:
    """Owns the NVML event set; publishes the rule's verdict after every event or wait timeout."""

    def __init__(
        self,
        lib: NvmlLib,
        uuids: list[str],
        publish: Callable[[dict[str, str | None]], None],
        *,
        recovery_s: float = 300.0,
        probe_interval_s: float = 1.0,
    ) -> None:
        self.lib = lib
        self.rule = HealthRule(uuids, recovery_s=recovery_s)
        self.publish = publish
        self.probe_interval_s = probe_interval_s
        self._set: Any = None
        self._last_probe = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="health", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step()

    def step(self) -> None:
        """One wait on the event set (<= WAIT_MS), then a probe when due, then publish."""
        now = time.monotonic()
        try:
            if self._set is None:
                self._set = self._register()
            self._handle(self.lib.nvmlEventSetWait_v2(self._set, WAIT_MS))
        except nvml.NVMLError as exc:
            if nvml.error_code(exc) != nvml.ERROR_TIMEOUT:
                self._fail(exc, now)
        if time.monotonic() - self._last_probe >= self.probe_interval_s:
            self._probe()
        self.publish(self.rule.status(time.monotonic()))

    def _fail(self, exc: BaseException, now: float) -> None:
        self.rule.on_nvml_failure(nvml.error_text(exc), now)
        self._drop_set()
        self._stop.wait(WAIT_MS / 1000)  # no hot loop while the driver is gone

    def _register(self) -> Any:
        event_set = self.lib.nvmlEventSetCreate()
        for index in range(self.lib.nvmlDeviceGetCount()):
            handle = self.lib.nvmlDeviceGetHandleByIndex(index)
            try:
                self.lib.nvmlDeviceRegisterEvents(handle, nvml.EVENT_XID | nvml.EVENT_DBE, event_set)
            except nvml.NVMLError as exc:
                if not nvml.is_not_supported(exc):
                    raise
                log.warning("GPU %d: NVML events not supported; health from probes only", index)
        return event_set

    def _drop_set(self) -> None:
        if self._set is not None:
            # The library is failing anyway; a new set is made once it is back.
            with contextlib.suppress(nvml.NVMLError):
                self.lib.nvmlEventSetFree(self._set)
            self._set = None

    def _handle(self, event: Any) -> None:
        uuid = self.lib.nvmlDeviceGetUUID(event.device)
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        now = time.monotonic()
        if event.eventType & nvml.EVENT_DBE:
            self.rule.on_critical(uuid, "ECC double-bit error", now)
        if event.eventType & nvml.EVENT_XID:
            self.rule.on_xid(uuid, int(event.eventData), now)

    def _probe(self) -> None:
        """A cheap query per GPU: catches a lost GPU (or a dead driver) that raises no event."""
        self._last_probe = time.monotonic()
        try:
            count = self.lib.nvmlDeviceGetCount()
            for index in range(count):
                self._probe_one(index)
        except nvml.NVMLError as exc:
            self.rule.on_nvml_failure(nvml.error_text(exc), self._last_probe)
            self._drop_set()
            return
        self.rule.on_nvml_ok()

    def _probe_one(self, index: int) -> None:
        handle = self.lib.nvmlDeviceGetHandleByIndex(index)
        uuid = self.lib.nvmlDeviceGetUUID(handle)
        try:
            self.lib.nvmlDeviceGetMemoryInfo(handle)
        except nvml.NVMLError as exc:
            self.rule.on_critical(str(uuid), f"probe failed: {nvml.error_text(exc)}", self._last_probe)
