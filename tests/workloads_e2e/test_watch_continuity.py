"""A cut watch and 410 Gone; every change made during the gap is reflected after one relist.

The API server is real; only the faults (a broken stream, 410 on reconnect) are injected by a
thin wrapper, since the real server cannot be made to expire a watch on demand.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from tests.workloads_e2e.conftest import wait_for
from workloads.k8s.client import RealKubeClient
from workloads.k8s.errors import K8sGoneError, K8sTransientError
from workloads.k8s.watch import Watcher, WatchSpec

pytestmark = pytest.mark.cluster
LABEL = "t07=watch"


class FaultyStream:
    """Delegates to the real client; `gap()` breaks streams, then answers 410 `gone` times."""

    def __init__(self, real: RealKubeClient) -> None:
        self.real = real
        self.down = threading.Event()
        self.gone = 0
        self.error_events = 0  # streams that open with an in-stream ERROR 410 event
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def stream(self, path: str, query: dict[str, str] | None = None, timeout: float = 330) -> Iterator[bytes]:
        if self.down.is_set():
            raise K8sTransientError(0, "connection refused (injected)")
        with self.lock:
            if self.gone > 0:
                self.gone -= 1
                raise K8sGoneError(410, "too old resource version (injected)")
            if self.error_events > 0:
                self.error_events -= 1
                return iter([b'{"type":"ERROR","object":{"kind":"Status","code":410,"message":"too old"}}'])
        inner = self.real.stream(path, query, timeout)
        return self._guard(inner)

    def _guard(self, inner: Iterator[bytes]) -> Iterator[bytes]:
        for line in inner:
            if self.down.is_set():
                raise K8sTransientError(0, "connection cut (injected)")
            yield line


class Mirror:
    """What a consumer of the watch believes: pod name -> labels['v']."""

    def __init__(self) -> None:
        self.pods: dict[str, str] = {}

    def on_event(self, kind: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if kind == "DELETED":
            self.pods.pop(name, None)
        else:
            self.pods[name] = obj["metadata"].get("labels", {}).get("v", "")

    def on_relist(self, items: list[dict[str, Any]]) -> None:
        self.pods = {o["metadata"]["name"]: o["metadata"].get("labels", {}).get("v", "") for o in items}


def pod(name: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"t07": "watch", "v": version}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "registry.invalid/x:1"}]},
    }


def truth(kube: RealKubeClient, ns: str) -> dict[str, str]:
    body = orjson.loads(kube.list_raw(f"/api/v1/namespaces/{ns}/pods", {"labelSelector": LABEL}))
    return {
        o["metadata"]["name"]: o["metadata"]["labels"].get("v", "")
        for o in body["items"]
        if not o["metadata"].get("deletionTimestamp")
    }


def start(
    kube: RealKubeClient, ns: str, min_relist: float
) -> tuple[Watcher, Mirror, FaultyStream, threading.Event]:
    faulty, mirror, stop = FaultyStream(kube), Mirror(), threading.Event()
    spec = WatchSpec("pods", f"/api/v1/namespaces/{ns}/pods", LABEL, mirror.on_event, mirror.on_relist)
    watcher = Watcher(
        client=faulty, spec=spec, watch_timeout_s=5, min_relist_interval_s=min_relist, max_backoff_s=1.0
    )
    threading.Thread(target=watcher.run, args=(stop,), daemon=True).start()
    return watcher, mirror, faulty, stop


def live(kube: RealKubeClient, ns: str) -> dict[str, str]:
    return {k: v for k, v in truth(kube, ns).items()}


def test_changes_during_a_cut_and_410_are_reflected_after_one_relist(
    kube: RealKubeClient, k8s_namespace: str
) -> None:
    ns, pods = k8s_namespace, f"/api/v1/namespaces/{k8s_namespace}/pods"
    for i in range(3):
        kube.create(pods, pod(f"p{i}", "1"))
    watcher, mirror, faulty, stop = start(kube, ns, min_relist=10)
    try:
        wait_for(lambda: mirror.pods == {"p0": "1", "p1": "1", "p2": "1"}, 30, "initial sync")
        faulty.gone = 1
        faulty.down.set()
        time.sleep(1.5)
        kube.create(pods, pod("p3", "1"))
        kube.patch(f"{pods}/p1", {"metadata": {"labels": {"v": "2"}}})
        kube.delete(f"{pods}/p0", propagation="Background")
        kube.create(pods, pod("p4", "1"))
        relists_before = watcher.stats.relists
        faulty.down.clear()
        wait_for(lambda: mirror.pods == live(kube, ns), 60, "the gap reflected")
        assert watcher.stats.gone == 1
        assert watcher.stats.relists == relists_before + 1
        assert mirror.pods.get("p1") == "2"
        assert {"p3", "p4"} <= set(mirror.pods)
        assert "p0" not in mirror.pods
    finally:
        stop.set()


def test_repeated_410_relists_at_most_six_times_a_minute(kube: RealKubeClient, k8s_namespace: str) -> None:
    ns, pods = k8s_namespace, f"/api/v1/namespaces/{k8s_namespace}/pods"
    kube.create(pods, pod("q0", "1"))
    watcher, mirror, faulty, stop = start(kube, ns, min_relist=10)
    try:
        wait_for(lambda: mirror.pods == {"q0": "1"}, 30, "initial sync")
        faulty.gone = 3
        faulty.down.set()
        time.sleep(1.5)
        kube.create(pods, pod("q1", "1"))
        faulty.down.clear()
        wait_for(
            lambda: watcher.stats.gone >= 3 and mirror.pods == live(kube, ns), 90, "recovery after 3 x 410"
        )
        times = watcher.stats.relist_times
        gaps = [b - a for a, b in itertools.pairwise(times[1:])]
        assert all(gap >= 9.5 for gap in gaps), gaps  # <= 6 relists a minute, no hot loop
        assert len(times) <= 1 + 3
    finally:
        stop.set()


def test_an_in_stream_410_error_event_relists(kube: RealKubeClient, k8s_namespace: str) -> None:
    """The API server may answer a watch with 200 and an ERROR event (410) as its first line: the
    watcher must relist, so a pod made meanwhile appears."""
    ns, pods = k8s_namespace, f"/api/v1/namespaces/{k8s_namespace}/pods"
    kube.create(pods, pod("e0", "1"))
    watcher, mirror, faulty, stop = start(kube, ns, min_relist=1)
    try:
        wait_for(lambda: mirror.pods == {"e0": "1"}, 30, "initial sync")
        relists = watcher.stats.relists
        faulty.down.set()  # cut the stream; the next one opens with the ERROR event
        faulty.error_events = 1
        kube.create(pods, pod("e1", "1"))
        faulty.down.clear()
        wait_for(
            lambda: watcher.stats.relists > relists and mirror.pods == live(kube, ns),
            60,
            "relist after ERROR",
        )
        assert faulty.error_events == 0  # the ERROR stream was read
        assert watcher.stats.gone >= 1
    finally:
        stop.set()
