"""The local Kubernetes control plane for tests and the demo (deploy/localcluster/README.md).

Development tooling, no part of the portal: it never imports Django or a portal app, and talks to the
API server through the project's one Kubernetes client, the official `kubernetes` package
(`kube.py`: an `ApiClient` for a kubeconfig, and calls by path on raw JSON).

    handle = start_cluster(name="gpuportal", nodes=2)   # kubeconfig at handle.kubeconfig
    ...
    stop_cluster(handle.name, handle.run_dir)
"""

from deploy.localcluster.cluster import (
    DEFAULT_NAME,
    ClusterHandle,
    create_gpu_nodes,
    load_handle,
    start_cluster,
    stop_cluster,
    wait_api_ready,
)
from deploy.localcluster.nodes import GpuNodeSpec, ready_node_names, wait_nodes_ready
from deploy.localcluster.paths import BinariesMissingError, bin_dir, build, missing_binaries, run_dir

__all__ = [
    "DEFAULT_NAME",
    "BinariesMissingError",
    "ClusterHandle",
    "GpuNodeSpec",
    "bin_dir",
    "build",
    "create_gpu_nodes",
    "load_handle",
    "missing_binaries",
    "ready_node_names",
    "run_dir",
    "start_cluster",
    "stop_cluster",
    "wait_api_ready",
    "wait_nodes_ready",
]
