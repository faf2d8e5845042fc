"""Job reconciles are not piled up: one message per job while its request is fresh, and every
message carries an expiry so a backed-up queue drains stale copies unrun. The wire check uses a
real Redis broker (the message as Celery stores it), not a mock."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import redis
from django.test import override_settings
from django.utils import timezone

from tests.fixtures.personas import World
from tests.workloads_e2e.harness import use_broker
from tests.workloads_e2e.procs import PrivateRedis
from workloads.choices import TaskName
from workloads.models import ReconcileOutbox
from workloads.services import jobs as services
from workloads.services.publisher import enqueue_reconcile
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
    assert sent == [job.pk, job.pk]  # past the retry: that message may be lost, send another


def test_a_job_without_a_request_is_sent_each_sweep(
    jobs_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    ReconcileOutbox.objects.filter(job_id=job.pk).delete()
    sent = capture_sends(monkeypatch, TaskName.RECONCILE_JOB)
    enqueue_reconcile(job.pk)
    enqueue_reconcile(job.pk)
    assert sent == [job.pk, job.pk]  # level-triggered checks of running jobs are not deduplicated


def test_the_message_on_a_real_broker_carries_its_expiry(jobs_world: World, tmp_path: Path) -> None:
    job = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    ReconcileOutbox.objects.filter(job_id=job.pk).delete()
    broker = PrivateRedis(tmp_path)
    broker.start()
    try:
        with use_broker(broker.url), override_settings(GPUPORTAL_RECONCILE_EXPIRES_SECONDS=90):
            before = timezone.now()
            assert enqueue_reconcile(job.pk) is True
        raw = redis.Redis.from_url(broker.url).lrange("reconcile", 0, -1)
    finally:
        broker.stop()
    assert len(raw) == 1
    message = json.loads(raw[0])
    assert message["headers"]["task"] == "workloads.reconcile_job"
    assert json.loads(base64.b64decode(message["body"]))[0] == [job.pk]
    expires = datetime.fromisoformat(message["headers"]["expires"])
    assert timedelta(seconds=85) < expires - before < timedelta(seconds=95)
