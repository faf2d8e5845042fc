"""The plugin's shared, thread-safe view of the node: effective sharing mode and health per GPU.

Writers (health loop, config loop, MPS supervisor) call the setters; every change bumps `version`
and wakes the ListAndWatch streams, which then resend the full device list (kubelet contract).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from plugin.allocator import SharedShare
from plugin.config import Mode
from plugin.devices import RESOURCE_GPU, RESOURCE_SHARED, Gpu, Node, parse_device_id, slice_id


@dataclass(frozen=True)
class DeviceView:
    id: str
    healthy: bool
    numa_node: int | None


class AllocationError(Exception):
    """`unhealthy` separates FAILED_PRECONDITION (retry elsewhere) from INVALID_ARGUMENT."""

    def __init__(self, message: str, *, unhealthy: bool = False) -> None:
        super().__init__(message)
        self.unhealthy = unhealthy


class NodeState:
    def __init__(self, node: Node, modes: dict[str, Mode], *, busy_grace_s: float = 10.0) -> None:
        self.node = node
        self._modes = dict(modes)
        self._unhealthy: dict[str, str] = {}
        self._mps_down: set[str] = set()
        self._out_of_service: frozenset[str] = frozenset()
        self._allocated_at: dict[str, float] = {}
        self.busy_grace_s = busy_grace_s
        self._cond = threading.Condition()
        self.version = 0

    # -- reads ----------------------------------------------------------------------------------
    def mode(self, uuid: str) -> Mode:
        with self._cond:
            return self._modes[uuid]

    def shared_uuids(self) -> set[str]:
        with self._cond:
            return {u for u, m in self._modes.items() if m.shared}

    def health(self) -> dict[str, str | None]:
        with self._cond:
            return {g.uuid: self._unhealthy.get(g.uuid) for g in self.node.gpus}

    def devices(self, resource: str) -> tuple[int, list[DeviceView]]:
        with self._cond:
            return self.version, self._devices(resource)

    def _devices(self, resource: str) -> list[DeviceView]:
        out = []
        for gpu in self.node.gpus:
            mode = self._modes[gpu.uuid]
            ok = gpu.uuid not in self._unhealthy and gpu.uuid not in self._out_of_service
            if resource == RESOURCE_GPU and not mode.shared:
                out.append(DeviceView(gpu.uuid, ok, gpu.numa_node))
            elif resource == RESOURCE_SHARED and mode.shared:
                ok = ok and gpu.uuid not in self._mps_down
                out += [DeviceView(slice_id(gpu.uuid, n), ok, gpu.numa_node) for n in range(mode.slices)]
        return out

    def wait_for_change(self, version: int, timeout: float) -> int:
        with self._cond:
            self._cond.wait_for(lambda: self.version != version, timeout)
            return self.version

    # -- writes ---------------------------------------------------------------------------------
    def _bump(self) -> None:
        self.version += 1
        self._cond.notify_all()

    def set_health(self, status: dict[str, str | None]) -> None:
        with self._cond:
            new = {u: r for u, r in status.items() if r is not None}
            if set(new) != set(self._unhealthy):
                self._bump()
            self._unhealthy = new

    def set_out_of_service(self, uuids: frozenset[str]) -> None:
        """GPUs the portal does not offer: Unhealthy to the kubelet, refused by Allocate."""
        with self._cond:
            if uuids != self._out_of_service:
                self._out_of_service = uuids
                self._bump()

    def set_mps_down(self, down: Iterable[str]) -> None:
        with self._cond:
            new = set(down)
            if new != self._mps_down:
                self._mps_down = new
                self._bump()

    def apply_modes(
        self, desired: Callable[[str], Mode], busy: set[str] | None
    ) -> tuple[list[str], list[str]]:
        """Switch each GPU to its desired mode only when nothing holds it. `busy` None = usage unknown,
        so nothing switches (a GPU in use must never change under a running container)."""
        switched, pending = [], []
        now = time.monotonic()
        with self._cond:
            for gpu in self.node.gpus:
                want = desired(gpu.uuid)
                if want == self._modes[gpu.uuid]:
                    continue
                recent = now - self._allocated_at.get(gpu.uuid, -1e9) < self.busy_grace_s
                if busy is None or gpu.uuid in busy or recent:
                    pending.append(gpu.uuid)
                    continue
                self._modes[gpu.uuid] = want
                switched.append(gpu.uuid)
            if switched:
                self._bump()
        return switched, pending

    # -- Allocate -------------------------------------------------------------------------------
    def resolve_whole(self, ids: list[str]) -> list[Gpu]:
        gpus = [self._check(dev, shared=False)[0] for dev in self._unique(ids)]
        self._note_allocated(g.uuid for g in gpus)
        return gpus

    def resolve_shared(self, ids: list[str]) -> list[SharedShare]:
        counts: dict[str, int] = {}
        for dev in self._unique(ids):
            gpu, _ = self._check(dev, shared=True)
            counts[gpu.uuid] = counts.get(gpu.uuid, 0) + 1
        self._note_allocated(counts)
        return [
            SharedShare(uuid=u, k=k, n=self.mode(u).slices, memory_mib=self._gpu(u).memory_mib)
            for u, k in counts.items()
        ]

    @staticmethod
    def _unique(ids: list[str]) -> list[str]:
        if not ids or len(set(ids)) != len(ids):
            raise AllocationError(f"empty or duplicate device ids: {ids}")
        return ids

    def _gpu(self, uuid: str) -> Gpu:
        gpu = self.node.by_uuid(uuid)
        if gpu is None:
            raise AllocationError(f"unknown device {uuid}")
        return gpu

    def _check(self, dev: str, *, shared: bool) -> tuple[Gpu, int | None]:
        try:
            uuid, n = parse_device_id(dev)
        except ValueError:
            raise AllocationError(f"malformed device id {dev!r}") from None
        gpu = self._gpu(uuid)
        with self._cond:
            mode = self._modes[uuid]
            if mode.shared != shared or (n is None) == shared or (n is not None and n >= mode.slices):
                raise AllocationError(f"device {dev} is not offered by this resource")
            reason = (
                self._unhealthy.get(uuid)
                or ("out of service" if uuid in self._out_of_service else None)
                or ("mps daemon down" if shared and uuid in self._mps_down else None)
            )
        if reason:
            raise AllocationError(f"device {dev} is unhealthy: {reason}", unhealthy=True)
        return gpu, n

    def _note_allocated(self, uuids: Iterable[str]) -> None:
        now = time.monotonic()
        with self._cond:
            for uuid in uuids:
                self._allocated_at[uuid] = now
