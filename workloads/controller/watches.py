"""What the controller watches, and what each change turns into.

Jobs and Pods (by the portal's label) become short id-keyed Celery tasks, sent by name with no
publish retry: a lost publish is repaired by the sweep and the outbox. Events (by namespace prefix)
go out in batches (`controller.event_batch`).
A job's reconcile is sent once per burst: while one is queued, more events of that job add none
(`publisher.enqueue_reconcile_uid`). A relist enqueues only the jobs whose resourceVersion changed
or that vanished.

Nodes are applied directly: mirroring a Node is one small row write with no Kubernetes call, so a
Celery hop would only add lag. A database error propagates to the Watcher, which backs off and
resumes from the last resourceVersion it completed, so no event is skipped. After each full list,
Nodes the cluster no longer has are marked deleted.

`WATCH_SPECS` lists the factories; another kind is one more line there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import close_old_connections, transaction

from gpu import services as gpu_services
from workloads import app_settings
from workloads.controller.event_batch import EventBatch
from workloads.k8s import labels, paths
from workloads.k8s.status import event_projection
from workloads.k8s.watch import WatchSpec
from workloads.services import publisher

Obj = dict[str, Any]


class _SeenVersions:
    """Last resourceVersion per job uid, so a relist enqueues only what changed or vanished."""

    def __init__(self) -> None:
        self.versions: dict[str, str] = {}
        self.lock = threading.Lock()

    def changed(self, items: list[Obj]) -> list[str]:
        fresh = {_uid(o): o["metadata"].get("resourceVersion", "") for o in items if _uid(o)}
        with self.lock:
            out = [u for u, rv in fresh.items() if self.versions.get(u) != rv]
            out += [u for u in self.versions if u not in fresh]
            self.versions = fresh
        return out

    def seen(self, uid: str, rv: str) -> None:
        with self.lock:
            self.versions[uid] = rv


def _uid(obj: Obj) -> str:
    return str(((obj.get("metadata") or {}).get("labels") or {}).get(labels.UID_LABEL, ""))


def _job_change(seen: _SeenVersions) -> Callable[[str, Obj], None]:
    def handle(kind: str, obj: Obj) -> None:
        uid = _uid(obj)
        if uid:
            seen.seen(uid, obj["metadata"].get("resourceVersion", ""))
            publisher.enqueue_reconcile_uid(uid)

    return handle


def _relisted(seen: _SeenVersions) -> Callable[[list[Obj]], None]:
    def handle(items: list[Obj]) -> None:
        for uid in seen.changed(items):
            publisher.enqueue_reconcile_uid(uid)

    return handle


_job_versions, _pod_versions = _SeenVersions(), _SeenVersions()


def job_watch_spec() -> WatchSpec:
    return WatchSpec(
        "jobs",
        paths.ALL_JOBS,
        labels.MANAGED_SELECTOR,
        _job_change(_job_versions),
        _relisted(_job_versions),
    )


def pod_watch_spec() -> WatchSpec:
    return WatchSpec(
        "pods",
        paths.ALL_PODS,
        labels.MANAGED_SELECTOR,
        _job_change(_pod_versions),
        _relisted(_pod_versions),
    )


# The controller runs its flusher (`Controller.run`); events wait there at most FLUSH_S.
EVENTS = EventBatch()


def _on_k8s_event(kind: str, obj: Obj) -> None:
    ns = str((obj.get("metadata") or {}).get("namespace", ""))
    if kind == "DELETED" or not app_settings.is_portal_namespace(ns):
        return
    event = event_projection(obj)
    if event is not None:
        EVENTS.add(event)


def event_watch_spec() -> WatchSpec:
    # Events carry no labels, so this one filters by namespace prefix and involved object name.
    return WatchSpec("events", paths.ALL_EVENTS, None, _on_k8s_event, lambda items: None)


def on_node_event(kind: str, obj: Obj) -> None:
    close_old_connections()
    with transaction.atomic():
        if kind == "DELETED":
            gpu_services.node_remove(name=str((obj.get("metadata") or {}).get("name", "")))
        elif kind in ("ADDED", "MODIFIED"):
            gpu_services.node_apply(raw=obj)


def on_node_relist(items: list[Obj]) -> None:
    close_old_connections()
    with transaction.atomic():
        for item in items:
            gpu_services.node_apply(raw=item)
        gpu_services.node_relist(names=[str(item["metadata"]["name"]) for item in items])


def node_watch_spec() -> WatchSpec:
    return WatchSpec("nodes", paths.NODES, None, on_node_event, on_node_relist)


WATCH_SPECS: list[Callable[[], WatchSpec]] = [
    job_watch_spec,
    pod_watch_spec,
    event_watch_spec,
    node_watch_spec,
]
