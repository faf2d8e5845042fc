"""Live node capacity for the admission queue, from the cluster as it is at each cycle.

Free whole GPUs on a node = allocatable `nvidia.com/gpu` minus the requests of the bound,
non-terminal pods on it, minus the GPUs of portal jobs admitted onto it (`Job.planned_nodes`, one
per worker) whose pod is not bound yet. So a job admitted a moment ago is never counted free twice,
and a pod forced into the cluster past the portal is still seen. MPS slices (`nvidia.com/gpu.shared`)
are modelled as `allocatable / slices_per_gpu` shared GPUs, filled in index order by the slices in use.

Nodes come from the cluster (not the gpu app's mirror), so the queue works when the node watch
is not running. The reads are two LISTs made before any database transaction is opened, or, in the
controller, the copies its node and pod watches keep (`controller.cluster_cache`), which hold each
pod as `pod_projection` trims it: the fields this module reads, no more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from plugin.names import GPU_PRODUCT_LABEL, GPU_RESOURCE, REAL_NODE_LABEL, SHARED_RESOURCE, SWITCH_LABEL
from workloads.choices import Placement
from workloads.k8s import labels, paths
from workloads.k8s.client import KubeClient
from workloads.k8s.quantity import mebibytes, millicores
from workloads.queue import NodeState, SharedGpu

Obj = dict[str, Any]
TERMINAL_PHASES = ("Succeeded", "Failed")


class Reserved(NamedTuple):
    """What admitted portal jobs whose pods are not bound yet hold on their planned node."""

    gpus: int = 0
    slices: int = 0
    cpu_millicores: int = 0
    memory_mib: int = 0


@dataclass(frozen=True)
class LiveCluster:
    nodes: list[Obj]
    pods: list[Obj]

    def job_uids(self) -> set[str]:
        """Portal jobs (by uid label) that have a non-terminal pod, bound or not."""
        return {str(_labels(p)[labels.UID_LABEL]) for p in self.pods if labels.UID_LABEL in _labels(p)}

    def bound_job_uids(self) -> set[str]:
        """Portal jobs (by uid label) that have a bound, non-terminal pod."""
        return {uid for uid, _ in self.bound_workers()}

    def bound_workers(self) -> set[tuple[str, int]]:
        """(job uid, worker index) of the bound, non-terminal pods of portal jobs; a job of one worker
        has worker 0 only (its pod has no completion index)."""
        return {
            (str(_labels(p)[labels.UID_LABEL]), labels.worker_index(p) or 0)
            for p in self.pods
            if _node_of(p) and labels.UID_LABEL in _labels(p)
        }


def live_cluster(client: KubeClient) -> LiveCluster:
    nodes = (client.get(paths.NODES) or {}).get("items") or []
    pods = (client.get(paths.ALL_PODS) or {}).get("items") or []
    return LiveCluster(list(nodes), [p for p in pods if is_live_pod(p)])


def pod_projection(pod: Obj) -> Obj:
    """What node_states and the job uid sets read of a pod; a 20,000-pod copy stays small."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    containers = [
        {"resources": {"requests": dict((c.get("resources") or {}).get("requests") or {})}}
        for c in spec.get("containers") or []
    ]
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "labels") if k in meta},
        "spec": {"nodeName": spec.get("nodeName") or "", "containers": containers},
        "status": {"phase": (pod.get("status") or {}).get("phase") or ""},
    }


def _labels(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def is_live_pod(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES


def _node_of(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _count(value: object) -> int:
    return int(str(value or 0))


def _requests(pod: Obj, resource: str, parse: Callable[[object], int]) -> int:
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        value = ((container.get("resources") or {}).get("requests") or {}).get(resource)
        total += parse(value or 0)
    return total


def _used(pods: Iterable[Obj], resource: str, parse: Callable[[object], int] = _count) -> dict[str, int]:
    used: dict[str, int] = {}
    for pod in pods:
        node = _node_of(pod)
        if node:
            used[node] = used.get(node, 0) + _requests(pod, resource, parse)
    return used


def _tenants(pods: Iterable[Obj]) -> dict[str, Counter[str]]:
    """Node -> project -> bound pods holding shared slices there. A pod the portal did not make
    counts as its namespace's own tenant, so no project is ever placed beside it."""
    out: dict[str, Counter[str]] = {}
    for pod in pods:
        node = _node_of(pod)
        if node and _requests(pod, SHARED_RESOURCE, _count):
            meta = pod.get("metadata") or {}
            who = _labels(pod).get(labels.PROJECT_LABEL) or f"namespace:{meta.get('namespace', '')}"
            out.setdefault(node, Counter())[who] += 1
    return out


def _memory_up(value: object) -> int:
    return mebibytes(value, up=True)


def _free(alloc: Obj, name: str, parse: Callable[[object], int], used: int) -> int | None:
    """Free CPU or memory of a node; None where the node does not advertise it (not modelled)."""
    if alloc.get(name) is None:
        return None
    return max(0, parse(alloc[name]) - used)


def _shared(allocatable: int, used: int, sizes: list[int]) -> tuple[SharedGpu, ...]:
    """The node's shared GPUs with their slice counts, filled in index order by the slices in use."""
    out = []
    for index, size in enumerate(sizes):
        take = min(size, used)
        used -= take
        out.append(SharedGpu(index=index, free_slices=size - take, total_slices=size))
    return tuple(out)


def _slice_sizes(allocatable: int, per_gpu: int, planned: list[int] | None) -> list[int]:
    """Each shared GPU's slices: as operators set them per GPU when that plan adds up to what the
    node advertises, else the cluster-wide default for every shared GPU."""
    if planned and sum(planned) == allocatable:
        return planned
    return [per_gpu] * (allocatable // max(1, per_gpu))


def _offered(node: Obj, alloc: Obj, unoffered: int) -> int:
    """Allocatable whole GPUs, at most capacity minus the GPUs the portal took out (self-healing)."""
    total = int(alloc.get(GPU_RESOURCE) or 0)
    capacity = int(((node.get("status") or {}).get("capacity") or {}).get(GPU_RESOURCE) or total)
    return max(0, min(total, capacity - unoffered)) if unoffered else total


def _placement(node: Obj) -> str:
    """The placement a node is set apart for: the local cluster's real node only, for now."""
    return Placement.REAL_NODE.value if _labels(node).get(REAL_NODE_LABEL) == "true" else ""


def _schedulable(node: Obj) -> bool:
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def node_states(
    cluster: LiveCluster,
    *,
    reserved: Mapping[str, Reserved],
    slices_per_gpu: int,
    slice_plan: Mapping[str, list[int]] | None = None,
    unoffered: Mapping[str, int] | None = None,
    reserved_tenants: Mapping[str, Mapping[str, int]] | None = None,
    cross_project: frozenset[str] = frozenset(),
) -> tuple[NodeState, ...]:
    """`reserved`: node -> what admitted portal jobs whose pods are not bound yet hold there.
    `slice_plan`: node -> slices of each shared GPU, as set per GPU in the admin. CPU and memory
    free = allocatable minus the bound pods' requests and the reservations, as the scheduler sees it.
    `unoffered`: node -> whole GPUs the portal does not offer (unhealthy or out of service); they leave
    the node's GPUs at once, before the kubelet drops them from allocatable (never counted twice).
    `reserved_tenants`: node -> project -> admitted slice jobs not bound yet; `cross_project`: nodes
    whose shared GPUs are all marked cross-project."""
    pods = cluster.pods
    tenants = _tenants(pods)
    gpus_used, slices_used = _used(pods, GPU_RESOURCE), _used(pods, SHARED_RESOURCE)
    cpu_used, memory_used = _used(pods, "cpu", millicores), _used(pods, "memory", _memory_up)
    out = []
    for node in cluster.nodes:
        name = str(node["metadata"]["name"])
        alloc = (node.get("status") or {}).get("allocatable") or {}
        total = _offered(node, alloc, (unoffered or {}).get(name, 0))
        res = reserved.get(name, Reserved())
        free = max(0, total - gpus_used.get(name, 0) - res.gpus)
        advertised = int(alloc.get(SHARED_RESOURCE) or 0)
        sizes = _slice_sizes(advertised, slices_per_gpu, (slice_plan or {}).get(name))
        shared = _shared(advertised, slices_used.get(name, 0) + res.slices, sizes)
        if not total and not shared:
            continue
        gpu_type = _labels(node).get(GPU_PRODUCT_LABEL, "")
        cpu = _free(alloc, "cpu", millicores, cpu_used.get(name, 0) + res.cpu_millicores)
        memory = _free(alloc, "memory", mebibytes, memory_used.get(name, 0) + res.memory_mib)
        held = tenants.get(name, Counter()) + Counter((reserved_tenants or {}).get(name, {}))
        out.append(
            NodeState(
                *(name, gpu_type, free, total, shared, _schedulable(node), cpu, memory),
                slice_tenants=tuple(sorted(held.items())),
                slices_cross_project=name in cross_project,
                placement=_placement(node),
                switch=_labels(node).get(SWITCH_LABEL, ""),
            )
        )
    return tuple(out)
