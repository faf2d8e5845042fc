"""A real Celery worker keeps its Postgres connections between tasks (settings: CONN_MAX_AGE for the
worker, CELERY_DB_REUSE_MAX; portal/celery.py: close_spent_connections), and a kept connection that
Postgres has dropped is replaced before a task uses it, not handed to the task broken.

Real Postgres (the test database, its `pg_stat_database.sessions` counter), a private Redis, a
prefork worker of two processes. Each task expires a quota request whose end has passed: the
request's new status says the task ran to the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from portal.celery import app
from tests.fixtures.personas import World
from tests.workloads_e2e.harness import use_broker
from tests.workloads_e2e.procs import PrivateRedis, start_worker, stop_process, wait_for, worker_env
from workloads.choices import TaskName
from workloads.models import GrantStatus, QuotaGrant

pytestmark = [pytest.mark.django_db(transaction=True)]
CONCURRENCY = 2
TASKS = 30


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[None]:
    broker = PrivateRedis(tmp_path)
    broker.start()
    env = worker_env(redis_url=broker.url, kubeconfig="", prefix="t-conn")
    proc = start_worker(env, tmp_path / "worker.log", "conn", concurrency=CONCURRENCY)
    try:
        with use_broker(broker.url):
            yield
    finally:
        stop_process(proc)
        broker.stop()


def _expire_one(world: World) -> None:
    """Send one task and wait until it has done its work."""
    now = timezone.now()
    grant = QuotaGrant.objects.create(
        project=world.alpha,
        requested_by=world.member,
        gpus=1,
        starts_at=now - timedelta(hours=1),
        until=now - timedelta(seconds=1),
    )
    app.send_task(TaskName.GRANTS_EXPIRE.value)
    wait_for(
        lambda: QuotaGrant.objects.filter(pk=grant.pk, status=GrantStatus.EXPIRED).exists() or None,
        timeout=60,
        what="the worker expiring the request",
        every=0.05,
    )


def _sessions() -> int:
    """Connections ever opened to the test database (counted when they open)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return int(cursor.fetchone()[0])


def test_the_worker_keeps_its_connections_between_tasks(world: World, worker: None) -> None:
    for _ in range(2 * CONCURRENCY):  # each worker process connects once
        _expire_one(world)
    before = _sessions()
    for _ in range(TASKS):
        _expire_one(world)
    opened = _sessions() - before
    print(f"{TASKS} tasks opened {opened} new Postgres connections")
    # Without the kept connections each task opens at least one (Celery closes it before and after).
    assert opened <= CONCURRENCY


def test_a_connection_postgres_dropped_is_replaced_before_the_next_task(world: World, worker: None) -> None:
    for _ in range(2 * CONCURRENCY):
        _expire_one(world)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = 'gpuportal-worker'"
        )
        (dropped,) = cursor.fetchone()
    assert dropped >= 1  # the worker held connections between tasks, and they are gone now
    for _ in range(2 * CONCURRENCY):  # every worker process meets its dead connection once
        _expire_one(world)
