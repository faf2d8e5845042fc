"""Kubernetes and NVIDIA names that the node side and the portal must agree on.

The one home of these strings: the plugin and agent import them here, and so do the portal apps
(`workloads.k8s`, `gpu`, `deploy.localcluster`). Plain constants and one parser, so importing this
module never pulls in Django or the plugin's gRPC code.
"""

from __future__ import annotations

from datetime import datetime

# Extended resources the device plugin advertises: whole GPUs, and MPS slices of shared GPUs.
GPU_RESOURCE = "nvidia.com/gpu"
SHARED_RESOURCE = "nvidia.com/gpu.shared"
# Node labels of NVIDIA's GPU feature discovery, which the local cluster's simulated nodes copy.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"

# The local cluster's optional real node (deploy/localcluster/README.md) carries this label and a
# NoSchedule taint of this key; only portal jobs with the real-node placement (tests, demo) go there.
REAL_NODE_LABEL = "gpuportal.dev/real-node"
# Set by operators: the network switch (or rail, or rack) a node hangs off. The workers of a job of
# several go to nodes under one switch where as few nodes allow it.
SWITCH_LABEL = "gpuportal.dev/switch"

# Everything the portal writes to the cluster carries this label and this field manager.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGER = "gpu-portal"

# The ConfigMap the portal writes and every node's plugin reads: which GPUs are shared, in how many
# slices, and which are out of service.
SHARING_CONFIG_NAMESPACE = "gpu-portal-system"
SHARING_CONFIG_NAME = "gpu-portal-sharing"
SHARING_CONFIG_KEY = "sharing.json"


def parse_time(text: str | None) -> datetime | None:
    """A Kubernetes timestamp (RFC 3339, usually ending in "Z") as an aware datetime; None if empty."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None
