"""Simulated GPU nodes: Node objects that kwok keeps Ready and the real scheduler fills.

Each node looks like the reference machine (4x RTX 5090, 32 GiB each) with GFD-style labels.
Node status may be set on create (the Node strategy keeps it), and kwok's node-initialize stage
keeps capacity/allocatable and adds Ready plus the kubelet endpoint port of kwok's own server,
so pods/log reaches kwok at InternalIP 127.0.0.1.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from deploy.localcluster import kube
from deploy.localcluster.kube import JSON
from plugin import names

GPU = names.GPU_RESOURCE
GPU_SHARED = names.SHARED_RESOURCE


@dataclass(frozen=True)
class GpuNodeSpec:
    gpus: int = 4
    slices_per_gpu: int = 4
    gpu_product: str = "NVIDIA-GeForce-RTX-5090"
    gpu_memory_mib: int = 32768
    cpu: str = "64"
    memory: str = "512Gi"
    pods: str = "110"
    name_prefix: str = "gpu-node-"

    def resources(self) -> dict[str, str]:
        return {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": self.pods,
            "ephemeral-storage": "1Ti",
            GPU: str(self.gpus),
            GPU_SHARED: str(self.gpus * self.slices_per_gpu),
        }

    def labels(self, name: str) -> dict[str, str]:
        return {
            "type": "kwok",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            names.GPU_PRODUCT_LABEL: self.gpu_product,
            names.GPU_MEMORY_LABEL: str(self.gpu_memory_mib),
            names.GPU_COUNT_LABEL: str(self.gpus),
            names.GPU_PRESENT_LABEL: "true",
        }


def node_manifest(name: str, spec: GpuNodeSpec) -> JSON:
    """One Node; no kwok.x-k8s.io/node taint, so workloads need no toleration."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": spec.labels(name),
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
        },
        "spec": {},
        "status": {
            "capacity": spec.resources(),
            "allocatable": spec.resources(),
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"},
        },
    }


def node_names(count: int, spec: GpuNodeSpec, start: int = 0) -> list[str]:
    return [f"{spec.name_prefix}{i}" for i in range(start, start + count)]


def create_nodes(
    api: client.ApiClient, count: int, spec: GpuNodeSpec | None = None, *, start: int = 0
) -> list[str]:
    """Create nodes `<prefix><start>`..; existing ones are left as they are (idempotent)."""
    s = spec or GpuNodeSpec()
    names = node_names(count, s, start)
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda n: kube.create(api, "/api/v1/nodes", node_manifest(n, s)), names))
    return names


def delete_nodes(api: client.ApiClient, names: list[str]) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda n: kube.delete(api, f"/api/v1/nodes/{n}"), names))


def _is_ready(node: dict[str, Any]) -> bool:
    conds = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def ready_node_names(api: client.ApiClient, selector: str = "type=kwok") -> set[str]:
    # Paged, so a 1,000-node list stays a few small responses.
    names: set[str] = set()
    cont = ""
    while True:
        page = kube.get(
            api, "/api/v1/nodes", query={"labelSelector": selector, "limit": "500", "continue": cont}
        )
        names |= {n["metadata"]["name"] for n in page["items"] if _is_ready(n)}
        cont = page["metadata"].get("continue") or ""
        if not cont:
            return names


def wait_nodes_ready(
    api: client.ApiClient, names: list[str], timeout: float = 120.0, selector: str = "type=kwok"
) -> float:
    """Block until every named node (among those `selector` matches) is Ready; return the seconds."""
    start = time.monotonic()
    want = set(names)
    while True:
        missing = want - ready_node_names(api, selector)
        if not missing:
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{len(missing)} of {len(want)} nodes not Ready after {timeout:.0f} s")
        time.sleep(0.5)
