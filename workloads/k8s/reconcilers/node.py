"""A node's desired state in the cluster: its cordon flag.

`NodeCordonReconciler` merge-patches `spec.unschedulable` when the operators' intent
(`Node.desired_cordoned`) differs from the Node; it never creates or deletes Nodes. The GPU sharing
ConfigMap is cluster-wide, so it has its own reconciler (`reconcilers.sharing`) and its own task.
"""

from __future__ import annotations

from gpu.models import Node
from workloads.k8s import paths
from workloads.k8s.client import KubeClient
from workloads.k8s.reconcilers.base import NeedsUpdate, Obj, Reconciler


class NodeCordonReconciler(Reconciler[Node]):
    kind = "Node"

    @property
    def path(self) -> str:
        return paths.node(self.owner.name)

    def desired(self) -> Obj:
        return {"spec": {"unschedulable": bool(self.owner.desired_cordoned)}}

    def reconcile(self, current: Obj, desired: Obj) -> None:
        if self.owner.desired_cordoned is None:
            return  # operators have no opinion: the cluster's value stands
        if bool((current.get("spec") or {}).get("unschedulable", False)) != desired["spec"]["unschedulable"]:
            raise NeedsUpdate

    def create(self, desired: Obj) -> Obj | None:
        return None  # Nodes are the cluster's; a missing one is simply gone

    def update(self, current: Obj, desired: Obj) -> Obj:
        return self.client.patch(self.path, desired)

    def delete(self) -> bool:
        return False


def node_reconcile(*, node: Node, client: KubeClient) -> None:
    """Converge one node's cordon (a deleted node has nothing left to converge)."""
    if not node.deleted:
        NodeCordonReconciler(node, client).up()
