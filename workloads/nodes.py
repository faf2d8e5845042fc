"""The Node watch: the cluster's Nodes mirrored into gpu.models.Node through gpu.services.

A `WatchSpec` for "/api/v1/nodes" run by the controller's shared `Watcher` (list + watch, relist on
410, periodic full relist). Events are applied directly: mirroring a Node is one small row write
with no Kubernetes call, so a Celery hop would only add lag. A database error propagates to the
Watcher, which backs off and resumes from the last resourceVersion it completed, so no event is
skipped. After each full list, Nodes the cluster no longer has are marked deleted.
"""

from __future__ import annotations

from typing import Any

from django.db import close_old_connections, transaction

from gpu import services
from workloads.k8s.watch import WatchSpec

Obj = dict[str, Any]


def on_node_event(kind: str, obj: Obj) -> None:
    close_old_connections()
    with transaction.atomic():
        if kind == "DELETED":
            services.node_remove(name=str((obj.get("metadata") or {}).get("name", "")))
        elif kind in ("ADDED", "MODIFIED"):
            services.node_apply(raw=obj)


def on_node_relist(items: list[Obj]) -> None:
    close_old_connections()
    with transaction.atomic():
        for item in items:
            services.node_apply(raw=item)
        services.node_relist(names=[str(item["metadata"]["name"]) for item in items])


def node_watch_spec() -> WatchSpec:
    return WatchSpec("nodes", "/api/v1/nodes", None, on_node_event, on_node_relist)
