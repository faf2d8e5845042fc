"""The controller process: leader election, watches, the admission loop and the outbox.

Run with `python manage.py controller`. It holds the long-lived watch streams (never inside a
Celery task) and turns every change into a short id-keyed Celery task; it writes to the database
only through the outbox dispatcher and the admission pass. A second replica waits on the Lease.

Watchers come from `WATCH_SPECS`, a list of factories: another app adds a kind with one line,
e.g. `WATCH_SPECS.append(node_watch_spec)`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from django.db import close_old_connections

from workloads import app_settings
from workloads.admission import admission_pass
from workloads.cluster_sync import event_projection
from workloads.dispatch import outbox_dispatch
from workloads.k8s import builders
from workloads.k8s.client import KubeClient, get_client
from workloads.k8s.lease import LeaderElector
from workloads.k8s.watch import Watcher, WatchSpec
from workloads.nodes import node_watch_spec

log = logging.getLogger(__name__)
Obj = dict[str, Any]


def _publish(task: Any, *args: Any) -> None:
    try:
        task.apply_async(args, retry_policy={"max_retries": 0})
    except Exception as exc:  # the sweep and the outbox repair a lost publish
        log.warning("publish of %s failed (broker down?): %r", task.name, exc)


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
    return str(((obj.get("metadata") or {}).get("labels") or {}).get(builders.UID_LABEL, ""))


def _job_change(seen: _SeenVersions) -> Callable[[str, Obj], None]:
    from workloads.tasks import reconcile_job_uid

    def handle(kind: str, obj: Obj) -> None:
        uid = _uid(obj)
        if uid:
            seen.seen(uid, obj["metadata"].get("resourceVersion", ""))
            _publish(reconcile_job_uid, uid)

    return handle


def _relisted(seen: _SeenVersions) -> Callable[[list[Obj]], None]:
    from workloads.tasks import reconcile_job_uid

    def handle(items: list[Obj]) -> None:
        for uid in seen.changed(items):
            _publish(reconcile_job_uid, uid)

    return handle


_job_versions, _pod_versions = _SeenVersions(), _SeenVersions()


def job_watch_spec() -> WatchSpec:
    return WatchSpec(
        "jobs",
        "/apis/batch/v1/jobs",
        builders.MANAGED_SELECTOR,
        _job_change(_job_versions),
        _relisted(_job_versions),
    )


def pod_watch_spec() -> WatchSpec:
    return WatchSpec(
        "pods",
        "/api/v1/pods",
        builders.MANAGED_SELECTOR,
        _job_change(_pod_versions),
        _relisted(_pod_versions),
    )


def _on_k8s_event(kind: str, obj: Obj) -> None:
    from workloads.tasks import record_k8s_event

    ns = str((obj.get("metadata") or {}).get("namespace", ""))
    if kind == "DELETED" or not ns.startswith(app_settings.namespace_prefix()):
        return
    event = event_projection(obj)
    if event is not None:
        _publish(record_k8s_event, event)


def event_watch_spec() -> WatchSpec:
    # Events carry no labels, so this one filters by namespace prefix and involved object name.
    return WatchSpec("events", "/api/v1/events", None, _on_k8s_event, lambda items: None)


WATCH_SPECS: list[Callable[[], WatchSpec]] = [job_watch_spec, pod_watch_spec, event_watch_spec]
WATCH_SPECS.append(node_watch_spec)


class Controller:
    def __init__(
        self, *, client: KubeClient | None = None, identity: str | None = None, tick_s: float = 2.0
    ) -> None:
        self.client = client or get_client()
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}"
        self.tick_s = tick_s
        self.elector = LeaderElector(
            client=self.client,
            namespace=app_settings.lease_namespace(),
            name="gpu-portal-controller",
            identity=self.identity,
        )
        self.watchers = [Watcher(client=self.client, spec=factory()) for factory in WATCH_SPECS]

    def run(self, stop: threading.Event) -> None:
        """Wait for leadership, then watch and loop until stop (or the lease is lost)."""
        if not self.elector.acquire(stop):
            return
        inner = threading.Event()
        threads = [threading.Thread(target=self.elector.renew_loop, args=(inner,), daemon=True)]
        threads += [
            threading.Thread(target=w.run, args=(inner,), name=f"watch-{w.spec.name}", daemon=True)
            for w in self.watchers
        ]
        for thread in threads:
            thread.start()
        try:
            while not stop.is_set() and not self.elector.lost.is_set():
                self.tick()
                stop.wait(self.tick_s)
        finally:
            inner.set()
            for thread in threads:
                thread.join(timeout=5)
            self.elector.release()

    def tick(self) -> None:
        """One admission pass and one outbox round; a database outage is logged and retried."""
        try:
            close_old_connections()
            admission_pass()
            outbox_dispatch()
        except Exception:
            log.warning("controller tick failed; retrying", exc_info=True)
