"""Live node capacity for the admission queue, read from the cluster each cycle.

Free whole GPUs on a node = allocatable `nvidia.com/gpu` minus the requests of the bound,
non-terminal pods on it, minus the GPUs of portal jobs admitted onto it (`Job.planned_node`) whose
pod is not bound yet. So a job admitted a moment ago is never counted free twice, and a pod forced
into the cluster past the portal is still seen. MPS slices (`nvidia.com/gpu.shared`) are modelled as
`allocatable / slices_per_gpu` shared GPUs, filled in index order by the slices in use.

Nodes come from the cluster (not the gpu app's mirror), so the queue works when the node watch
is not running. The reads are two LISTs made before any database transaction is opened.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from plugin.names import GPU_PRODUCT_LABEL, GPU_RESOURCE, SHARED_RESOURCE
from workloads.k8s import labels, paths
from workloads.k8s.client import KubeClient
from workloads.queue import NodeState, SharedGpu

Obj = dict[str, Any]
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class LiveCluster:
    nodes: list[Obj]
    pods: list[Obj]

    def job_uids(self) -> set[str]:
        """Portal jobs (by uid label) that have a non-terminal pod, bound or not."""
        return {str(_labels(p)[labels.UID_LABEL]) for p in self.pods if labels.UID_LABEL in _labels(p)}

    def bound_job_uids(self) -> set[str]:
        """Portal jobs (by uid label) that have a bound, non-terminal pod."""
        return {
            str(_labels(p).get(labels.UID_LABEL))
            for p in self.pods
            if _node_of(p) and labels.UID_LABEL in _labels(p)
        }


def live_cluster(client: KubeClient) -> LiveCluster:
    nodes = (client.get(paths.NODES) or {}).get("items") or []
    pods = (client.get(paths.ALL_PODS) or {}).get("items") or []
    return LiveCluster(list(nodes), [p for p in pods if _live(p)])


def _labels(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _live(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES


def _node_of(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _requests(pod: Obj, resource: str) -> int:
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        value = ((container.get("resources") or {}).get("requests") or {}).get(resource)
        total += int(value or 0)
    return total


def _used(pods: Iterable[Obj], resource: str) -> dict[str, int]:
    used: dict[str, int] = {}
    for pod in pods:
        node = _node_of(pod)
        if node:
            used[node] = used.get(node, 0) + _requests(pod, resource)
    return used


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


def _schedulable(node: Obj) -> bool:
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def node_states(
    cluster: LiveCluster,
    *,
    reserved: Mapping[str, tuple[int, int]],
    slices_per_gpu: int,
    slice_plan: Mapping[str, list[int]] | None = None,
) -> tuple[NodeState, ...]:
    """`reserved`: node -> (gpus, slices) of admitted portal jobs whose pods are not bound yet.
    `slice_plan`: node -> slices of each shared GPU, as set per GPU in the admin."""
    gpus_used, slices_used = _used(cluster.pods, GPU_RESOURCE), _used(cluster.pods, SHARED_RESOURCE)
    out = []
    for node in cluster.nodes:
        name = str(node["metadata"]["name"])
        alloc = (node.get("status") or {}).get("allocatable") or {}
        total = int(alloc.get(GPU_RESOURCE) or 0)
        res_gpus, res_slices = reserved.get(name, (0, 0))
        free = max(0, total - gpus_used.get(name, 0) - res_gpus)
        advertised = int(alloc.get(SHARED_RESOURCE) or 0)
        sizes = _slice_sizes(advertised, slices_per_gpu, (slice_plan or {}).get(name))
        shared = _shared(advertised, slices_used.get(name, 0) + res_slices, sizes)
        if not total and not shared:
            continue
        gpu_type = _labels(node).get(GPU_PRODUCT_LABEL, "")
        out.append(NodeState(name, gpu_type, free, total, shared, _schedulable(node)))
    return tuple(out)
