"""`python -m plugin.checks.gpureal` (make gpu-check-real): real-GPU checks that need the machine alone.

`make gpu-check` is safe on a shared machine; this one starts real CUDA work and a real MPS control
daemon, so it is for a GPU machine lent to us alone (docs/gpu-check.md):
1. Agent under load: a CUDA process holds memory and keeps the GPU busy; the agent lists its pid with
   the memory nvidia-smi gives it, and every field again agrees with nvidia-smi at load.
2. MPS for real: the supervisor starts `nvidia-cuda-mps-control -f` for GPU 0 in its own /dev/shm, the
   limit writer sets the tenant ceiling through the real control program, and CUDA clients with the
   environment our Allocate gives run through it; a client over its pinned-memory limit is refused,
   and so is one that raises its own limit above the ceiling.
3. The plugin daemon on the real MPS: a 2-slice container allocated through the test kubelet, and a
   CUDA client with its env and mounts, refused past its limit.
The CUDA clients use PyTorch (the GPU machine's image has it). Exit 0 all passed, 1 a mismatch, 2 no GPU.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc

from plugin import nvml
from plugin.agent.attribution import Attributor
from plugin.agent.collector import Collector
from plugin.checks.gpucheck import Report, check_agent, daemon_with_shared_gpu, smi
from plugin.devices import RESOURCE_SHARED, Gpu, discover
from plugin.mps import REAL_COMMAND, REAL_CONTROL, SHM_WRAPPER, MpsSupervisor
from plugin.mpslimits import Limit, LimitWriter

GIB = 1 << 30
# argv: GiB to allocate, seconds of matrix work. Prints ALLOCATED or REFUSED <error>, exits 3 when refused.
CLIENT = r"""
import sys, time, torch
gib, seconds = float(sys.argv[1]), float(sys.argv[2])
try:
    held = torch.empty(int(gib * (1 << 30)), dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
except (RuntimeError, torch.cuda.OutOfMemoryError) as exc:
    print("REFUSED", str(exc).splitlines()[0], flush=True)
    sys.exit(3)
print("ALLOCATED", flush=True)
a = torch.randn(4096, 4096, device="cuda")
end = time.monotonic() + seconds
while time.monotonic() < end:
    a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
print("DONE", flush=True)
"""


def start_client(
    gib: float, seconds: float, env: dict[str, str], wrap: list[str] | None = None
) -> subprocess.Popen[str]:
    argv = [*(wrap or []), sys.executable, "-c", CLIENT, str(gib), str(seconds)]
    return subprocess.Popen(
        argv, env=os.environ | env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def first_word(proc: subprocess.Popen[str], timeout_s: float = 120.0) -> str:
    """The client's first line (ALLOCATED / REFUSED ...), skipping library warnings."""
    if proc.stdout is None:
        raise ValueError("the client was started without a stdout pipe")
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            return f"EXITED {proc.wait()}"
        if line.startswith(("ALLOCATED", "REFUSED")):
            return line.strip()
    return "TIMEOUT"


def compute_apps() -> dict[int, int]:
    out = smi("--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits")
    rows = [r.split(", ") for r in out.splitlines() if r.strip()]
    return {int(pid): int(mem) for pid, mem in rows if mem.strip().isdigit()}


def check_agent_under_load(report: Report, lib: nvml.NvmlLib, uuid: str) -> None:
    proc = start_client(2.0, 25.0, {"CUDA_VISIBLE_DEVICES": uuid, "GPU_PORTAL_DEVICE_IDS": uuid})
    try:
        started = first_word(proc)
        report.check(started == "ALLOCATED", "a CUDA process holds 2 GiB", started)
        time.sleep(3.0)  # past NVML's utilisation window
        collector = Collector(lib, Attributor(Path("/proc"), None))
        utils, ours = [], {}
        for _ in range(5):
            sample = next(s for s in collector.poll() if s.gpu_uuid == uuid)
            utils.append(sample.util_gpu)
            ours = {p.pid: p.mem_used_mib for p in sample.processes}
            time.sleep(1.0)
        ref = compute_apps()
        print(f"agent processes {ours}; nvidia-smi compute apps {ref}; agent util {utils}")
        report.check(
            proc.pid in ours, "the agent lists the CUDA process's pid", f"{proc.pid} in {sorted(ours)}"
        )
        if proc.pid in ours and proc.pid in ref:
            diff = abs(ours[proc.pid] - ref[proc.pid])
            report.check(
                diff <= max(64, ref[proc.pid] // 20),
                "its memory agrees with nvidia-smi",
                f"{ours[proc.pid]} vs {ref[proc.pid]}",
            )
        report.check(max(utils) >= 50, "the agent sees the GPU busy", f"{utils}")
        check_agent(report, lib)  # every field again, at load
    finally:
        proc.kill()
        proc.wait()


@contextmanager
def real_mps(uuid: str) -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="gpureal-mps-", dir="/tmp"))
    supervisor = MpsSupervisor(root, list(REAL_COMMAND), isolate_shm=True)
    supervisor.ensure({uuid})
    supervisor.start()
    try:
        yield root
    finally:
        subprocess.run(
            REAL_CONTROL,
            input="quit\n",
            text=True,
            env=os.environ | _pipe_env(root, uuid),
            timeout=20,
            check=False,
        )
        supervisor.stop()
        shutil.rmtree(root, ignore_errors=True)


def _pipe_env(root: Path, uuid: str) -> dict[str, str]:
    return {
        "CUDA_MPS_PIPE_DIRECTORY": str(root / uuid / "pipe"),
        "CUDA_MPS_LOG_DIRECTORY": str(root / uuid / "log"),
        "CUDA_VISIBLE_DEVICES": uuid,
    }


def _control(root: Path, uuid: str, line: str) -> str:
    done = subprocess.run(
        REAL_CONTROL,
        input=line + "\n",
        capture_output=True,
        text=True,
        env=os.environ | _pipe_env(root, uuid),
        timeout=20,
        check=False,
    )
    return (done.stdout + done.stderr).strip()


def _mps_client(
    root: Path, uuid: str, gib: float, seconds: float, limit: str | None
) -> subprocess.Popen[str]:
    """As in a container of the GPU: the GPU's own /dev/shm, the pipe, the env of our Allocate."""
    env = _pipe_env(root, uuid) | {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50"}
    if limit is not None:
        env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = limit
    return start_client(gib, seconds, env, wrap=[*SHM_WRAPPER, str(root / uuid / "shm")])


def check_mps(report: Report, uuid: str, memory_mib: int) -> None:
    ceiling = Limit(thread_pct=50, mem_mib=memory_mib // 2)
    with real_mps(uuid) as root:
        end = time.monotonic() + 20
        while not (root / uuid / "pipe" / "control").exists() and time.monotonic() < end:
            time.sleep(0.2)
        report.check(
            (root / uuid / "pipe" / "control").exists(), "the real MPS control daemon listens on its pipe"
        )
        failed = LimitWriter(root, list(REAL_CONTROL), timeout_s=20).apply({uuid: ceiling})
        report.check(not failed, "the limit writer sets the ceiling through nvidia-cuda-mps-control")
        cases = [  # (what, GiB, env limit, should it be allocated)
            ("under its limit (index form)", 1.0, "0=4096M", True),
            ("over its limit, index form", 6.0, "0=4096M", False),
            ("over its limit, UUID form", 6.0, f"{uuid}=4096M", False),
            (
                "over the ceiling, limit raised by the client",
                ceiling.mem_mib / 1024 + 8,
                f"0={memory_mib}M",
                False,
            ),
        ]
        for what, gib, limit, ok in cases:
            proc = _mps_client(root, uuid, gib, 8.0 if ok else 0.0, limit)
            got = first_word(proc)
            if got == "ALLOCATED":
                servers = _control(root, uuid, "get_server_list").split()
                clients = [c for s in servers for c in _control(root, uuid, f"get_client_list {s}").split()]
                print(f"MPS servers {servers}, clients {clients}; client pid {proc.pid}")
                report.check(str(proc.pid) in clients, "the MPS server lists the client", f"{clients}")
            proc.kill()
            proc.wait()
            report.check(
                _as_expected(got, ok),
                f"MPS client {what}: {'allocated' if ok else 'refused'}",
                got,
            )
        print(_control(root, uuid, "get_default_device_pinned_mem_limit 0"))


def check_daemon_mps(report: Report, lib: nvml.NvmlLib, gpu: Gpu) -> None:
    """The plugin daemon end to end on the real MPS: GPU 0 shared in 4 slices, a 2-slice container
    allocated through the test kubelet (PreStartContainer sets the ceiling), and a CUDA client with
    exactly the env and mounts that container gets."""
    try:
        with daemon_with_shared_gpu(
            lib, gpu.uuid, list(REAL_COMMAND), list(REAL_CONTROL), isolate_shm=True
        ) as kubelet:
            _run_as_container(report, kubelet.create_pod("team-a", "mps", RESOURCE_SHARED, 2), gpu)
    except (TimeoutError, RuntimeError, grpc.RpcError) as exc:
        report.check(False, "the plugin daemon with the real MPS", repr(exc))


def _run_as_container(report: Report, resp: Any, gpu: Gpu) -> None:
    mounts = {m.container_path: m.host_path for m in resp.mounts}
    env = {k: mounts.get(v, v) for k, v in resp.envs.items() if k.startswith(("CUDA_", "NVIDIA_"))}
    limit_mib = int(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"].split("=")[1].rstrip("M"))
    wrap = [*SHM_WRAPPER, mounts["/dev/shm"]]  # noqa: S108 - the container's path, mapped to the GPU's own
    for what, gib, ok in (("1 GiB", 1.0, True), ("over the 2-slice limit", limit_mib / 1024 + 4, False)):
        proc = start_client(gib, 5.0 if ok else 0.0, env, wrap=wrap)
        got = first_word(proc)
        proc.kill()
        proc.wait()
        report.check(_as_expected(got, ok), f"daemon-allocated MPS container, {what}", got)
    pipe = Path(env["CUDA_MPS_PIPE_DIRECTORY"])
    ceiling = _control(pipe.parent.parent, gpu.uuid, "get_default_device_pinned_mem_limit 0")
    print(f"ceiling the daemon set: {ceiling}; the container's limit {limit_mib} MiB")
    set_mib = _mib(ceiling)
    close = set_mib is not None and abs(set_mib - limit_mib) < 1024  # MPS answers in whole G
    report.check(close, "PreStartContainer set the server's memory ceiling to the share", ceiling)


def _as_expected(got: str, allocated: bool) -> bool:
    """A refusal is CUDA's out-of-memory answer, not any failure of the client."""
    return got.startswith("ALLOCATED" if allocated else "REFUSED")


def _mib(text: str) -> int | None:
    """'70G' or '71885M' (how the MPS control answers) in MiB."""
    units = {"M": 1, "G": 1024, "T": 1024 * 1024}
    if len(text) < 2 or text[-1] not in units or not text[:-1].isdigit():
        return None
    return int(text[:-1]) * units[text[-1]]


def main() -> int:
    try:
        lib = nvml.load_real()
    except nvml.NvmlUnavailable as exc:
        print(f"gpu-real: {exc}", file=sys.stderr)
        return 2
    report = Report()
    node = discover(lib)
    if not node.gpus:
        return 2
    gpu = node.gpus[0]
    print(f"gpu-real: {gpu.name} {gpu.uuid}, {gpu.memory_mib} MiB, driver {lib.nvmlSystemGetDriverVersion()}")
    check_agent_under_load(report, lib, gpu.uuid)
    if shutil.which(REAL_CONTROL[0]) is None:
        report.check(False, "nvidia-cuda-mps-control on PATH")
    else:
        check_mps(report, gpu.uuid, gpu.memory_mib)
        check_daemon_mps(report, lib, gpu)
    print(f"gpu-real: {'OK' if not report.failed else f'{report.failed} check(s) FAILED'}")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
