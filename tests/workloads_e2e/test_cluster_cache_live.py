"""The controller's watch-fed copy of nodes and live pods against the real control plane: after a
GPU pod is scheduled and after it is deleted, the copy gives the admission queue the same nodes
(and the same bound jobs) as a LIST of the cluster does."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from tests.workloads_e2e.procs import wait_for
from tests.workloads_e2e.test_queue_cluster import _gpu_pod
from workloads.admission.live import LiveCluster, live_cluster, node_states
from workloads.controller.cluster_cache import ClusterCache
from workloads.k8s import paths
from workloads.k8s.client import RealKubeClient
from workloads.k8s.labels import PROJECT_LABEL, UID_LABEL
from workloads.k8s.watch import Watcher, WatchSpec
from workloads.queue import NodeState

pytestmark = pytest.mark.cluster


@pytest.fixture
def cache(kube: RealKubeClient) -> Iterator[ClusterCache]:
    cache = ClusterCache()
    # The controller's node watch also writes the gpu mirror; only the copy is under test here.
    nodes = WatchSpec("nodes", paths.NODES, None, lambda kind, obj: None, lambda items: None)
    watchers = [Watcher(client=kube, spec=spec, watch_timeout_s=3) for spec in cache.specs([nodes])]
    cache.bind(watchers)
    stop = threading.Event()
    threads = [threading.Thread(target=w.run, args=(stop,), daemon=True) for w in watchers]
    for thread in threads:
        thread.start()
    try:
        yield cache
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=40)


def _states(cluster: LiveCluster) -> tuple[NodeState, ...]:
    return node_states(cluster, reserved={}, slices_per_gpu=4)


def _agree(cache: ClusterCache, kube: RealKubeClient) -> tuple[NodeState, ...] | None:
    """The nodes as the copy gives them, when a LIST taken now gives the same (pods come and go)."""
    copy = cache.live()
    if copy is None:
        return None
    states = _states(copy)
    return states if states == _states(live_cluster(kube)) else None


def test_the_copy_matches_a_list_after_a_pod_is_bound_and_deleted(
    kube: RealKubeClient, cache: ClusterCache
) -> None:
    before = wait_for(lambda: _agree(cache, kube), 60, "the copy to match a LIST")
    node = next(n for n in before if n.schedulable and n.free_gpus >= 2)
    ns = f"cache-{uuid.uuid4().hex[:6]}"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    try:
        wait_for(lambda: kube.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default"), 60, "default SA")
        # Pinned by a node selector, not nodeName: the scheduler binds it, so the copy sees it
        # created unbound and then bound (a MODIFIED event), as a job's pod is.
        pod = _gpu_pod("held", 2)
        pod["metadata"]["labels"] = {UID_LABEL: f"uid-{ns}", PROJECT_LABEL: ns}
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node.name}
        kube.create(f"/api/v1/namespaces/{ns}/pods", pod)

        def held() -> tuple[NodeState, ...] | None:
            states = _agree(cache, kube)
            mine = next((n for n in states or () if n.name == node.name), None)
            return states if mine is not None and mine.free_gpus <= node.free_gpus - 2 else None

        wait_for(held, 60, "the bound pod's 2 GPUs taken in the copy")
        copy = cache.live()
        assert copy is not None
        assert f"uid-{ns}" in copy.bound_job_uids()
        kube.delete(f"/api/v1/namespaces/{ns}/pods/held")

        def gone() -> bool:
            live = cache.live()
            mine = [p for p in (live.pods if live else []) if p["metadata"].get("namespace") == ns]
            return live is not None and not mine and _agree(cache, kube) is not None

        wait_for(gone, 120, "the deleted pod gone from the copy, which matches a LIST again")
    finally:
        kube.delete(f"/api/v1/namespaces/{ns}")
