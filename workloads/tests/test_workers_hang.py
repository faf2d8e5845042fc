"""A collective that may be hung, through the real ingest path and Postgres: every worker's GPUs idle
for the operators' window after the job was busy is flagged (timeline, email, webhook, the page with
a restart button); a job never busy, one worker still busy, a worker without samples or a window of 0
flags nothing; busy again clears it; the restart starts every worker again from the front of the
queue."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core import mail
from django.utils import timezone

from accounts.models import AuditLog, ProjectWebhook, WebhookDelivery
from gpu.ingest import ingest_batch
from gpu.models import Gpu, Node
from gpu.tests.factories import batch, make_gpus, make_node, series
from tests.fixtures.personas import World, session_client
from workloads.choices import JobState
from workloads.models import Job, JobEvent, QueueSettings
from workloads.services import notifications
from workloads.services.workers import hang_sweep
from workloads.tests.conftest import capture_sends

pytestmark = pytest.mark.django_db
WINDOW_S = 120


@pytest.fixture
def gpus(db: None) -> list[Gpu]:
    QueueSettings.objects.update_or_create(pk=1, defaults={"workers_hang_after_s": WINDOW_S})
    return make_gpus(make_node(), 2)


def _job(world: World, *, busy_before: bool = True) -> Job:
    return Job.objects.create(
        project=world.alpha,
        owner=world.member,
        image="pytorch",
        workers=2,
        gpus=1,
        node="gpu-node-0",
        state=JobState.RUNNING,
        started_at=timezone.now() - timedelta(minutes=30),
        busy_gpu_seconds=600.0 if busy_before else 0.0,
    )


def _ingest(gpu: Gpu, job: Job, worker: int, *, util: int) -> None:
    """One sample every 5 s over the window and a little more, worker `worker`'s pod on `gpu`."""
    end, seconds = datetime.now(UTC), WINDOW_S + 10
    pod = {"namespace": job.namespace, "pod": f"{job.k8s_name}-{worker}-x7k2p"}
    samples = series(gpu.uuid, seconds, start=end - timedelta(seconds=seconds), util=util, **pod)[::5]
    ingest_batch(node=Node.objects.get(name="gpu-node-0"), raw=batch("gpu-node-0", samples))


def test_every_worker_idle_after_being_busy_is_flagged_by_timeline_email_webhook_and_page(
    world: World, gpus: list[Gpu], monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    notes = capture_sends(monkeypatch, "workloads.notify_job")
    ProjectWebhook.objects.create(project=world.alpha, url="https://hooks.example.com/x", secret="s" * 32)
    job = _job(world)
    for worker, gpu in enumerate(gpus):
        _ingest(gpu, job, worker, util=1)
    with django_capture_on_commit_callbacks(execute=True):
        assert hang_sweep() == {"flagged": 1, "cleared": 0}
    job.refresh_from_db()
    assert job.hang_noticed_at is not None
    event = JobEvent.objects.get(job=job, reason="workers idle: a collective may be hung")
    assert event.message.startswith(
        "all 2 workers idle for 2 min after being busy: SM utilisation at most 1 %"
    )
    assert notes == [(job.pk, notifications.WORKERS_HUNG)]
    notifications.job_notify(job_id=job.pk, kind=notes[0][1])  # what the notify task runs
    assert "a collective may be hung" in mail.outbox[0].subject
    assert WebhookDelivery.objects.get().event == "job.workers_hung"
    assert hang_sweep() == {"flagged": 0, "cleared": 0}  # flagged once

    page = session_client(world.member).get(f"/jobs/{job.uid}/").content.decode()
    assert 'id="workers-hung"' in page
    assert 'id="restart-workers"' in page
    assert (
        'id="restart-workers"' not in session_client(world.viewer).get(f"/jobs/{job.uid}/").content.decode()
    )

    response = session_client(world.member).post(f"/jobs/{job.uid}/workers/restart/")
    assert response.status_code == 302
    job.refresh_from_db()
    assert job.state == JobState.PREEMPTED
    assert not Job.objects.filter(pk=job.pk, hang_noticed_at__isnull=False).exists()
    assert job.state_reason == f"all 2 workers started again by {world.member}"
    assert AuditLog.objects.filter(action="job.workers_restart", object_id=str(job.pk)).exists()


def test_nothing_is_flagged_when_never_busy_one_worker_busy_or_switched_off(
    world: World, gpus: list[Gpu]
) -> None:
    never, one_busy, one_seen = _job(world, busy_before=False), _job(world), _job(world)
    _ingest(gpus[0], one_seen, 0, util=1)  # no sample of its other worker: no verdict on it
    _ingest(gpus[0], never, 0, util=1)
    _ingest(gpus[1], never, 1, util=1)
    _ingest(gpus[0], one_busy, 0, util=1)
    _ingest(gpus[1], one_busy, 1, util=80)
    assert hang_sweep() == {"flagged": 0, "cleared": 0}
    Job.objects.filter(pk=one_busy.pk).update(hang_noticed_at=timezone.now())
    assert hang_sweep() == {"flagged": 0, "cleared": 1}  # busy again: the flag goes
    assert JobEvent.objects.filter(job=one_busy, reason="workers busy again").exists()
    Job.objects.filter(pk=never.pk).update(busy_gpu_seconds=600.0)
    QueueSettings.objects.filter(pk=1).update(workers_hang_after_s=0)
    assert hang_sweep() == {"flagged": 0, "cleared": 0}
    QueueSettings.objects.filter(pk=1).update(workers_hang_after_s=WINDOW_S)
    assert hang_sweep() == {"flagged": 1, "cleared": 0}
