"""A node's desired state in the cluster: its cordon flag and the plugin's sharing config.

- `NodeCordonReconciler` merge-patches `spec.unschedulable` when the operators' intent
  (`Node.desired_cordoned`) differs from the Node; it never creates or deletes Nodes.
- `PluginConfigReconciler` keeps the ConfigMap the node DaemonSet mounts (docs/plugin.md:
  `gpu-portal-sharing` in `gpu-portal-system`, key `sharing.json`) equal to
  {"gpus": {"<uuid>": {"mode": "exclusive"|"shared", "slices": N}}} for every GPU of every live node;
  each node's plugin reads its own UUIDs from it. The file is computed from the database on every
  run (level-triggered) and written with a resourceVersion-guarded PUT, so two node tasks racing
  cannot leave an older picture behind: the loser gets 409, which retries with a fresh read.
"""

from __future__ import annotations

import json
from typing import Any

from gpu import app_settings, selectors
from gpu.models import Node
from workloads.k8s.client import KubeClient
from workloads.k8s.reconcilers.base import NeedsUpdate, Obj, Reconciler

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-portal"}


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{name}"


def configmap_collection(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps"


def config_text(config: dict[str, Any]) -> str:
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
        self.key = app_settings.plugin_config_key()

    @property
    def collection(self) -> str:
        return configmap_collection(self.namespace)

    @property
    def path(self) -> str:
        return f"{self.collection}/{self.name}"

    def desired(self) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": dict(MANAGED_BY)},
            "data": {self.key: config_text(selectors.plugin_config())},
        }

    def reconcile(self, current: Obj, desired: Obj) -> None:
        text = (current.get("data") or {}).get(self.key)
        try:
            same = text is not None and json.loads(text) == json.loads(desired["data"][self.key])
        except ValueError:
            same = False
        if not same:
            raise NeedsUpdate

    def create(self, desired: Obj) -> Obj | None:
        created = self.client.create(self.collection, desired)
        if created is None:  # someone else created it meanwhile: converge onto theirs
            current = self.current()
            return self.update(current, desired) if current is not None else None
        return created

    def update(self, current: Obj, desired: Obj) -> Obj:
        body = {**current, "data": {**(current.get("data") or {}), **desired["data"]}}
        return self.client.replace(self.path, body)

    def delete(self) -> bool:
        return False  # shared by every node; a deleted node's GPUs simply leave the file


RECONCILE_ORDER: tuple[type[Reconciler[Node]], ...] = (NodeCordonReconciler, PluginConfigReconciler)


def node_reconcile(*, node: Node, client: KubeClient) -> None:
    """Converge one node (a deleted node only drops out of the sharing file)."""
    for reconciler in RECONCILE_ORDER:
        if node.deleted and reconciler is NodeCordonReconciler:
            continue
        reconciler(node, client).up()
