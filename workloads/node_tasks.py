"""Celery task for nodes: converge one node's desired state (cordon, GPU sharing) to the cluster.

Sent by name (`workloads.reconcile_node`) from gpu.services after commit, because gpu may not
import workloads. Thin (style rule 6): load by id, return quietly if gone, call one function.
"""

from __future__ import annotations

from celery import shared_task

from gpu.models import Node
from workloads.choices import Queue
from workloads.k8s.client import get_client
from workloads.k8s.errors import K8sTransientError
from workloads.k8s.reconcilers.node import node_reconcile


@shared_task(
    name="workloads.reconcile_node",
    queue=Queue.RECONCILE,
    autoretry_for=(K8sTransientError,),
    retry_backoff=1,
    retry_backoff_max=30,
    retry_jitter=True,
    max_retries=8,
    soft_time_limit=60,
    time_limit=90,
    ignore_result=True,
)
def reconcile_node(node_id: int) -> None:
    node = Node.objects.filter(pk=node_id).first()
    if node is not None:
        node_reconcile(node=node, client=get_client())
