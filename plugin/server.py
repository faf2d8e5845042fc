"""The DevicePlugin gRPC servicer for one resource, served on a unix socket in the plugin dir."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc

from plugin import allocator
from plugin._proto import deviceplugin_pb2 as pb
from plugin._proto import deviceplugin_pb2_grpc as pb_grpc
from plugin.devices import RESOURCE_SHARED
from plugin.state import AllocationError, DeviceView, NodeState

log = logging.getLogger(__name__)

HEALTHY, UNHEALTHY = "Healthy", "Unhealthy"
STREAM_POLL_S = 0.5  # how often an idle ListAndWatch checks whether the kubelet went away
OnGrant = Callable[[dict[str, float]], None]
PreStart = Callable[[list[str]], str | None]  # device ids -> why the container must not start, or None


def options(resource: str) -> pb.DevicePluginOptions:
    """The shared resource asks for PreStartContainer: the one moment the kubelet has recorded which
    pod holds the slices (PodResources) and the container has not started yet."""
    return pb.DevicePluginOptions(
        pre_start_required=resource == RESOURCE_SHARED, get_preferred_allocation_available=True
    )


def to_device(view: DeviceView) -> pb.Device:
    topology = pb.TopologyInfo(nodes=[pb.NUMANode(ID=view.numa_node)]) if view.numa_node is not None else None
    return pb.Device(ID=view.id, health=HEALTHY if view.healthy else UNHEALTHY, topology=topology)


def to_response(grant: allocator.Grant) -> pb.ContainerAllocateResponse:
    mounts = [pb.Mount(container_path=c, host_path=h, read_only=ro) for c, h, ro in grant.mounts]
    return pb.ContainerAllocateResponse(envs=grant.envs, mounts=mounts)


class DevicePluginServicer(pb_grpc.DevicePluginServicer):
    def __init__(
        self,
        resource: str,
        state: NodeState,
        *,
        mps_host_root: str,
        on_grant: OnGrant | None,
        pre_start: PreStart | None = None,
    ) -> None:
        self.resource = resource
        self.state = state
        self.mps_host_root = mps_host_root
        self.on_grant = on_grant
        self.pre_start = pre_start

    def GetDevicePluginOptions(
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> pb.DevicePluginOptions:
        return options(self.resource)

    def ListAndWatch(
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> Iterator[pb.ListAndWatchResponse]:
        """Full list first, then the full list again after every change, until the kubelet hangs up."""
        version, views = self.state.devices(self.resource)
        yield pb.ListAndWatchResponse(devices=[to_device(v) for v in views])
        while context.is_active():
            if self.state.wait_for_change(version, STREAM_POLL_S) == version:
                continue
            new_version, new_views = self.state.devices(self.resource)
            version = new_version
            if new_views != views:
                views = new_views
                yield pb.ListAndWatchResponse(devices=[to_device(v) for v in views])

    def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> pb.PreferredAllocationResponse:
        out = []
        for req in request.container_requests:
            avail, must, size = (
                list(req.available_deviceIDs),
                list(req.must_include_deviceIDs),
                req.allocation_size,
            )
            if self.resource == RESOURCE_SHARED:
                ids = allocator.preferred_slices(avail, must, size)
            else:
                ids = allocator.preferred_whole(avail, must, size, self.state.node.pair_distance)
            out.append(pb.ContainerPreferredAllocationResponse(deviceIDs=ids))
        return pb.PreferredAllocationResponse(container_responses=out)

    def Allocate(self, request: pb.AllocateRequest, context: grpc.ServicerContext) -> pb.AllocateResponse:
        responses = []
        for req in request.container_requests:
            try:
                responses.append(to_response(self._grant(list(req.devices_ids))))
            except AllocationError as exc:
                log.warning("Allocate %s refused: %s", self.resource, exc)
                code = (
                    grpc.StatusCode.FAILED_PRECONDITION if exc.unhealthy else grpc.StatusCode.INVALID_ARGUMENT
                )
                context.abort(code, str(exc))
        return pb.AllocateResponse(container_responses=responses)

    def _grant(self, ids: list[str]) -> allocator.Grant:
        if self.resource == RESOURCE_SHARED:
            shares = self.state.resolve_shared(ids)
            self._notify({s.uuid: s.k / s.n for s in shares})
            return allocator.grant_shared(shares, ids, self.mps_host_root)
        gpus = self.state.resolve_whole(ids)
        self._notify({g.uuid: 1.0 for g in gpus})
        return allocator.grant_whole([g.uuid for g in gpus], ids)

    def _notify(self, fractions: dict[str, float]) -> None:
        if self.on_grant is not None:
            self.on_grant(fractions)

    def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> pb.PreStartContainerResponse:
        if self.pre_start is not None:
            refused = self.pre_start(list(request.devices_ids))
            if refused:
                log.warning("PreStartContainer %s refused: %s", self.resource, refused)
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, refused)
        return pb.PreStartContainerResponse()


class SocketServer:
    """A grpc.Server on one unix socket; `start()` replaces any stale socket file first."""

    def __init__(self, path: Path, servicer: DevicePluginServicer, *, max_workers: int = 8) -> None:
        self.path = path
        self.servicer = servicer
        self.max_workers = max_workers
        self._server: grpc.Server | None = None
        self.inode = 0

    def start(self) -> None:
        self.stop()
        self.path.unlink(missing_ok=True)
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="dp")
        )
        pb_grpc.add_DevicePluginServicer_to_server(self.servicer, server)
        server.add_insecure_port(f"unix://{self.path}")
        server.start()
        self._server = server
        self.inode = self.path.stat().st_ino

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=0).wait(timeout=5)
            self._server = None

    def socket_present(self) -> bool:
        """False when the kubelet wiped our socket (it does on restart)."""
        try:
            return self.path.stat().st_ino == self.inode
        except FileNotFoundError:
            return False
