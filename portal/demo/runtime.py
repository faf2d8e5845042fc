"""The embedded runtime of `make demo`: worker, periodic schedule and controller as threads of one process.

Production runs these as separate processes (web, `celery worker`, `celery beat`, `manage.py controller`).
Embedded mode has no Redis, so the in-memory broker only reaches a worker inside the same process.
"""

from __future__ import annotations

import logging
import threading
from contextlib import AbstractContextManager
from typing import Any

from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.db import close_old_connections

from portal.celery import app
from workloads.controller.loop import Controller

log = logging.getLogger(__name__)
QUEUES = ("celery", "reconcile", "notify")


def worker_thread() -> AbstractContextManager[Any]:
    """A solo-pool Celery worker consuming every queue, in a thread of this process."""
    return start_worker(
        app,
        pool="solo",
        concurrency=1,
        perform_ping_check=False,
        queues=list(QUEUES),
        loglevel="WARNING",
        shutdown_timeout=10.0,
    )


def _beat(stop: threading.Event) -> None:
    """Sends the CELERY_BEAT_SCHEDULE tasks at their intervals (fixed-interval entries only)."""
    schedule_table: dict[str, dict[str, Any]] = settings.CELERY_BEAT_SCHEDULE
    due = {name: 0.0 for name in schedule_table}
    elapsed = 0.0
    while not stop.wait(1.0):
        elapsed += 1.0
        for name, entry in schedule_table.items():
            schedule = entry.get("schedule")
            if isinstance(schedule, (int, float)) and elapsed >= due[name]:
                due[name] = elapsed + float(schedule)
                app.send_task(entry["task"], args=entry.get("args", ()), queue=_queue(entry["task"]))


def _queue(task: str) -> str:
    route = settings.CELERY_TASK_ROUTES.get(task, {}) if hasattr(settings, "CELERY_TASK_ROUTES") else {}
    return str(route.get("queue", "celery"))


def _controller(stop: threading.Event) -> None:
    close_old_connections()
    Controller(tick_s=2.0).run(stop)


def start_background(stop: threading.Event) -> list[threading.Thread]:
    threads = [
        threading.Thread(target=_beat, args=(stop,), name="embedded-beat", daemon=True),
        threading.Thread(target=_controller, args=(stop,), name="embedded-controller", daemon=True),
    ]
    for thread in threads:
        thread.start()
    return threads
