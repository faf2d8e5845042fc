"""Bring the cluster in line with the operators' node intent: cordon flags and GPU sharing.

The node task converges one node's cordon and then the cluster-wide sharing ConfigMap, whose
content is computed here from every live GPU (the reconcilers read no rows).
"""

from __future__ import annotations

from gpu import app_settings as gpu_settings
from gpu import selectors as gpu_selectors
from gpu.models import Node
from workloads.k8s.client import KubeClient
from workloads.k8s.reconcilers.node import node_reconcile
from workloads.k8s.reconcilers.sharing import SharingConfig, sharing_reconcile


def node_sync(*, node_id: int, client: KubeClient) -> None:
    """A node's cordon or one of its GPUs changed: converge the node, then the sharing file."""
    node = Node.objects.filter(pk=node_id).first()
    if node is None:
        return
    node_reconcile(node=node, client=client)
    sharing_sync(client=client)


def sharing_sync(*, client: KubeClient) -> None:
    """Rewrite the sharing ConfigMap from the database (a deleted node's GPUs simply leave it)."""
    config = SharingConfig(
        namespace=gpu_settings.plugin_config_namespace(),
        name=gpu_settings.plugin_config_name(),
        key=gpu_settings.plugin_config_key(),
        config=gpu_selectors.plugin_config(),
    )
    sharing_reconcile(config=config, client=client)
