"""A Celery worker's liveness: a file its consumer touches while it takes work or retries the broker.

Why: after a broker outage Celery's consumer can stop taking work while the process lives on (known
on the Redis transport: celery/celery#8030, #9054, #10205; one outage drill here saw it once in
four runs). Kubernetes restarts only what its probe calls dead, so the chart's liveness probe reads
this file's age (LIVENESS_COMMAND). The file is fresh while the consumer's event loop runs (a timer,
every HEARTBEAT_S) and while it retries a broker that is down (each try, portal/broker.py), so an
outage of any length restarts nothing; a consumer that does neither for STALE_S is restarted.

Set GPUPORTAL_WORKER_ALIVE_FILE to turn it on (the chart does, for the two Celery workers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from celery import bootsteps
from django.conf import settings

log = logging.getLogger(__name__)
HEARTBEAT_S = 5.0
STALE_S = 60
ENV = "GPUPORTAL_WORKER_ALIVE_FILE"  # declared in portal/settings/environment.py
# What the chart's exec probe runs: plain sh and coreutils, no Python start-up every 10 s.
LIVENESS_COMMAND = f'test $(( $(date +%s) - $(stat -c %Y "${ENV}") )) -lt {STALE_S}'


def alive_file() -> Path | None:
    path = settings.GPUPORTAL_WORKER_ALIVE_FILE
    return Path(path) if path else None


def touch() -> None:
    path = alive_file()
    if path is None:
        return
    try:
        path.touch()
    except OSError:  # a full or read-only /tmp must not stop the work; the probe will say so
        log.warning("cannot touch the liveness file %s", path, exc_info=True)


def on_retry(errback: Callable[[Exception, float], None] | None) -> Callable[[Exception, float], None]:
    """The broker connection's retry callback, with a touch first: retrying is alive."""

    def touched(exc: Exception, interval: float) -> None:
        touch()
        if errback is not None:
            errback(exc, interval)

    return touched


class Heartbeat(bootsteps.StartStopStep):
    """A consumer step after the task consumer: touches the file from the consumer's own timer."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        self.tref: Any = None
        super().__init__(parent, **kwargs)

    def start(self, parent: Any) -> None:
        touch()
        self.tref = parent.timer.call_repeatedly(HEARTBEAT_S, touch)

    def stop(self, parent: Any) -> None:
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None

    shutdown = stop
