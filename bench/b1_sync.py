"""B1: cold sync of nodes and pods (the controller's relist path) vs kubectl and the official client.

Ours is the shared watch machinery's LIST: raw bytes through the official client's connection
(`_preload_content=False`), orjson, and a projection to the few fields the portal keeps, with the
garbage collector frozen around the decode. References, in the same run on the same cluster:
`kubectl get pods -A -o json` (+ nodes), and the official client's plain typed list.
Metrics: wall (goal <= 1.2x kubectl), CPU (goal: >= 8x less than the official client), peak
Python heap during our sync vs the response body (goal <= 6x).

`run_sizes` (`python -m bench B1 --sizes`) measures at three sizes on one cluster grown between steps
(STEPS: 100 / 300 / 1,000 nodes full, 10 / 30 / 100 ci), pods and namespaces growing with the nodes
at the full profile's density. With $GPUPORTAL_BENCH_KUBECONFIG the reused cluster must not hold more
nodes than the first step, or the small steps are larger than their labels say.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import time
import tracemalloc
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubernetes.client import ApiClient

from bench.common import Profile, Result, log
from deploy.localcluster import ClusterHandle, bin_dir, create_gpu_nodes, kube, start_cluster, stop_cluster

SIZES = {"ci": (100, 2000, 20), "full": (1000, 20000, 200)}  # nodes, pods, namespaces
STEPS: dict[Profile, tuple[int, ...]] = {"ci": (10, 30, 100), "full": (100, 300, 1000)}  # nodes
PODS_PER_NODE, NODES_PER_NAMESPACE = 20, 5  # the full profile's density, kept at every step
BACKEND = "local kwok cluster (real kube-apiserver 1.36)"


@contextmanager
def bench_cluster(name: str, nodes: int) -> Iterator[ClusterHandle]:
    """A fresh cluster, or the one at $GPUPORTAL_BENCH_KUBECONFIG grown to `nodes` GPU nodes."""
    reuse = os.environ.get("GPUPORTAL_BENCH_KUBECONFIG")
    if reuse:
        names, seconds = create_gpu_nodes(Path(reuse), nodes, start=0, timeout=600)
        log(f"reusing {reuse}; {len(names)} nodes Ready after {seconds:.1f} s")
        yield ClusterHandle("external", Path(reuse), Path(reuse).parent, bin_dir(), names)
        return
    log(f"starting cluster {name} with {nodes} nodes")
    handle = start_cluster(name=name, nodes=nodes, timeout=600)
    try:
        yield handle
    finally:
        stop_cluster(handle.name, handle.run_dir)


def bare_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpu-portal", "bench": "b1"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "registry.invalid/x:1"}]},
    }


def create_pods(api: ApiClient, count: int, namespaces: int, prefix: str = "b") -> list[tuple[str, str]]:
    names = [(f"{prefix}-ns-{i % namespaces}", f"{prefix}-pod-{i}") for i in range(count)]
    for ns in sorted({ns for ns, _ in names}):
        kube.create_namespace(api, ns)
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda p: kube.create(api, f"/api/v1/namespaces/{p[0]}/pods", bare_pod(p[1])), names))
    return names


def project(item: dict[str, Any]) -> tuple[str, str, str, str]:
    meta, spec, status = item["metadata"], item.get("spec") or {}, item.get("status") or {}
    return meta.get("namespace", ""), meta["name"], status.get("phase", ""), spec.get("nodeName", "")


def portal_client(kubeconfig: Path) -> Any:
    from kubernetes import config

    from workloads.k8s.client import RealKubeClient

    return RealKubeClient(config.new_client_from_config(config_file=str(kubeconfig)))  # type: ignore[no-untyped-call]


def sync(client: Any) -> tuple[int, int]:
    """One cold sync through the shared watch machinery's relist (paged raw LIST, orjson, projection
    per item as each page is decoded); returns (objects kept, body bytes)."""
    from workloads.k8s.watch import Watcher, WatchSpec

    kept: dict[tuple[str, str], Any] = {}
    counter = _CountingClient(client)

    def keep(items: list[dict[str, Any]]) -> None:
        kept.update((item["key"], item) for item in items)

    for path in ("/api/v1/nodes", "/api/v1/pods"):
        spec = WatchSpec(path, path, None, lambda kind, obj: None, keep, transform=_projection)
        Watcher(client=counter, spec=spec).relist()  # type: ignore[arg-type]
    return len(kept), counter.bytes


def _projection(item: dict[str, Any]) -> dict[str, Any]:
    ns, name, phase, node = project(item)
    return {"key": (ns, name), "phase": phase, "node": node}


class _CountingClient:
    def __init__(self, inner: Any) -> None:
        self.inner, self.bytes = inner, 0

    def list_raw(self, path: str, query: dict[str, str] | None = None) -> bytes:
        body: bytes = self.inner.list_raw(path, query)
        self.bytes += len(body)
        return body


def ours(kubeconfig: Path) -> tuple[int, int]:
    return sync(portal_client(kubeconfig))


def official(kubeconfig: Path) -> tuple[int, int]:
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))  # type: ignore[no-untyped-call]
    nodes = api.list_node().items
    pods = api.list_pod_for_all_namespaces().items
    return len(nodes) + len(pods), 0


def kubectl(kubeconfig: Path) -> tuple[int, int]:
    for kind in ("nodes", "pods"):
        subprocess.run(
            [str(bin_dir() / "kubectl"), "--kubeconfig", str(kubeconfig), "get", kind, "-A", "-o", "json"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return 0, 0


def measure(fn: Callable[[Path], tuple[int, int]], kubeconfig: Path, runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds (this process plus children) over `runs` runs."""
    walls, cpus = [], []
    for _ in range(runs):
        before, children = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        fn(kubeconfig)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        child = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
        cpus.append(time.process_time() - before + child)
    return statistics.median(walls), statistics.median(cpus)


def peak_heap(kubeconfig: Path) -> tuple[float, int]:
    """Peak Python heap of the sync itself (client set up before tracing starts)."""
    client = portal_client(kubeconfig)
    sync(client)
    tracemalloc.start()
    _, body = sync(client)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return float(peak), body


def run(profile: Profile) -> Iterable[Result]:
    nodes, pods, namespaces = SIZES[profile]
    with (
        bench_cluster(os.environ.get("GPUPORTAL_BENCH_CLUSTER", "gpuportal-bench"), nodes) as handle,
        handle.api() as api,
    ):
        created = _create(api, pods, namespaces, "b")
        results = measure_all(profile, handle.kubeconfig, "")
        _delete_namespaces(api, created)
    yield from results


def run_sizes(profile: Profile) -> Iterable[Result]:
    """One cluster grown step by step (starting a fresh one per step would cost minutes each)."""
    steps = STEPS[profile]
    with (
        bench_cluster(os.environ.get("GPUPORTAL_BENCH_CLUSTER", "gpuportal-bench"), steps[0]) as handle,
        handle.api() as api,
    ):
        created: list[tuple[str, str]] = []
        for step, (before, nodes) in enumerate(zip((0, *steps), steps, strict=False)):
            if step:  # the cluster starts with the first step's nodes
                create_gpu_nodes(handle.kubeconfig, nodes - before, start=before, timeout=600)
            added = nodes - before
            created += _create(api, added * PODS_PER_NODE, max(1, added // NODES_PER_NAMESPACE), f"b{step}")
            # Yielded as each step ends: a full run takes hours, and a crash should keep what was measured.
            yield from measure_all(profile, handle.kubeconfig, f"nodes={nodes}")
        _delete_namespaces(api, created)


def _create(api: ApiClient, pods: int, namespaces: int, prefix: str) -> list[tuple[str, str]]:
    t0 = time.monotonic()
    created = create_pods(api, pods, namespaces, prefix)
    log(f"created {pods} pods in {namespaces} namespaces in {time.monotonic() - t0:.1f} s")
    return created


def _delete_namespaces(api: ApiClient, created: list[tuple[str, str]]) -> None:
    for ns in sorted({ns for ns, _ in created}):
        kube.delete(api, f"/api/v1/namespaces/{ns}")


def measure_all(profile: Profile, kubeconfig: Path, size: str) -> list[Result]:
    """Ours and both references on the cluster as it is now; `size` labels the lines."""
    runs = 3 if profile == "ci" else 2
    items, body = ours(kubeconfig)
    log(f"sync sees {items} objects, {body / 1e6:.1f} MB of JSON")
    ours_wall, ours_cpu = measure(ours, kubeconfig, runs)
    kubectl_wall, kubectl_cpu = measure(kubectl, kubeconfig, runs)
    official_wall, official_cpu = measure(official, kubeconfig, runs)
    peak, body = peak_heap(kubeconfig)
    log(
        f"wall ours {ours_wall:.3f} kubectl {kubectl_wall:.3f} official {official_wall:.3f}; "
        f"cpu ours {ours_cpu:.3f} kubectl {kubectl_cpu:.3f} official {official_cpu:.3f}"
    )

    def res(metric: str, a: float, b: float, goal: str, ok: bool) -> Result:
        return Result("B1", profile, BACKEND, metric, a, b, goal, ok, size)

    return [
        res("wall_s_vs_kubectl", ours_wall, kubectl_wall, "<= 1.2x", ours_wall <= 1.2 * kubectl_wall),
        res("cpu_s_vs_official_client", ours_cpu, official_cpu, "<= 0.125x", ours_cpu * 8 <= official_cpu),
        res("peak_heap_bytes_vs_body", peak, float(body), "<= 6x", peak <= 6 * body),
    ]
