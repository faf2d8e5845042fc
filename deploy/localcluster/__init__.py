"""The local Kubernetes control plane for tests and the demo (deploy/localcluster/README.md).

A plain module: it never imports Django, and talks to the API server through its own small REST
client (`kubeapi.KubeApi`) because the `kubernetes` package is confined to `workloads.k8s`.

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
from deploy.localcluster.kubeapi import KubeApi, KubeApiError
from deploy.localcluster.nodes import GpuNodeSpec, ready_node_names, wait_nodes_ready
from deploy.localcluster.paths import BinariesMissingError, bin_dir, build, missing_binaries, run_dir

__all__ = [
    "DEFAULT_NAME",
    "BinariesMissingError",
    "ClusterHandle",
    "GpuNodeSpec",
    "KubeApi",
    "KubeApiError",
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
