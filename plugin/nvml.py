"""The GPU access layer: the subset of nvidia-ml-py (`pynvml`) the node side uses, as a Protocol.

Two implementations satisfy it: the real `pynvml` module (see `load_real`) and `plugin.sim.nvml.SimNvml`.
Because the simulation mimics pynvml's own names, return shapes and `NVMLError` codes, every line of
code above this layer (devices, health, agent) runs unchanged against real NVML; only the lib differs.
"""

from __future__ import annotations

from typing import Any, Protocol

import pynvml

NVMLError = pynvml.NVMLError
ERROR_TIMEOUT: int = pynvml.NVML_ERROR_TIMEOUT
ERROR_NOT_SUPPORTED: int = pynvml.NVML_ERROR_NOT_SUPPORTED
ERROR_UNKNOWN: int = pynvml.NVML_ERROR_UNKNOWN
ERROR_GPU_IS_LOST: int = pynvml.NVML_ERROR_GPU_IS_LOST
ERROR_FUNCTION_NOT_FOUND: int = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
# The v2 memory struct: `used` without the driver's reserved memory, as nvidia-smi has shown it since R510
# (v1's `used` includes it: about 600 MiB more on an H200 with driver 580).
MEMORY_V2: int = pynvml.nvmlMemory_v2
EVENT_XID: int = pynvml.nvmlEventTypeXidCriticalError
EVENT_DBE: int = pynvml.nvmlEventTypeDoubleBitEccError
TEMPERATURE_GPU: int = pynvml.NVML_TEMPERATURE_GPU
CLOCK_SM: int = pynvml.NVML_CLOCK_SM
CLOCK_MEM: int = pynvml.NVML_CLOCK_MEM
ECC_CORRECTED: int = pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
ECC_UNCORRECTED: int = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
ECC_VOLATILE: int = pynvml.NVML_VOLATILE_ECC
P2P_NVLINK: int = pynvml.NVML_P2P_CAPS_INDEX_NVLINK
P2P_OK: int = pynvml.NVML_P2P_STATUS_OK
# Link "distance" between two GPUs, lower is closer; NVLink beats every PCIe level.
LINK_NVLINK = -10
TOPOLOGY_SYSTEM: int = pynvml.NVML_TOPOLOGY_SYSTEM


class NvmlLib(Protocol):
    """The pynvml functions we call. Handles and event sets are opaque (`Any`), as in pynvml."""

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> str: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetUUID(self, handle: Any) -> str: ...
    def nvmlDeviceGetName(self, handle: Any) -> str: ...
    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int: ...
    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any: ...
    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any: ...
    def nvmlDeviceGetNumaNodeId(self, handle: Any) -> int: ...
    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any: ...
    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int: ...
    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int: ...
    def nvmlDeviceGetClockInfo(self, handle: Any, clock: int) -> int: ...
    def nvmlDeviceGetTotalEccErrors(self, handle: Any, error_type: int, counter_type: int) -> int: ...
    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]: ...
    def nvmlDeviceGetTopologyCommonAncestor(self, a: Any, b: Any) -> int: ...
    def nvmlDeviceGetP2PStatus(self, a: Any, b: Any, index: int) -> int: ...
    def nvmlEventSetCreate(self) -> Any: ...
    def nvmlDeviceRegisterEvents(self, handle: Any, event_types: int, event_set: Any) -> None: ...
    def nvmlEventSetWait_v2(self, event_set: Any, timeout_ms: int) -> Any: ...
    def nvmlEventSetFree(self, event_set: Any) -> None: ...


class NvmlUnavailable(RuntimeError):
    """No NVIDIA driver / libnvidia-ml on this machine."""


def load_real() -> NvmlLib:
    """Initialise the real NVML and return the pynvml module as the lib."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"no NVIDIA GPU / NVML not found: {error_text(exc)}") from exc
    lib: NvmlLib = pynvml
    return lib


def error_code(exc: BaseException) -> int:
    return int(getattr(exc, "value", ERROR_UNKNOWN))


def error_text(exc: BaseException) -> str:
    """pynvml's __str__ may call into the library; keep a message even when it is absent."""
    code = error_code(exc)
    return str(pynvml.NVMLError._errcode_to_string.get(code, f"NVML error {code}"))


def is_not_supported(exc: BaseException) -> bool:
    return isinstance(exc, pynvml.NVMLError) and error_code(exc) == ERROR_NOT_SUPPORTED


def is_missing(exc: BaseException) -> bool:
    """The call exists in pynvml but not in this driver's library, or not for this card."""
    return is_not_supported(exc) or (
        isinstance(exc, pynvml.NVMLError) and error_code(exc) == ERROR_FUNCTION_NOT_FOUND
    )
