"""A node's desired state in the cluster: its cordon flag and its line in the plugin's config.

- `NodeCordonReconciler` merge-patches `spec.unschedulable` when the operators' intent
  (`Node.desired_cordoned`) differs from the Node; it never creates or deletes Nodes.
- `PluginConfigReconciler` keeps the key `<node>.json` of the ConfigMap `gpu-portal-plugin-config`
  (namespace `gpu-portal-system`) equal to the node's sharing file,
  {"gpus": {"<uuid>": {"mode": "exclusive"|"shared", "slices": N}}}, which the plugin reads from
  the mounted ConfigMap (plugin/config.py). Each node writes only its own key with a JSON merge
  patch, so concurrent tasks for different nodes never overwrite each other.
"""

from __future__ import annotations

import json

from gpu import app_settings, selectors
from gpu.models import Node
from workloads.k8s.client import KubeClient
from workloads.k8s.reconcilers.base import NeedsUpdate, Obj, Reconciler

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-portal"}


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{name}"


def configmap_collection(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps"


def config_key(node_name: str) -> str:
    return f"{node_name}.json"


def config_text(config: Obj) -> str:
    """Stable text (sorted keys), so an unchanged config is never rewritten."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


class NodeCordonReconciler(Reconciler[Node]):
    kind = "Node"

    @property
    def path(self) -> str:
        return node_path(self.owner.name)

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


class PluginConfigReconciler(Reconciler[Node]):
    kind = "ConfigMap"

    def __init__(self, owner: Node, client: KubeClient) -> None:
        super().__init__(owner, client)
        self.namespace = app_settings.plugin_config_namespace()
        self.name = app_settings.plugin_config_name()

    @property
    def collection(self) -> str:
        return configmap_collection(self.namespace)

    @property
    def path(self) -> str:
        return f"{self.collection}/{self.name}"

    def desired(self) -> Obj:
        text = config_text(selectors.plugin_config(node=self.owner))
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": dict(MANAGED_BY)},
            "data": {config_key(self.owner.name): text},
        }

    def reconcile(self, current: Obj, desired: Obj) -> None:
        key = config_key(self.owner.name)
        if (current.get("data") or {}).get(key) != desired["data"][key]:
            raise NeedsUpdate

    def create(self, desired: Obj) -> Obj | None:
        # Another node's task may create it first (409): then merge our key into theirs.
        return self.client.create(self.collection, desired) or self.update({}, desired)

    def update(self, current: Obj, desired: Obj) -> Obj:
        return self.client.patch(self.path, {"data": desired["data"]})

    def delete(self) -> bool:
        """Remove only this node's key (a JSON merge patch with null)."""
        if self.client.get(self.path) is None:
            return False
        self.client.patch(self.path, {"data": {config_key(self.owner.name): None}})
        return True


RECONCILE_ORDER: tuple[type[Reconciler[Node]], ...] = (NodeCordonReconciler, PluginConfigReconciler)


def node_reconcile(*, node: Node, client: KubeClient) -> None:
    """Converge one node; a deleted node only loses its plugin config key."""
    if node.deleted:
        PluginConfigReconciler(node, client).down()
        return
    for reconciler in RECONCILE_ORDER:
        reconciler(node, client).up()
