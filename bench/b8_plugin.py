"""B8: device plugin gRPC. Allocate round trips against an empty-handler grpcio server on the same kind
of unix socket, health change -> ListAndWatch arrival, re-registration after kubelet.sock re-creation.

Everything runs over real gRPC on unix sockets with the simulated NVML backend (no GPU needed).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc

from bench.common import Profile, Result, log, percentile
from plugin._proto import deviceplugin_pb2 as pb
from plugin._proto import deviceplugin_pb2_grpc as pb_grpc
from plugin.daemon import PluginConfig, PluginDaemon
from plugin.devices import RESOURCE_GPU, RESOURCE_SHARED
from plugin.sim.kubelet import TestKubelet
from plugin.sim.nvml import SimNvml, default_gpus

SIZES = (1, 2, 4, 8)
ALLOCATES = {"ci": 2_000, "full": 10_000}


class _Empty(pb_grpc.DevicePluginServicer):
    """The floor: gRPC and protobuf cost alone, with handlers that do nothing."""

    def GetDevicePluginOptions(
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> pb.DevicePluginOptions:
        return pb.DevicePluginOptions()

    def ListAndWatch(
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> Iterator[pb.ListAndWatchResponse]:
        yield pb.ListAndWatchResponse()

    def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> pb.PreferredAllocationResponse:
        return pb.PreferredAllocationResponse()

    def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> pb.PreStartContainerResponse:
        return pb.PreStartContainerResponse()

    def Allocate(self, request: pb.AllocateRequest, context: grpc.ServicerContext) -> pb.AllocateResponse:
        return pb.AllocateResponse(
            container_responses=[pb.ContainerAllocateResponse() for _ in request.container_requests]
        )


def _count_is(n: int) -> Callable[[dict[str, str]], bool]:
    return lambda devices: len(devices) == n


def _timed_pair(
    ours: pb_grpc.DevicePluginStub, floor: pb_grpc.DevicePluginStub, ids: list[str], n: int
) -> tuple[list[float], list[float]]:
    """Alternate ours and the floor request by request, so background load (2 shared cores here)
    hits both series alike instead of skewing whichever ran during a busy spell."""
    req = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)])
    for _ in range(min(50, n)):  # warm both channels
        ours.Allocate(req, timeout=5)
        floor.Allocate(req, timeout=5)
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(n):
        for stub, out in ((ours, times[0]), (floor, times[1])):
            t0 = time.perf_counter()
            stub.Allocate(req, timeout=5)
            out.append((time.perf_counter() - t0) * 1e3)
    return times


def _allocate_results(
    profile: Profile, kubelet: TestKubelet, floor: pb_grpc.DevicePluginStub
) -> Iterator[Result]:
    per_case = ALLOCATES[profile] // (len(SIZES) * 2)
    for resource in (RESOURCE_GPU, RESOURCE_SHARED):
        devices = sorted(kubelet.devices(resource))
        for size in SIZES:
            ids = (
                devices[:size] if resource == RESOURCE_GPU else kubelet.preferred(resource, devices, [], size)
            )
            ours, ref = _timed_pair(kubelet._stub(resource), floor, ids, per_case)
            tag = f"{'gpu' if resource == RESOURCE_GPU else 'slices'}_x{size}"
            p99, ref99 = percentile(ours, 99), percentile(ref, 99)
            yield Result(
                "B8",
                profile,
                "sim",
                f"allocate_p50_ms_{tag}",
                percentile(ours, 50),
                percentile(ref, 50),
                "info (floor = empty handler)",
                True,
            )
            # The absolute 2 ms is judged only where the floor's own p99 is under 1 ms: on a loaded
            # 2-core machine the empty handler alone passes 2 ms, and that is the machine, not us.
            ok = p99 <= 1.5 * ref99 + 1.0 and (ref99 >= 1.0 or p99 <= 2.0)
            yield Result(
                "B8",
                profile,
                "sim",
                f"allocate_p99_ms_{tag}",
                p99,
                ref99,
                "p99 <= 1.5x floor + 1 ms, and <= 2 ms where the floor is under 1 ms",
                ok,
            )


def _health_flips(sim: SimNvml, kubelet: TestKubelet, flips: int) -> list[float]:
    out = []
    for i in range(flips):
        uuid = sim.gpus[i % 8].uuid
        kubelet.wait_devices(RESOURCE_GPU, lambda d, u=uuid: d.get(u) == "Healthy", timeout=10)  # type: ignore[misc]
        t0 = time.monotonic()
        sim.inject_xid(uuid, 48)
        kubelet.wait_devices(RESOURCE_GPU, lambda d, u=uuid: d.get(u) == "Unhealthy", timeout=5)  # type: ignore[misc]
        out.append((time.monotonic() - t0) * 1e3)
    return out


def _reregistrations(kubelet: TestKubelet, n: int) -> list[float]:
    out = []
    for _ in range(n):
        kubelet.stop()
        t0 = time.monotonic()  # the moment kubelet.sock is re-created
        kubelet.start()
        at = max(kubelet.wait_registered(r, after=t0, timeout=10).at for r in (RESOURCE_GPU, RESOURCE_SHARED))
        out.append((at - t0) * 1e3)
    return out


def run(profile: Profile) -> Iterator[Result]:
    logging.getLogger("plugin").setLevel(logging.ERROR)
    root = Path(tempfile.mkdtemp(prefix="b8-", dir="/tmp"))
    sim = SimNvml(default_gpus(16), call_cost_s=100e-6)
    shared = {g.uuid: {"mode": "shared", "slices": 4} for g in sim.gpus[8:]}
    (root / "sharing.json").write_text(__import__("json").dumps({"gpus": shared}))
    kubelet = TestKubelet(root / "dp", root / "pr" / "kubelet.sock")
    kubelet.start()
    cfg = PluginConfig(
        plugin_dir=root / "dp", config_file=root / "sharing.json", mps_root=root / "mps", recovery_s=0.3
    )
    daemon = PluginDaemon(sim, cfg)
    floor_server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    pb_grpc.add_DevicePluginServicer_to_server(_Empty(), floor_server)
    floor_server.add_insecure_port(f"unix://{root / 'floor.sock'}")
    floor_server.start()
    floor_channel = grpc.insecure_channel(f"unix://{root / 'floor.sock'}")
    try:
        daemon.start()
        for resource, count in ((RESOURCE_GPU, 8), (RESOURCE_SHARED, 32)):
            kubelet.wait_registered(resource)
            kubelet.wait_devices(resource, _count_is(count))
        log("B8: allocate round trips")
        yield from _allocate_results(profile, kubelet, pb_grpc.DevicePluginStub(floor_channel))
        log("B8: health flips")
        flips = _health_flips(sim, kubelet, 20 if profile == "ci" else 50)
        yield Result(
            "B8",
            profile,
            "sim",
            "health_to_listandwatch_p99_ms",
            percentile(flips, 99),
            1000.0,
            "<= 1 s (reference = budget)",
            percentile(flips, 99) <= 1000,
        )
        log("B8: kubelet restarts")
        regs = _reregistrations(kubelet, 10 if profile == "ci" else 30)
        yield Result(
            "B8",
            profile,
            "sim",
            "reregister_max_ms",
            max(regs),
            2000.0,
            "<= 2 s (reference = budget)",
            max(regs) <= 2000,
        )
        yield Result("B8", profile, "sim", "reregister_p50_ms", percentile(regs, 50), 2000.0, "info", True)
    finally:
        daemon.stop()
        kubelet.stop()
        floor_channel.close()
        floor_server.stop(grace=0)
        shutil.rmtree(root, ignore_errors=True)
