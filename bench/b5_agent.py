"""B5: node agent cost per poll on 8 simulated GPUs, against a bare NVML polling loop over the same
fields and against an `nvidia-smi --query-gpu` STAND-IN run every poll.

backend "real" (GPUPORTAL_B5_BACKEND=real, on a GPU machine): the real NVML, every GPU it has, and the
real `nvidia-smi --query-gpu` run once per poll.

backend "sim" (default): NVML is simulated with a busy-wait of CALL_COST_S per call (real NVML calls
are ioctls that cost CPU). There is no nvidia-smi here: the stand-in is a fresh Python process per poll that
initialises the simulated NVML and queries the same fields, i.e. a process spawn plus the same calls,
which is what `nvidia-smi --query-gpu=... --format=csv` does each time it is run. CPU time (user+sys)
is measured, not wall time.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from bench.common import Profile, Result, log
from plugin import nvml
from plugin.agent.attribution import Attributor
from plugin.agent.collector import Collector
from plugin.agent.metrics import AgentMetrics
from plugin.agent.runner import Agent
from plugin.agent.sender import SampleBuffer
from plugin.sim.nvml import SimNvml, default_gpus

GPUS = 8
CALL_COST_S = 100e-6
POLLS = {"ci": 200, "full": 1000}
# A real NVML poll of one GPU is ~25 us: 200 of them are 5 ms of CPU, too few to time against noise.
REAL_POLLS = {"ci": 5000, "full": 20000}
ROUNDS = 5  # agent and bare loop take turns, and each keeps its median round: drift hits both alike
SMI_RUNS = {"ci": 20, "full": 60}
STANDIN = f"""
from plugin.sim.nvml import SimNvml, default_gpus
from plugin import nvml
lib = SimNvml(default_gpus({GPUS}), call_cost_s={CALL_COST_S})
lib.nvmlInit()
rows = []
for i in range(lib.nvmlDeviceGetCount()):
    h = lib.nvmlDeviceGetHandleByIndex(i)
    u = lib.nvmlDeviceGetUtilizationRates(h)
    m = lib.nvmlDeviceGetMemoryInfo(h)
    rows.append(", ".join(str(v) for v in (lib.nvmlDeviceGetUUID(h), u.gpu, u.memory, m.used >> 20,
        m.total >> 20,
        lib.nvmlDeviceGetTemperature(h, nvml.TEMPERATURE_GPU), lib.nvmlDeviceGetPowerUsage(h) / 1000,
        lib.nvmlDeviceGetClockInfo(h, nvml.CLOCK_SM), lib.nvmlDeviceGetClockInfo(h, nvml.CLOCK_MEM),
        lib.nvmlDeviceGetTotalEccErrors(h, nvml.ECC_CORRECTED, nvml.ECC_VOLATILE),
        lib.nvmlDeviceGetTotalEccErrors(h, nvml.ECC_UNCORRECTED, nvml.ECC_VOLATILE))))
print("\\n".join(rows))
"""


def _sim(proc_root: Path) -> SimNvml:
    """8 GPUs, two processes each, with cgroup files so attribution does its real work."""
    sim = SimNvml(default_gpus(GPUS), call_cost_s=CALL_COST_S)
    for i, gpu in enumerate(sim.gpus):
        for pid in (1000 + 2 * i, 1001 + 2 * i):
            sim.add_process(gpu.uuid, pid, 1024)
            (proc_root / str(pid)).mkdir(parents=True)
            (proc_root / str(pid) / "cgroup").write_text(
                f"0::/kubepods/pod1b4e28ba-2fa1-11d2-883f-0016d3cca4{pid % 100:02d}/c\n"
            )
            (proc_root / str(pid) / "environ").write_bytes(
                b"GPU_PORTAL_DEVICE_IDS=" + gpu.uuid.encode() + b"\0"
            )
    return sim


def _memory_version(lib: nvml.NvmlLib, handle: Any) -> int | None:
    """The struct the agent reads (v2, as nvidia-smi), so both loops ask NVML the same questions."""
    try:
        lib.nvmlDeviceGetMemoryInfo(handle, nvml.MEMORY_V2)
    except nvml.NVMLError as exc:
        if not nvml.is_missing(exc):
            raise
        return None
    return nvml.MEMORY_V2


def _bare_poll(lib: nvml.NvmlLib, handles: list[Any], mem_version: int | None) -> list[tuple[Any, ...]]:
    out = []
    for h in handles:
        out.append(
            (
                lib.nvmlDeviceGetUtilizationRates(h),
                lib.nvmlDeviceGetMemoryInfo(h, mem_version),
                lib.nvmlDeviceGetTemperature(h, nvml.TEMPERATURE_GPU),
                lib.nvmlDeviceGetPowerUsage(h),
                lib.nvmlDeviceGetClockInfo(h, nvml.CLOCK_SM),
                lib.nvmlDeviceGetClockInfo(h, nvml.CLOCK_MEM),
                lib.nvmlDeviceGetTotalEccErrors(h, nvml.ECC_CORRECTED, nvml.ECC_VOLATILE),
                lib.nvmlDeviceGetTotalEccErrors(h, nvml.ECC_UNCORRECTED, nvml.ECC_VOLATILE),
                lib.nvmlDeviceGetComputeRunningProcesses(h),
            )
        )
    return out


def _cpu_ms_per_call(fn: Any, n: int) -> float:
    fn()  # warm caches (attribution, metric children)
    t0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t0) * 1e3 / n


SMI_QUERY = (
    "uuid,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,"
    "clocks.sm,clocks.mem,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total"
)


def _standin_cpu_ms(runs: int, real: bool) -> float:
    """Child CPU (user+sys) plus the parent's spawn cost, per run."""
    argv = (
        ["nvidia-smi", f"--query-gpu={SMI_QUERY}", "--format=csv,noheader"]
        if real
        else [sys.executable, "-c", STANDIN]
    )
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time()
    for _ in range(runs):
        subprocess.run(argv, check=True, capture_output=True)
    after, t1 = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time()
    child = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return (child + t1 - t0) * 1e3 / runs


class _EightOf:
    """The real GPUs read in turn until there are GPUS of them: the benchmark's size on a machine with
    fewer cards. Every read is a real NVML call; only the count and the handles are repeated."""

    def __init__(self, lib: nvml.NvmlLib) -> None:
        self._lib = lib
        self._count = lib.nvmlDeviceGetCount()

    def nvmlDeviceGetCount(self) -> int:
        return GPUS

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        return self._lib.nvmlDeviceGetHandleByIndex(index % self._count)

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._lib, name)
        setattr(self, name, found)  # later lookups cost what a module attribute costs, in both loops
        return found


def _agent_vs_bare(lib: nvml.NvmlLib, proc_root: Path, polls: int) -> tuple[float, float]:
    collector = Collector(lib, Attributor(proc_root, None))
    agent = Agent(
        collector, SampleBuffer(100_000), None, AgentMetrics("bench", collector.names), interval_s=1.0
    )
    log(f"B5: {polls} polls of {len(collector.handles)} GPUs, agent vs bare loop, {ROUNDS} turns each")
    version = _memory_version(lib, collector.handles[0])
    rounds: list[tuple[float, float]] = [
        (
            _cpu_ms_per_call(agent.poll_once, polls // ROUNDS),
            _cpu_ms_per_call(lambda: _bare_poll(lib, collector.handles, version), polls // ROUNDS),
        )
        for _ in range(ROUNDS)
    ]
    ours, bare = (statistics.median(r[k] for r in rounds) for k in (0, 1))
    return ours, bare


def _vs_bare(ours: float, bare: float, profile: Profile, backend: str, size: str = "") -> Result:
    metric = "cpu_ms_per_poll_vs_bare_nvml_loop"
    return Result(
        "B5", profile, backend, metric, ours, bare, "<= 1.2x the bare loop", ours <= 1.2 * bare, size
    )


def _real(profile: Profile) -> Iterator[Result]:
    lib = nvml.load_real()
    polls, gpus = REAL_POLLS[profile], lib.nvmlDeviceGetCount()
    ours, bare = _agent_vs_bare(lib, Path("/proc"), polls)
    yield _vs_bare(ours, bare, profile, "real", f"gpus={gpus}")
    if gpus < GPUS:
        eight = cast("nvml.NvmlLib", _EightOf(lib))
        yield _vs_bare(
            *_agent_vs_bare(eight, Path("/proc"), polls), profile, "real", f"gpus={GPUS} (read in turn)"
        )
    log("B5: nvidia-smi")
    yield from _smi(ours, _standin_cpu_ms(SMI_RUNS[profile], True), profile, "real")


def _simulated(profile: Profile) -> Iterator[Result]:
    root = Path(tempfile.mkdtemp(prefix="b5-"))
    try:
        ours, bare = _agent_vs_bare(_sim(root / "proc"), root / "proc", POLLS[profile])
        log("B5: nvidia-smi stand-in")
        smi = _standin_cpu_ms(SMI_RUNS[profile], False)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    yield _vs_bare(ours, bare, profile, "sim")
    yield from _smi(ours, smi, profile, "sim")


def run(profile: Profile) -> Iterator[Result]:
    real = os.environ.get("GPUPORTAL_B5_BACKEND") == "real"
    yield from (_real if real else _simulated)(profile)


def _smi(ours: float, smi: float, profile: Profile, backend: str) -> Iterator[Result]:
    real = backend == "real"
    smi_what = "nvidia-smi --query-gpu" if real else "stand-in: python process + simulated NVML"
    yield Result(
        "B5",
        profile,
        backend,
        "cpu_ms_per_poll_vs_nvidia_smi_standin",
        ours,
        smi,
        f">= 10x cheaper than nvidia-smi ({smi_what})",
        smi >= 10 * ours,
    )
    pct = ours / 1e3 * 100  # at 1 Hz: CPU seconds per second, as % of one core
    yield Result("B5", profile, backend, "core_percent_at_1hz", pct, 1.0, "<= 1 % of a core", pct <= 1.0)
