"""B4's one observer of both sides: every pod of the cluster through one watch (bench/b4_submit.py)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubernetes.client import ApiClient

from bench.b1_sync import portal_client
from deploy.localcluster import kube
from plugin.names import GPU_RESOURCE
from tests.workloads_e2e.procs import wait_for
from workloads.k8s.labels import UID_LABEL

Obj = dict[str, Any]
TERMINAL = ("Succeeded", "Failed")


class PodWatch:
    """Every pod of the cluster as one watch sees it: when each bench key was first Running, which
    keys still have a pod, and the largest GPU excess over a node's capacity seen at any event."""

    def __init__(self, capacity: dict[str, int]) -> None:
        self.capacity = capacity
        self.running: dict[str, float] = {}
        self.excess = 0
        self._existing: dict[tuple[str, str], str] = {}  # pod -> bench key
        self._holding: dict[tuple[str, str], tuple[str, int]] = {}  # bound live pod -> (node, gpus)
        self._used: Counter[str] = Counter()
        self._lock = threading.Lock()

    def on_event(self, kind: str, pod: Obj) -> None:
        now = time.time()
        with self._lock:
            self._apply(kind, pod, now)

    def on_relist(self, pods: list[Obj]) -> None:
        """A relist replaces what the stream said (DELETED events may have been missed)."""
        now = time.time()
        with self._lock:
            self._existing, self._holding, self._used = {}, {}, Counter()
            for pod in pods:
                self._apply("ADDED", pod, now)

    def _apply(self, kind: str, pod: Obj, now: float) -> None:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        ident = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        held = self._holding.pop(ident, None)
        if held:
            self._used[held[0]] -= held[1]
        if kind == "DELETED":
            self._existing.pop(ident, None)
            return
        key = str((meta.get("labels") or {}).get(UID_LABEL) or "/".join(ident))
        self._existing[ident] = key
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Running":
            self.running.setdefault(key, now)
        node = str(spec.get("nodeName") or "")
        if node and phase not in TERMINAL:
            self._hold(ident, node, _gpus(spec))

    def _hold(self, ident: tuple[str, str], node: str, gpus: int) -> None:
        self._holding[ident] = (node, gpus)
        self._used[node] += gpus
        self.excess = max(self.excess, self._used[node] - self.capacity.get(node, 0))

    def all_running(self, keys: Iterable[str]) -> bool:
        return all(key in self.running for key in keys)

    def any_alive(self, keys: set[str]) -> bool:
        with self._lock:
            return not keys.isdisjoint(self._existing.values())


def _gpus(spec: Obj) -> int:
    containers = spec.get("containers") or []
    return sum(
        int(str(((c.get("resources") or {}).get("requests") or {}).get(GPU_RESOURCE, 0))) for c in containers
    )


def capacity_of(api: ApiClient) -> dict[str, int]:
    nodes = kube.get(api, "/api/v1/nodes")["items"]
    return {n["metadata"]["name"]: int(n["status"]["capacity"].get(GPU_RESOURCE, 0)) for n in nodes}


@contextmanager
def pod_watch(kubeconfig: Path, capacity: dict[str, int]) -> Iterator[PodWatch]:
    """The portal's own list+watch machinery (raw JSON, resume, relist on 410) over all pods."""
    from workloads.k8s.watch import Watcher, WatchSpec

    watch = PodWatch(capacity)
    spec = WatchSpec("pods", "/api/v1/pods", None, watch.on_event, watch.on_relist)
    # Streams of 5 s (each resumed from its resourceVersion) let the thread end soon after the stop.
    watcher = Watcher(client=portal_client(kubeconfig), spec=spec, watch_timeout_s=5, relist_interval_s=86400)
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True, name="b4-watch")
    thread.start()
    try:
        wait_for(lambda: watcher.stats.relists > 0, 60, "the pod watch's first list", every=0.1)
        yield watch
    finally:
        stop.set()
        thread.join(timeout=15)
