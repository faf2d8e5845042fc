"""The controller process: leader election, watches, the admission loop and the outbox.

Run with `python manage.py controller`. It holds the long-lived watch streams (never inside a
Celery task), keeps a copy of the nodes and live pods from two of them for its admission cycle
(`cluster_cache`), and turns every change into a short id-keyed Celery task (`controller.watches`); it
writes to the database only through the outbox dispatcher, the node mirror and the admission cycle.
A second replica waits on the Lease.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time

from django.db import close_old_connections

from workloads import app_settings
from workloads.admission.cycle import admission_cycle
from workloads.controller.cluster_cache import ClusterCache
from workloads.controller.counts import WatchCounts
from workloads.controller.watches import EVENTS, WATCH_SPECS
from workloads.k8s.client import KubeClient, get_client
from workloads.k8s.lease import LeaderElector
from workloads.k8s.watch import Watcher
from workloads.services.publisher import outbox_dispatch

log = logging.getLogger(__name__)


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
        self.cache = ClusterCache()
        specs = self.cache.specs([factory() for factory in WATCH_SPECS])
        self.watchers = [Watcher(client=self.client, spec=spec) for spec in specs]
        self.cache.bind(self.watchers)
        self.watch_counts = WatchCounts(self.watchers)

    def run(self, stop: threading.Event) -> None:
        """Wait for leadership, then watch and loop until stop (or the lease is lost)."""
        if not self.elector.acquire(stop):
            return
        inner = threading.Event()
        for watcher in self.watchers:
            watcher.distrust()  # a copy from an earlier term of leadership is not this one's
        threads = [threading.Thread(target=self.elector.renew_loop, args=(inner,), daemon=True)]
        threads += [
            threading.Thread(target=w.run, args=(inner,), name=f"watch-{w.spec.name}", daemon=True)
            for w in self.watchers
        ]
        threads.append(threading.Thread(target=EVENTS.run, args=(inner,), name="event-batch", daemon=True))
        for thread in threads:
            thread.start()
        try:
            while not stop.is_set() and not self.elector.lost.is_set():
                self.tick()
                stop.wait(self.tick_s)
        finally:
            inner.set()
            for watcher in self.watchers:
                watcher.interrupt()  # a quiet stream would hold its thread until the next bookmark
            deadline = time.monotonic() + 5
            for thread in threads:
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
            self.watch_counts.flush()
            self.elector.release()

    def tick(self) -> None:
        """The watch figures, one admission cycle and one outbox round; a database outage is logged
        and retried."""
        try:
            self.watch_counts.flush()
            close_old_connections()
            admission_cycle(client=self.client, live=self.cache.live())
            outbox_dispatch()
        except Exception:
            log.warning("controller tick failed; retrying", exc_info=True)
