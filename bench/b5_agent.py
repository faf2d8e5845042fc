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
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common import Profile, Result, log
from plugin import nvml
from plugin.agent.attribution import Attributor
from plugin.agent.collector import Collector
from plugin.agent.metrics import AgentMetrics
from plugin.agent.runner import Agent
from plugin.agent.sender import SampleBuffer
from plugin.simnvml import SimNvml, default_gpus

GPUS = 8
CALL_COST_S = 100e-6
POLLS = {"ci": 200, "full": 1000}
SMI_RUNS = {"ci": 20, "full": 60}
STANDIN = f"""
from plugin.simnvml import SimNvml, default_gpus
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


def _bare_poll(lib: nvml.NvmlLib, handles: list[Any]) -> list[tuple[Any, ...]]:
    out = []
    for h in handles:
        out.append(
            (
                lib.nvmlDeviceGetUtilizationRates(h),
                lib.nvmlDeviceGetMemoryInfo(h),
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


def _measure(lib: nvml.NvmlLib, proc_root: Path, profile: Profile, real: bool) -> tuple[float, float, float]:
    collector = Collector(lib, Attributor(proc_root, None))
    agent = Agent(
        collector, SampleBuffer(100_000), None, AgentMetrics("bench", collector.names), interval_s=1.0
    )
    n = POLLS[profile]
    log(f"B5: {n} polls of {len(collector.handles)} GPUs, agent vs bare loop")
    ours = _cpu_ms_per_call(agent.poll_once, n)
    bare = _cpu_ms_per_call(lambda: _bare_poll(lib, collector.handles), n)
    log(f"B5: {'nvidia-smi' if real else 'nvidia-smi stand-in'}")
    return ours, bare, _standin_cpu_ms(SMI_RUNS[profile], real)


def run(profile: Profile) -> Iterator[Result]:
    real = os.environ.get("GPUPORTAL_B5_BACKEND") == "real"
    root = Path(tempfile.mkdtemp(prefix="b5-"))
    try:
        lib = nvml.load_real() if real else _sim(root / "proc")
        ours, bare, smi = _measure(lib, Path("/proc") if real else root / "proc", profile, real)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    backend = "real" if real else "sim"
    yield Result(
        "B5",
        profile,
        backend,
        "cpu_ms_per_poll_vs_bare_nvml_loop",
        ours,
        bare,
        "<= 1.2x the bare loop",
        ours <= 1.2 * bare,
    )
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
