"""Which pod a GPU process belongs to: cgroups give the pod UID, PodResources gives namespace/name/container.

Order of evidence for namespace/pod/container:
  1. the process's GPU_PORTAL_DEVICE_IDS env (set by our Allocate) matched against PodResources device ids:
     exact even when several pods share one GPU through MPS;
  2. otherwise, the single container PodResources says holds that GPU (exclusive GPUs);
  3. otherwise unknown (None). The pod UID comes from /proc/<pid>/cgroup independently.
The proc root is configurable so tests can hand in a fake /proc.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import grpc

from plugin import podresources
from plugin.contract import ProcessSample
from plugin.devices import parse_device_id

log = logging.getLogger(__name__)

# cgroupfs ".../pod<uid>/<ctr>" and systemd ".../kubepods-burstable-pod<uid_with_underscores>.slice/..."
POD_UID_RE = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
ENV_KEY = b"GPU_PORTAL_DEVICE_IDS="


def pod_uid_from_cgroup(text: str) -> str | None:
    match = POD_UID_RE.search(text)
    return match.group(1).replace("_", "-") if match else None


class Attributor:
    def __init__(self, proc_root: Path, pod_resources_socket: Path | None, *, refresh_s: float = 5.0) -> None:
        self.proc_root = proc_root
        self.socket = pod_resources_socket
        self.refresh_s = refresh_s
        self._holders: list[podresources.Holder] = []
        self._fetched_at = -1e9
        self._cache: dict[int, tuple[str | None, frozenset[str]]] = {}  # pid -> (pod uid, env device ids)

    def begin_poll(self, pids: set[int]) -> None:
        """Refresh PodResources when stale or when a new process appeared; forget exited pids."""
        new = pids - self._cache.keys()
        if len(self._cache) + len(new) != len(pids):  # some pid exited: forget it
            self._cache = {p: v for p, v in self._cache.items() if p in pids}
        for pid in new:
            self._cache[pid] = (self._read_uid(pid), self._read_env_ids(pid))
        if (new or time.monotonic() - self._fetched_at > self.refresh_s) and self.socket is not None:
            self._fetch()

    def _fetch(self) -> None:
        if self.socket is None:
            return
        self._fetched_at = time.monotonic()
        try:
            self._holders = podresources.list_holders(self.socket)
        except grpc.RpcError as exc:
            log.debug("PodResources unavailable: %s", exc.code())

    def _read_uid(self, pid: int) -> str | None:
        try:
            return pod_uid_from_cgroup((self.proc_root / str(pid) / "cgroup").read_text())
        except OSError:
            return None

    def _read_env_ids(self, pid: int) -> frozenset[str]:
        try:
            environ = (self.proc_root / str(pid) / "environ").read_bytes()
        except OSError:
            return frozenset()
        for entry in environ.split(b"\0"):
            if entry.startswith(ENV_KEY):
                return frozenset(entry[len(ENV_KEY) :].decode(errors="replace").split(","))
        return frozenset()

    def attribute(self, gpu_uuid: str, pid: int, mem_used_mib: int) -> ProcessSample:
        uid, env_ids = self._cache.get(pid, (None, frozenset()))
        holder = self._holder(gpu_uuid, env_ids)
        return ProcessSample(
            pid=pid,
            mem_used_mib=mem_used_mib,
            pod_uid=uid,
            pod_namespace=holder.namespace if holder else None,
            pod_name=holder.pod if holder else None,
            container=holder.container if holder else None,
        )

    def _holder(self, gpu_uuid: str, env_ids: frozenset[str]) -> podresources.Holder | None:
        if env_ids:
            exact = [h for h in self._holders if h.device_ids & env_ids]
            if len(exact) == 1:
                return exact[0]
        on_gpu = [h for h in self._holders if any(_uuid(d) == gpu_uuid for d in h.device_ids)]
        return on_gpu[0] if len(on_gpu) == 1 else None


def _uuid(device_id: str) -> str:
    try:
        return parse_device_id(device_id)[0]
    except ValueError:
        return ""
