"""The device-plugin process: two resources, one health loop, one MPS supervisor, one control loop.

Concurrency story: gRPC handlers run on each server's thread pool and only read NodeState or resolve
allocations under its lock. The health thread and the MPS supervisor write health into NodeState.
The control thread (every `tick_s`) owns everything else: serving and (re-)registering with the
kubelet, polling the sharing config, asking PodResources which GPUs are busy, and telling the MPS
supervisor which GPUs are shared. No thread ever blocks another for longer than one NVML call.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from plugin import config as sharing
from plugin import mpslimits, podresources
from plugin.devices import RESOURCE_GPU, RESOURCE_SHARED, discover, parse_device_id
from plugin.health import HealthMonitor
from plugin.mps import STANDIN_COMMAND, STANDIN_CONTROL, MpsSupervisor
from plugin.nvml import NvmlLib
from plugin.registration import KUBELET_SOCKET, KubeletSocketWatch, register, self_dial
from plugin.server import DevicePluginServicer, OnGrant, SocketServer, options
from plugin.state import NodeState

log = logging.getLogger(__name__)
SOCKETS = {RESOURCE_GPU: "gpu-portal-gpu.sock", RESOURCE_SHARED: "gpu-portal-gpu-shared.sock"}


@dataclass
class PluginConfig:
    plugin_dir: Path
    config_file: Path | None = None
    slices_per_gpu: int = 4
    default_shared: bool = False
    pod_resources_socket: Path | None = None
    mps_root: Path = Path("/run/gpu-portal/mps")
    mps_command: list[str] = field(default_factory=lambda: list(STANDIN_COMMAND))
    mps_control: list[str] = field(default_factory=lambda: list(STANDIN_CONTROL))
    isolate_shm: bool = False
    recovery_s: float = 300.0
    busy_grace_s: float = 10.0
    tick_s: float = 0.25
    busy_poll_s: float = 1.0


@dataclass
class _Resource:
    name: str
    server: SocketServer
    registered_with: tuple[int, int] | None = None
    next_try: float = 0.0
    backoff: float = 0.0
    registrations: int = 0
    last_registered_at: float = 0.0


class PluginDaemon:
    def __init__(self, lib: NvmlLib, cfg: PluginConfig, *, on_grant: OnGrant | None = None) -> None:
        self.lib = lib
        self.cfg = cfg
        self.node = discover(lib)
        default = sharing.Mode(shared=cfg.default_shared, slices=cfg.slices_per_gpu)
        self.config = sharing.ConfigFile(cfg.config_file, default=default)
        self.config.poll()
        # At start-up nothing of ours is known to be running, so the configured modes apply directly.
        self.state = NodeState(
            self.node,
            {g.uuid: self.config.mode_for(g.uuid) for g in self.node.gpus},
            busy_grace_s=cfg.busy_grace_s,
        )
        self.state.set_out_of_service(self.config.out_of_service)
        self.health = HealthMonitor(
            lib, [g.uuid for g in self.node.gpus], self.state.set_health, recovery_s=cfg.recovery_s
        )
        self.mps = MpsSupervisor(
            cfg.mps_root, cfg.mps_command, on_change=self.state.set_mps_down, isolate_shm=cfg.isolate_shm
        )
        self.limits = mpslimits.LimitWriter(cfg.mps_root, cfg.mps_control)
        self.resources = {
            name: _Resource(name, SocketServer(cfg.plugin_dir / sock, self._servicer(name, on_grant)))
            for name, sock in SOCKETS.items()
        }
        self.watch = KubeletSocketWatch(cfg.plugin_dir / KUBELET_SOCKET)
        self.pending: list[str] = []
        self._last_busy_poll = 0.0
        self._last_limits = 0.0
        self._daemon_pids: dict[str, int | None] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="control", daemon=True)

    def _servicer(self, name: str, on_grant: OnGrant | None) -> DevicePluginServicer:
        return DevicePluginServicer(
            name,
            self.state,
            mps_host_root=str(self.cfg.mps_root),
            on_grant=on_grant,
            pre_start=self._pre_start if name == RESOURCE_SHARED else None,
        )

    def start(self) -> None:
        self.cfg.plugin_dir.mkdir(parents=True, exist_ok=True)
        self.health.start()
        self.mps.ensure(self.state.shared_uuids())
        self.mps.start()
        for res in self.resources.values():
            res.server.start()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for res in self.resources.values():
            res.server.stop()
        self.health.stop()
        self.mps.stop()

    def request_stop(self) -> None:
        self._stop.set()

    def wait(self) -> None:
        self._stop.wait()

    def _run(self) -> None:
        while not self._stop.wait(self.cfg.tick_s):
            try:
                self.step()
            except Exception:  # the control loop must outlive any single bad tick
                log.exception("control loop step failed")

    def step(self) -> None:
        present, new = self.watch.changed()
        if new:
            log.info("kubelet.sock (re)appeared: re-registering")
            for res in self.resources.values():
                res.registered_with, res.next_try, res.backoff = None, 0.0, 0.0
        for res in self.resources.values():
            if not res.server.socket_present():
                log.info("%s socket gone (kubelet wiped it): serving again", res.name)
                res.server.start()
                res.registered_with = None
            if present and res.registered_with is None:
                self._register(res)
        self._sync_modes()
        # Not offering a GPU never waits for it to be free: Unhealthy only stops new allocations.
        self.state.set_out_of_service(self.config.out_of_service)
        self.mps.ensure(self.state.shared_uuids())
        self._refresh_limits()

    def _register(self, res: _Resource) -> None:
        now = time.monotonic()
        if now < res.next_try:
            return
        ident = self.watch.identity()
        try:
            self_dial(res.server.path)
            register(
                self.watch.path,
                endpoint=res.server.path.name,
                resource=res.name,
                options=options(res.name),
                timeout_s=2,
            )
        except grpc.RpcError as exc:
            res.backoff = min(2.0, max(0.25, res.backoff * 2))  # short cap: re-registration budget is 5 s
            res.next_try = now + res.backoff
            log.warning("register %s failed (%s); retry in %.2fs", res.name, exc.code(), res.backoff)
            return
        res.registered_with, res.backoff = ident, 0.0
        res.registrations += 1
        res.last_registered_at = time.monotonic()
        log.info("registered %s with the kubelet (%s)", res.name, res.server.path.name)

    def _sync_modes(self) -> None:
        changed = self.config.poll()
        if not changed and not self.pending:
            return
        now = time.monotonic()
        if not changed and now - self._last_busy_poll < self.cfg.busy_poll_s:
            return
        self._last_busy_poll = now
        switched, self.pending = self.state.apply_modes(self.config.mode_for, self._busy())
        for uuid in switched:
            log.info("GPU %s now %s", uuid, self.state.mode(uuid).label)
        if self.pending:
            log.info("mode change waiting for GPUs to be free: %s", self.pending)

    def _holders(self) -> list[podresources.Holder] | None:
        if self.cfg.pod_resources_socket is None:
            return None
        try:
            return podresources.list_holders(self.cfg.pod_resources_socket)
        except grpc.RpcError as exc:
            log.warning("PodResources unavailable (%s)", exc.code())
            return None

    def _busy(self) -> set[str] | None:
        holders = self._holders()  # None: usage unknown, so mode changes wait
        return None if holders is None else podresources.busy_gpus(holders, tuple(SOCKETS))

    def _pre_start(self, ids: list[str]) -> str | None:
        """A shared container about to start: refuse it on a GPU another project holds (fail closed
        when the kubelet cannot say who holds what), and set its project's limits first."""
        holders = self._holders()
        if holders is None:
            return "PodResources unavailable: cannot tell which project these slices are for"
        refused = mpslimits.conflict(holders, ids, self.config.cross_project)
        if refused:
            return refused
        failed = set(self._apply_limits(holders)) & {parse_device_id(d)[0] for d in ids}
        return f"MPS limits could not be set on {sorted(failed)}" if failed else None

    def _apply_limits(self, holders: list[podresources.Holder]) -> list[str]:
        shared = self.state.shared_uuids()
        for uuid in shared:
            pid = self.mps.pid(uuid)
            if self._daemon_pids.get(uuid) != pid:
                self._daemon_pids[uuid] = pid
                self.limits.forget(uuid)
        slices = {u: self.state.mode(u).slices for u in shared}
        memory = {g.uuid: g.memory_mib for g in self.node.gpus if g.uuid in shared}
        return self.limits.apply(mpslimits.limits(holders, slices, memory))

    def _refresh_limits(self) -> None:
        """Follow containers that ended: a project's ceiling drops with the slices it still holds."""
        now = time.monotonic()
        if now - self._last_limits < self.cfg.busy_poll_s:
            return
        self._last_limits = now
        holders = self._holders()
        if holders is not None:
            self._apply_limits(holders)
