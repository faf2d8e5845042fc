"""A real Celery worker keeps its liveness file fresh (portal/liveness.py): from its consumer's timer
while it is connected, and from each reconnect try while Redis is down, so the chart's probe
restarts a stuck consumer but not a worker waiting out an outage.

A private Redis that the test stops and starts again, a prefork worker as the chart runs it. Each
check first ages the file by hand and then waits for the worker to touch it again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from portal import liveness
from portal.broker import RECONNECT_MAX_S
from tests.workloads_e2e.procs import PrivateRedis, start_worker, stop_process, wait_for, worker_env

pytestmark = [pytest.mark.django_db(transaction=True)]


class Worker:
    def __init__(self, tmp_path: Path) -> None:
        self.broker = PrivateRedis(tmp_path)
        self.alive = tmp_path / "worker-alive"
        self.log = tmp_path / "worker.log"

    def touched_again(self, what: str) -> None:
        """Age the file past the probe's limit; the worker must touch it within a heartbeat or two."""
        old = time.time() - liveness.STALE_S - 1
        os.utime(self.alive, (old, old))
        wait_for(lambda: self.alive.stat().st_mtime > old + 1, 4 * liveness.HEARTBEAT_S, what, every=0.2)


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    w = Worker(tmp_path)
    w.broker.start()
    env = worker_env(redis_url=w.broker.url, kubeconfig="", prefix="t-alive") | {liveness.ENV: str(w.alive)}
    proc = start_worker(env, w.log, "alive", concurrency=1)
    try:
        wait_for(w.alive.exists, 60, "the worker's first touch")
        yield w
    finally:
        stop_process(proc)
        w.broker.stop()


def test_a_connected_worker_touches_its_file_from_the_consumer(worker: Worker) -> None:
    worker.touched_again("a touch from the consumer's timer")
    worker.touched_again("the next one")


def test_a_worker_retrying_a_lost_broker_still_counts_as_alive(worker: Worker) -> None:
    worker.broker.stop()
    wait_for(lambda: "Cannot connect" in worker.log.read_text(), 30, "the worker retrying the broker")
    worker.touched_again("a touch from a reconnect try")
    worker.touched_again("the next try")
    worker.broker.start()
    time.sleep(2 * RECONNECT_MAX_S)  # connected again: touches come from the consumer's timer only
    worker.touched_again("a touch after the broker came back")
