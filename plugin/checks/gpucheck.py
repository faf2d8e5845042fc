"""`python -m plugin.checks.gpucheck` (make gpu-check): verify the REAL NVML path on an NVIDIA machine.

Checks (docs/gpu-check.md): devices and UUIDs equal `nvidia-smi -L`; NVML events can be registered;
Allocate through the test kubelet over real gRPC returns the right UUIDs and MPS limits; the agent's
numbers agree with `nvidia-smi --query-gpu` within tolerances. Exit 0 all passed, 1 a mismatch,
2 no NVIDIA GPU / NVML.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc

from plugin import nvml
from plugin.agent.attribution import Attributor
from plugin.agent.collector import Collector
from plugin.daemon import PluginConfig, PluginDaemon
from plugin.devices import RESOURCE_GPU, RESOURCE_SHARED, Node, discover
from plugin.mps import STANDIN_COMMAND, STANDIN_CONTROL
from plugin.sim.kubelet import TestKubelet

SMI_FIELDS = "uuid,memory.total,memory.used,temperature.gpu,power.draw,clocks.sm,clocks.mem,utilization.gpu"
LIST_RE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9a-fA-F-]+)\)")


class Report:
    def __init__(self) -> None:
        self.failed = 0

    def check(self, ok: bool, what: str, detail: str = "") -> None:
        self.failed += 0 if ok else 1
        print(f"[{'PASS' if ok else 'FAIL'}] {what}{': ' + detail if detail else ''}", flush=True)


def smi(*args: str) -> str:
    return subprocess.run(
        ["nvidia-smi", *args], check=True, capture_output=True, text=True, timeout=60
    ).stdout


def check_devices(report: Report, node: Node) -> None:
    listed = [m.groups() for line in smi("-L").splitlines() if (m := LIST_RE.match(line.strip()))]
    ours = [(str(g.index), g.name, g.uuid) for g in node.gpus]
    report.check(
        ours == [(i, n, u) for i, n, u in listed], "device list and UUIDs equal nvidia-smi -L", f"{ours}"
    )


def check_events(report: Report, lib: nvml.NvmlLib, node: Node) -> None:
    event_set = lib.nvmlEventSetCreate()
    try:
        for gpu in node.gpus:
            handle = lib.nvmlDeviceGetHandleByIndex(gpu.index)
            try:
                lib.nvmlDeviceRegisterEvents(handle, nvml.EVENT_XID | nvml.EVENT_DBE, event_set)
                report.check(True, f"GPU {gpu.index}: XID/ECC events registered")
            except nvml.NVMLError as exc:
                report.check(False, f"GPU {gpu.index}: event registration", nvml.error_text(exc))
    finally:
        lib.nvmlEventSetFree(event_set)


@contextmanager
def daemon_with_shared_gpu(
    lib: nvml.NvmlLib,
    uuid: str,
    mps_command: list[str],
    mps_control: list[str],
    *,
    isolate_shm: bool = False,
) -> Iterator[TestKubelet]:
    """The plugin daemon with GPU `uuid` shared in 4 slices (the others exclusive), registered with a
    test kubelet on unix sockets in a temp dir; yields once the 4 slices are offered healthy."""
    root = Path(tempfile.mkdtemp(prefix="gpuchk-", dir="/tmp"))
    (root / "sharing.json").write_text(json.dumps({"gpus": {uuid: {"mode": "shared", "slices": 4}}}))
    kubelet = TestKubelet(root / "dp", root / "pr" / "kubelet.sock")
    kubelet.start()
    cfg = PluginConfig(
        plugin_dir=root / "dp",
        config_file=root / "sharing.json",
        # PreStartContainer asks PodResources which project holds the slices (tenancy); the test
        # kubelet answers it there.
        pod_resources_socket=kubelet.pod_resources_socket,
        mps_root=root / "mps",
        mps_command=mps_command,
        mps_control=mps_control,
        isolate_shm=isolate_shm,
    )
    daemon = PluginDaemon(lib, cfg)
    try:
        daemon.start()
        kubelet.wait_registered(RESOURCE_SHARED, timeout=15)
        kubelet.wait_devices(
            RESOURCE_SHARED, lambda d: len(d) == 4 and set(d.values()) == {"Healthy"}, timeout=30
        )
        yield kubelet
    finally:
        daemon.stop()
        kubelet.stop()
        shutil.rmtree(root, ignore_errors=True)


def check_allocate(report: Report, lib: nvml.NvmlLib, node: Node) -> None:
    """GPU 0 shared (4 slices), the rest exclusive. The MPS daemon is the stand-in: this check must
    not start a real MPS server on a machine other people may be using."""
    shared = node.gpus[0]
    try:
        with daemon_with_shared_gpu(
            lib, shared.uuid, list(STANDIN_COMMAND), list(STANDIN_CONTROL)
        ) as kubelet:
            _check_grants(report, kubelet, node)
    except (TimeoutError, KeyError, RuntimeError, grpc.RpcError) as exc:
        report.check(False, "Allocate through the test kubelet", repr(exc))


def _check_grants(report: Report, kubelet: TestKubelet, node: Node) -> None:
    shared = node.gpus[0]
    envs = kubelet.create_pod("check", "mps", RESOURCE_SHARED, 2).envs
    report.check(
        envs["NVIDIA_VISIBLE_DEVICES"] == shared.uuid,
        "shared Allocate visible devices",
        envs["NVIDIA_VISIBLE_DEVICES"],
    )
    report.check(envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50", "2 of 4 slices -> 50 % threads")
    want = f"{shared.uuid}={shared.memory_mib // 2}M"
    report.check(
        envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == want,
        "2 of 4 slices -> half the memory",
        envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"],
    )
    if len(node.gpus) > 1:
        kubelet.wait_devices(RESOURCE_GPU, lambda d: len(d) == len(node.gpus) - 1, timeout=15)
        got = kubelet.create_pod("check", "whole", RESOURCE_GPU, len(node.gpus) - 1).envs[
            "NVIDIA_VISIBLE_DEVICES"
        ]
        report.check(
            sorted(got.split(",")) == sorted(g.uuid for g in node.gpus[1:]),
            "whole-GPU Allocate gives UUIDs",
            got,
        )


# field -> (index in SMI_FIELDS, tolerance(reference) )
TOLERANCES: dict[str, tuple[int, Callable[[float], float]]] = {
    "mem_total_mib": (1, lambda ref: 1.0),
    "mem_used_mib": (2, lambda ref: max(64.0, 0.05 * ref)),
    "temp_c": (3, lambda ref: 3.0),
    "power_w": (4, lambda ref: max(15.0, 0.10 * ref)),
    "sm_clock_mhz": (5, lambda ref: max(150.0, 0.10 * ref)),
    "mem_clock_mhz": (6, lambda ref: max(150.0, 0.10 * ref)),
    "util_gpu": (7, lambda ref: 25.0),  # NVML's counter refreshes every 1/6-1 s
}


def check_agent(report: Report, lib: nvml.NvmlLib) -> None:
    samples = {s.gpu_uuid: s for s in Collector(lib, Attributor(Path("/proc"), None)).poll()}
    rows = [
        r.split(", ")
        for r in smi(f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits").splitlines()
        if r
    ]
    for row in rows:
        sample = samples.get(row[0])
        if sample is None:
            report.check(False, f"agent sample for {row[0]}", "missing")
            continue
        for field, (col, tol) in TOLERANCES.items():
            if row[col].strip() in ("[N/A]", "[Not Supported]"):
                print(f"[SKIP] {row[0]} {field}: nvidia-smi reports {row[col]}")
                continue
            ref, ours = float(row[col]), float(getattr(sample, field))
            report.check(
                abs(ours - ref) <= tol(ref),
                f"{row[0]} {field}",
                f"agent {ours} vs nvidia-smi {ref} (tol {tol(ref):.0f})",
            )


def main() -> int:
    try:
        lib = nvml.load_real()
    except nvml.NvmlUnavailable as exc:
        print(f"gpu-check: {exc}. This check needs a machine with an NVIDIA GPU and driver.", file=sys.stderr)
        return 2
    if shutil.which("nvidia-smi") is None:
        print("gpu-check: NVML found but nvidia-smi is not on PATH; it is the reference.", file=sys.stderr)
        return 2
    report = Report()
    node = discover(lib)
    print(f"gpu-check: {len(node.gpus)} GPU(s), driver {lib.nvmlSystemGetDriverVersion()}")
    if not node.gpus:
        report.check(False, "at least one GPU", "NVML reports 0 devices")
        return 1
    check_devices(report, node)
    check_events(report, lib, node)
    check_allocate(report, lib, node)
    check_agent(report, lib)
    print(f"gpu-check: {'OK' if not report.failed else f'{report.failed} check(s) FAILED'}")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
