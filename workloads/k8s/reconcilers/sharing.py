"""The GPU sharing ConfigMap: which GPU of the cluster is shared, in how many slices.

The node DaemonSet mounts it (docs/plugin.md: `gpu-portal-sharing` in `gpu-portal-system`, key
`sharing.json`); it holds {"gpus": {"<uuid>": {"mode": "exclusive"|"shared", "slices": N}}} for every
GPU of every live node, and each node's plugin reads its own UUIDs from it. The caller computes the
config from the database on every run (level-triggered); it is written with a resourceVersion-guarded
PUT, so two tasks racing cannot leave an older picture behind: the loser gets 409, which retries
with a fresh read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from workloads.k8s import labels, paths
from workloads.k8s.client import KubeClient
from workloads.k8s.reconcilers.base import NeedsUpdate, Obj, Reconciler


@dataclass(frozen=True)
class SharingConfig:
    namespace: str
    name: str
    key: str
    config: dict[str, Any]


def config_text(config: dict[str, Any]) -> str:
    """Stable text (sorted keys), so an unchanged config is never rewritten."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


class SharingConfigReconciler(Reconciler[SharingConfig]):
    kind = "ConfigMap"

    @property
    def collection(self) -> str:
        return paths.configmaps(self.owner.namespace)

    @property
    def path(self) -> str:
        return paths.configmap(self.owner.namespace, self.owner.name)

    def desired(self) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": labels.object_meta(self.owner.name, self.owner.namespace),
            "data": {self.owner.key: config_text(self.owner.config)},
        }

    def reconcile(self, current: Obj, desired: Obj) -> None:
        text = (current.get("data") or {}).get(self.owner.key)
        try:
            same = text is not None and json.loads(text) == json.loads(desired["data"][self.owner.key])
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


def sharing_reconcile(*, config: SharingConfig, client: KubeClient) -> None:
    SharingConfigReconciler(config, client).up()
