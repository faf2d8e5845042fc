"""The controller and the task publisher of the test process, pointed at a given broker."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db import connections
from django.test import override_settings

from portal.celery import app
from workloads.controller.loop import Controller
from workloads.k8s.client import KubeClient


@contextlib.contextmanager
def use_broker(url: str) -> Iterator[None]:
    """Publish to `url`, and keep the shared cache there too, as every process of a deployment does:
    the reconciles' pending marks set here must be the ones the workers clear. (With the cache left
    on the test run's Redis, a mark set here would never be cleared, and each job's next watch-driven
    reconcile would wait for it to expire: the chaos test's jobs sat Running ~100 s after they ended.)"""
    old = app.conf.broker_url
    _reset_pool()
    app.conf["broker_url"] = url
    try:
        with override_settings(CACHES={"default": {**settings.CACHES["default"], "LOCATION": url}}):
            yield
    finally:
        _reset_pool()
        app.conf["broker_url"] = old


def _reset_pool() -> None:
    """Forget pooled broker connections (not closing them) so the next publish uses the new URL."""
    app_any: Any = app
    app_any._pool = None
    app_any.amqp._producer_pool = None


@contextlib.contextmanager
def running_controller(client: KubeClient, tick_s: float = 1.0) -> Iterator[Controller]:
    stop = threading.Event()
    controller = Controller(client=client, identity="test-controller", tick_s=tick_s)

    def run() -> None:
        try:
            controller.run(stop)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, name="controller", daemon=True)
    thread.start()
    try:
        yield controller
    finally:
        stop.set()
        thread.join(timeout=30)
