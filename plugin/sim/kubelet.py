"""A test kubelet: plays the kubelet's side of the device-plugin and PodResources APIs over real gRPC
on unix sockets, so the plugin is exercised exactly as a real kubelet would exercise it.

Like the kubelet it serves Registration on `<plugin_dir>/kubelet.sock`; on Register it dials the
plugin's endpoint, asks GetDevicePluginOptions and keeps a ListAndWatch stream open. `stop()` deletes
kubelet.sock and wipes the plugin sockets, as a kubelet restart does; `start()` brings it back.
`create_pod` does what the kubelet's device manager does: pick free healthy devices (asking
GetPreferredAllocation), call Allocate, remember the assignment for PodResources List, then, where
the plugin asked for it, call PreStartContainer before the container would start. A refused
PreStartContainer fails the pod here (the real kubelet retries the container; it never runs).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from plugin._proto import deviceplugin_pb2 as pb
from plugin._proto import deviceplugin_pb2_grpc as pb_grpc
from plugin._proto import podresources_pb2 as pr
from plugin._proto import podresources_pb2_grpc as pr_grpc

RPC_TIMEOUT_S = 10.0


@dataclass
class Registration:
    resource: str
    endpoint: str
    at: float


@dataclass
class PluginConn:
    channel: grpc.Channel
    stub: pb_grpc.DevicePluginStub
    options: pb.DevicePluginOptions
    devices: dict[str, str] = field(default_factory=dict)  # id -> health
    updates: list[tuple[float, dict[str, str]]] = field(default_factory=list)


@dataclass(frozen=True)
class PodContainer:
    namespace: str
    pod: str
    container: str
    resource: str
    device_ids: tuple[str, ...]


class TestKubelet:
    __test__ = False  # not a pytest class

    def __init__(self, plugin_dir: Path, pod_resources_socket: Path | None = None) -> None:
        self.plugin_dir = plugin_dir
        self.socket = plugin_dir / "kubelet.sock"
        self.pod_resources_socket = pod_resources_socket
        self.registrations: list[Registration] = []
        self.conns: dict[str, PluginConn] = {}
        self.pods: list[PodContainer] = []
        self._cond = threading.Condition()
        self._server: grpc.Server | None = None
        self._pr_server: grpc.Server | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        self._server = self._serve(
            self.socket, lambda s: pb_grpc.add_RegistrationServicer_to_server(_Reg(self), s)
        )
        if self.pod_resources_socket is not None:
            self.pod_resources_socket.parent.mkdir(parents=True, exist_ok=True)
            self._pr_server = self._serve(
                self.pod_resources_socket,
                lambda s: pr_grpc.add_PodResourcesListerServicer_to_server(_PodRes(self), s),
            )

    @staticmethod
    def _serve(path: Path, add: Callable[[grpc.Server], None]) -> grpc.Server:
        path.unlink(missing_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="kubelet"))
        add(server)
        server.add_insecure_port(f"unix://{path}")
        server.start()
        return server

    def stop(self) -> None:
        """Kubelet going away: stop serving, drop the streams, delete kubelet.sock, wipe plugin sockets."""
        for server in (self._server, self._pr_server):
            if server is not None:
                server.stop(grace=0).wait(timeout=5)
        self._server = self._pr_server = None
        with self._cond:
            conns, self.conns = self.conns, {}
        for conn in conns.values():
            conn.channel.close()
        for sock in self.plugin_dir.glob("*.sock"):
            sock.unlink(missing_ok=True)
        if self.pod_resources_socket is not None:
            self.pod_resources_socket.unlink(missing_ok=True)

    # -- registration and streams ---------------------------------------------------------------
    def _on_register(self, req: pb.RegisterRequest) -> None:
        with self._cond:
            self.registrations.append(Registration(req.resource_name, req.endpoint, time.monotonic()))
            self._cond.notify_all()
        threading.Thread(target=self._connect, args=(req.resource_name, req.endpoint), daemon=True).start()

    def _connect(self, resource: str, endpoint: str) -> None:
        channel = grpc.insecure_channel(f"unix://{self.plugin_dir / endpoint}")
        stub = pb_grpc.DevicePluginStub(channel)
        try:
            options = stub.GetDevicePluginOptions(pb.Empty(), timeout=RPC_TIMEOUT_S)
            conn = PluginConn(channel, stub, options)
            with self._cond:
                old, self.conns[resource] = self.conns.get(resource), conn
                self._cond.notify_all()
            if old is not None:
                old.channel.close()
            for resp in stub.ListAndWatch(pb.Empty()):
                self._on_list(conn, {d.ID: d.health for d in resp.devices})
        except grpc.RpcError:
            pass  # stream ends when either side goes away; a new Register opens a new one

    def _on_list(self, conn: PluginConn, devices: dict[str, str]) -> None:
        with self._cond:
            conn.devices = devices
            conn.updates.append((time.monotonic(), devices))
            self._cond.notify_all()

    def wait_registered(self, resource: str, *, after: float = 0.0, timeout: float = 10.0) -> Registration:
        """The first registration of `resource` at or after `after` (monotonic), once it streams."""

        def found() -> Registration | None:
            regs = [r for r in self.registrations if r.resource == resource and r.at >= after]
            conn = self.conns.get(resource)
            return regs[0] if regs and conn is not None and conn.updates else None

        with self._cond:
            if not self._cond.wait_for(lambda: found() is not None, timeout):
                raise TimeoutError(f"{resource} did not register within {timeout}s")
            reg = found()
            if reg is None:  # cannot happen: wait_for returned True under the same lock
                raise TimeoutError(resource)
            return reg

    def wait_devices(
        self, resource: str, predicate: Callable[[dict[str, str]], bool], *, timeout: float = 10.0
    ) -> dict[str, str]:
        """Block until the latest ListAndWatch list of `resource` satisfies `predicate`."""

        def ok() -> bool:
            conn = self.conns.get(resource)
            return conn is not None and bool(conn.updates) and predicate(conn.devices)

        with self._cond:
            if not self._cond.wait_for(ok, timeout):
                conn = self.conns.get(resource)
                raise TimeoutError(
                    f"{resource}: condition not met; last list {conn.devices if conn else None}"
                )
            return dict(self.conns[resource].devices)

    def devices(self, resource: str) -> dict[str, str]:
        with self._cond:
            conn = self.conns.get(resource)
            return dict(conn.devices) if conn else {}

    # -- device manager -------------------------------------------------------------------------
    def _stub(self, resource: str) -> pb_grpc.DevicePluginStub:
        with self._cond:
            return self.conns[resource].stub

    def allocate(self, resource: str, ids: list[str]) -> pb.ContainerAllocateResponse:
        req = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)])
        return self._stub(resource).Allocate(req, timeout=RPC_TIMEOUT_S).container_responses[0]

    def preferred(self, resource: str, available: list[str], must: list[str], size: int) -> list[str]:
        req = pb.PreferredAllocationRequest(
            container_requests=[
                pb.ContainerPreferredAllocationRequest(
                    available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
                )
            ]
        )
        resp = self._stub(resource).GetPreferredAllocation(req, timeout=RPC_TIMEOUT_S)
        return list(resp.container_responses[0].deviceIDs)

    def free_devices(self, resource: str) -> list[str]:
        used = {d for p in self.pods if p.resource == resource for d in p.device_ids}
        return sorted(d for d, h in self.devices(resource).items() if h == "Healthy" and d not in used)

    def create_pod(
        self, namespace: str, pod: str, resource: str, count: int, *, container: str = "main"
    ) -> pb.ContainerAllocateResponse:
        """What the kubelet does at admission: preferred allocation (a hint), then Allocate."""
        free = self.free_devices(resource)
        if len(free) < count:
            raise RuntimeError(f"only {len(free)} free {resource} devices, need {count}")
        ids = self.preferred(resource, free, [], count)
        resp = self.allocate(resource, ids)
        with self._cond:
            self.pods.append(PodContainer(namespace, pod, container, resource, tuple(ids)))
            pre_start = self.conns[resource].options.pre_start_required
        if pre_start:
            try:
                self._stub(resource).PreStartContainer(
                    pb.PreStartContainerRequest(devices_ids=ids), timeout=RPC_TIMEOUT_S
                )
            except grpc.RpcError:
                self.delete_pod(namespace, pod)
                raise
        return resp

    def delete_pod(self, namespace: str, pod: str) -> None:
        with self._cond:
            self.pods = [p for p in self.pods if (p.namespace, p.pod) != (namespace, pod)]

    def pod_resources(self) -> pr.ListPodResourcesResponse:
        grouped: dict[tuple[str, str], dict[str, list[pr.ContainerDevices]]] = {}
        with self._cond:
            for p in self.pods:
                devs = grouped.setdefault((p.namespace, p.pod), {}).setdefault(p.container, [])
                # As the upstream kubelet does: one entry per device, not one per resource.
                devs += [
                    pr.ContainerDevices(resource_name=p.resource, device_ids=[d])
                    for d in sorted(p.device_ids)
                ]
        return pr.ListPodResourcesResponse(
            pod_resources=[
                pr.PodResources(
                    name=pod,
                    namespace=ns,
                    containers=[pr.ContainerResources(name=c, devices=d) for c, d in containers.items()],
                )
                for (ns, pod), containers in grouped.items()
            ]
        )


class _Reg(pb_grpc.RegistrationServicer):
    def __init__(self, kubelet: TestKubelet) -> None:
        self.kubelet = kubelet

    def Register(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.Empty:
        if request.version != "v1beta1":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unsupported version {request.version}")
        self.kubelet._on_register(request)
        return pb.Empty()


class _PodRes(pr_grpc.PodResourcesListerServicer):
    def __init__(self, kubelet: TestKubelet) -> None:
        self.kubelet = kubelet

    def List(
        self, request: pr.ListPodResourcesRequest, context: grpc.ServicerContext
    ) -> pr.ListPodResourcesResponse:
        return self.kubelet.pod_resources()

    def GetAllocatableResources(
        self, request: pr.AllocatableResourcesRequest, context: grpc.ServicerContext
    ) -> pr.AllocatableResourcesResponse:
        return pr.AllocatableResourcesResponse()

    def Get(
        self, request: pr.GetPodResourcesRequest, context: grpc.ServicerContext
    ) -> pr.GetPodResourcesResponse:
        for pod in self.kubelet.pod_resources().pod_resources:
            if (pod.namespace, pod.name) == (request.pod_namespace, request.pod_name):
                return pr.GetPodResourcesResponse(pod_resources=pod)
        context.abort(grpc.StatusCode.NOT_FOUND, "no such pod")
        raise AssertionError("unreachable: abort raises")
