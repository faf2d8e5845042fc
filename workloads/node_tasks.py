"""Celery task for nodes: converge one node's desired state (cordon, GPU sharing) to the cluster.

Sent by name (`workloads.reconcile_node`) from gpu.services after commit, because gpu may not
import workloads. Thin (style rule 6): load by id, return quietly if gone, call one function.
"""

from __future__ import annotations

from celery import shared_task

from gpu.models import Node
from workloads.choices import Queue
from workloads.k8s.client import get_client
from workloads.k8s.reconcilers.node import node_reconcile
from workloads.tasks import RECONCILE_TASK


@shared_task(
    name="workloads.reconcile_node",
    queue=Queue.RECONCILE,
    **RECONCILE_TASK,
)
def reconcile_node(node_id: int) -> None:
    node = Node.objects.filter(pk=node_id).first()
    if node is not None:
        node_reconcile(node=node, client=get_client())
