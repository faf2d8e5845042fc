"""Job reconciles are not piled up: one message per job while its request is fresh, and every
message carries an expiry so a backed-up queue drains stale copies unrun. The wire check uses a
real Redis broker (the message as Celery stores it), not a mock."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from django.test import override_settings
from django.utils import timezone

from tests.fixtures.personas import World
from tests.workloads_e2e.harness import use_broker
from tests.workloads_e2e.procs import PrivateRedis
from workloads import tasks
from workloads.choices import TaskName
from workloads.controller import watches as controller
from workloads.k8s.labels import UID_LABEL
from workloads.models import ReconcileOutbox
from workloads.services import cluster_sync, publisher
from workloads.services import jobs as services
from workloads.services.publisher import enqueue_reconcile, reconcile_started
from workloads.tests.conftest import IMAGE, capture_sends

pytestmark = pytest.mark.django_db


def test_a_fresh_request_is_sent_once_a_stale_one_again(
    jobs_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    sent = capture_sends(monkeypatch, TaskName.RECONCILE_JOB)
    ReconcileOutbox.objects.update_or_create(
        job_id=job.pk, defaults={"requested_at": timezone.now(), "published_at": None}
    )
    for _ in range(5):  # the sweep, the outbox dispatcher, the sweep again...
        assert enqueue_reconcile(job.pk) is True
    assert sent == [job.pk]
    ReconcileOutbox.objects.filter(job_id=job.pk).update(published_at=timezone.now() - timedelta(seconds=60))
    assert enqueue_reconcile(job.pk) is True
    assert sent == [job.pk]  # past the retry, but that message is still queued (its mark says so)
    reconcile_started(job.pk)  # a worker took it and died before the cluster matched
    assert enqueue_reconcile(job.pk) is True
    assert sent == [job.pk, job.pk]  # the request is stale and nothing is queued: send another


def test_a_pending_reconcile_is_not_sent_again_until_a_worker_takes_it(
    jobs_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    ReconcileOutbox.objects.filter(job_id=job.pk).delete()  # a running job: level-triggered checks only
    sent = capture_sends(monkeypatch, TaskName.RECONCILE_JOB)
    for _ in range(3):  # three sweeps while the queue is backed up
        assert enqueue_reconcile(job.pk) is True
    assert sent == [job.pk]
    reconcile_started(job.pk)  # a worker took it: the next sweep sends again
    enqueue_reconcile(job.pk)
    assert sent == [job.pk, job.pk]


def test_a_failed_send_leaves_nothing_pending(jobs_world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    job = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    ReconcileOutbox.objects.filter(job_id=job.pk).delete()
    reconcile_started(job.pk)
    monkeypatch.setattr(publisher, "send", lambda *a, **k: False)  # the broker is down
    assert enqueue_reconcile(job.pk) is False
    sent = capture_sends(monkeypatch, TaskName.RECONCILE_JOB)
    assert enqueue_reconcile(job.pk) is True
    assert sent == [job.pk]


def test_the_worker_clears_the_mark_as_it_starts(jobs_world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    job = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    ReconcileOutbox.objects.filter(job_id=job.pk).delete()
    sent = capture_sends(monkeypatch, TaskName.RECONCILE_JOB)
    enqueue_reconcile(job.pk)
    monkeypatch.setattr(tasks, "get_client", lambda: None)  # no cluster here
    monkeypatch.setattr(cluster_sync, "job_reconcile", lambda **kw: None)
    tasks.reconcile_job.apply(args=[job.pk]).get()
    enqueue_reconcile(job.pk)
    assert sent == [job.pk, job.pk]


def _sent_to_a_real_broker(tmp_path: Path, send: Callable[[], None]) -> tuple[list[Any], datetime]:
    """What `send` leaves in the reconcile queue of a Redis broker of its own (90-s expiry), and
    when it began."""
    broker = PrivateRedis(tmp_path)
    broker.start()
    try:
        with use_broker(broker.url), override_settings(GPUPORTAL_RECONCILE_EXPIRES_SECONDS=90):
            before = timezone.now()
            send()
        return redis.Redis.from_url(broker.url).lrange("reconcile", 0, -1), before
    finally:
        broker.stop()


def _assert_one_expiring_message(raw: list[Any], task: str, arg: object, before: datetime) -> None:
    assert len(raw) == 1
    message = json.loads(raw[0])
    assert message["headers"]["task"] == task
    assert json.loads(base64.b64decode(message["body"]))[0] == [arg]
    expires = datetime.fromisoformat(message["headers"]["expires"])
    assert timedelta(seconds=85) < expires - before < timedelta(seconds=95)


def test_the_message_on_a_real_broker_carries_its_expiry(jobs_world: World, tmp_path: Path) -> None:
    job = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    ReconcileOutbox.objects.filter(job_id=job.pk).delete()

    def sweep_twice() -> None:
        assert enqueue_reconcile(job.pk) is True
        assert enqueue_reconcile(job.pk) is True  # the sweep again: that message is still queued

    raw, before = _sent_to_a_real_broker(tmp_path, sweep_twice)
    _assert_one_expiring_message(raw, "workloads.reconcile_job", job.pk, before)


def _watched(uid: str, version: int) -> dict[str, object]:
    return {"metadata": {"labels": {UID_LABEL: uid}, "resourceVersion": str(version)}}


def test_a_burst_of_watch_events_sends_one_reconcile_until_a_worker_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pod's and its Job's events come in bursts (created, scheduled, running, status): one queued
    message answers them all, since its run reads the cluster when it starts."""
    uid, other = str(uuid.uuid4()), str(uuid.uuid4())
    sent = capture_sends(monkeypatch, TaskName.RECONCILE_JOB_UID)
    handle = controller._job_change(controller._SeenVersions())
    for version in range(5):
        handle("MODIFIED", _watched(uid, version))
    handle("ADDED", _watched(other, 1))
    assert sent == [uid, other]
    tasks.reconcile_job_uid.apply(args=[uid]).get()  # a worker took it (no such job: nothing to do)
    handle("MODIFIED", _watched(uid, 6))
    controller._relisted(controller._SeenVersions())([_watched(uid, 7), _watched(other, 2)])
    assert sent == [uid, other, uid]  # the relist's `uid` and `other` are still queued


def test_the_watch_message_on_a_real_broker_is_one_and_carries_its_expiry(tmp_path: Path) -> None:
    uid = str(uuid.uuid4())

    def three_events() -> None:
        handle = controller._job_change(controller._SeenVersions())
        for version in range(3):
            handle("MODIFIED", _watched(uid, version))

    raw, before = _sent_to_a_real_broker(tmp_path, three_events)
    _assert_one_expiring_message(raw, "workloads.reconcile_job_uid", uid, before)
