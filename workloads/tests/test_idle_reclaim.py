"""Idle-GPU reclaim through the real ingest path and Postgres: samples stored by `gpu.ingest`, the sweep's
one grouped query, warnings (timeline, audit, email, webhook), bounded snoozes, suspension into the
preempted state that the queue leaves alone until the owner resumes, exemption by a manager."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import AuditLog, ProjectWebhook, WebhookDelivery
from gpu.ingest import ingest_batch
from gpu.models import Gpu, Node
from gpu.tests.factories import batch, make_gpus, make_node, series
from tests.fixtures.personas import World
from workloads.choices import JobState
from workloads.models import Job, JobEvent, QueueSettings, ReconcileOutbox
from workloads.selectors import project_idle_reclaimed_gpu_hours
from workloads.services import notifications
from workloads.services.idle import idle_sweep
from workloads.services.idle_actions import job_idle_exempt_set, job_idle_resume, job_idle_snooze
from workloads.services.queue import requeue_preempted
from workloads.tests.conftest import capture_sends

pytestmark = pytest.mark.django_db
WINDOW_S, WARNING_S = 120, 60


@pytest.fixture
def gpus(db: None) -> list[Gpu]:
    QueueSettings.objects.update_or_create(
        pk=1, defaults={"idle_window_s": WINDOW_S, "idle_warning_s": WARNING_S}
    )
    return make_gpus(make_node(), 2)


def _job(world: World, *, minutes: int = 10, interactive: bool = False) -> Job:
    return Job.objects.create(
        project=world.alpha,
        owner=world.member,
        image="pytorch",
        gpus=1,
        node="gpu-node-0",
        state=JobState.RUNNING,
        started_at=timezone.now() - timedelta(minutes=minutes),
        interactive=interactive,
    )


def _ingest(
    gpu: Gpu, job: Job, *, util: int, seconds: int = WINDOW_S + 10, end: datetime | None = None
) -> None:
    """One sample every 5 s over the last `seconds` (ending at `end`), the job's pod on `gpu`."""
    end = end or datetime.now(UTC)
    pod = {"namespace": job.namespace, "pod": f"{job.k8s_name}-x7k2p"}
    samples = series(gpu.uuid, seconds, start=end - timedelta(seconds=seconds), util=util, **pod)[::5]
    ingest_batch(node=Node.objects.get(name="gpu-node-0"), raw=batch("gpu-node-0", samples))


def test_a_busy_job_is_never_warned(world: World, gpus: list[Gpu]) -> None:
    job = _job(world)
    _ingest(gpus[0], job, util=60)
    assert idle_sweep() == {"warn": 0, "suspend": 0, "withdraw": 0}
    assert Job.objects.get(pk=job.pk).idle_warned_at is None


def test_an_idle_job_is_warned_by_email_webhook_timeline_and_audit(
    world: World, gpus: list[Gpu], monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    notes = capture_sends(monkeypatch, "workloads.notify_job")
    ProjectWebhook.objects.create(project=world.alpha, url="https://hooks.example.com/x", secret="s" * 32)
    job, busy = _job(world), _job(world)
    _ingest(gpus[0], job, util=1)
    _ingest(gpus[1], busy, util=70)
    with django_capture_on_commit_callbacks(execute=True):
        assert idle_sweep()["warn"] == 1
    job.refresh_from_db()
    assert job.idle_warned_at is not None
    assert job.state == JobState.RUNNING
    event = JobEvent.objects.get(job=job, reason="idle warning")
    assert "SM utilisation at most 1 %" in event.message
    assert AuditLog.objects.filter(action="job.idle_warn", object_id=str(job.pk)).exists()
    assert notes == [(job.pk, notifications.IDLE_WARNING)]
    notifications.job_notify(job_id=job.pk, kind=notes[0][1])  # what the notify task runs
    assert "idle GPUs" in mail.outbox[0].subject
    assert WebhookDelivery.objects.get().event == "job.idle_warning"
    assert Job.objects.get(pk=busy.pk).idle_warned_at is None


def test_the_sweep_reads_samples_in_one_query_however_many_jobs(world: World, gpus: list[Gpu]) -> None:
    jobs = [_job(world) for _ in range(2)]
    for gpu, job in zip(gpus, jobs, strict=True):
        _ingest(gpu, job, util=60)
    with CaptureQueriesContext(connection) as queries:
        idle_sweep()
    assert len([q for q in queries.captured_queries if "gpu_sample" in q["sql"]]) == 1


def test_snooze_restarts_the_window_and_is_bounded(world: World, gpus: list[Gpu]) -> None:
    job = _job(world)
    _ingest(gpus[0], job, util=1)
    for n in (1, 2):
        assert idle_sweep()["warn"] == 1
        job_idle_snooze(actor=world.member, job=job)
        job.refresh_from_db()
        assert (job.idle_warned_at, job.idle_snoozes) == (None, n)
        assert idle_sweep()["warn"] == 0  # the window starts again at the snooze
        Job.objects.filter(pk=job.pk).update(idle_reset_at=timezone.now() - timedelta(seconds=WINDOW_S))
    assert idle_sweep()["warn"] == 1
    with pytest.raises(ValidationError, match="most allowed"):
        job_idle_snooze(actor=world.member, job=job)
    with pytest.raises(PermissionDenied):
        job_idle_snooze(actor=world.viewer, job=job)
    assert AuditLog.objects.filter(action="job.idle_snooze").count() == 2


def test_busy_again_withdraws_the_warning(world: World, gpus: list[Gpu]) -> None:
    job = _job(world)
    _ingest(gpus[0], job, util=1)
    assert idle_sweep()["warn"] == 1
    _ingest(gpus[0], job, util=80, seconds=20)
    assert idle_sweep()["withdraw"] == 1
    assert Job.objects.get(pk=job.pk).idle_warned_at is None


def test_suspended_after_the_warning_kept_out_of_the_queue_until_resumed(
    world: World, gpus: list[Gpu]
) -> None:
    job = _job(world)
    _ingest(gpus[0], job, util=1)
    now = timezone.now()
    assert idle_sweep(now=now)["warn"] == 1
    # The samples end now, so the warning is moved back instead of the clock forward.
    Job.objects.filter(pk=job.pk).update(idle_warned_at=now - timedelta(seconds=WARNING_S - 5))
    assert idle_sweep(now=now)["suspend"] == 0
    Job.objects.filter(pk=job.pk).update(idle_warned_at=now - timedelta(seconds=WARNING_S))
    assert idle_sweep(now=now)["suspend"] == 1
    job.refresh_from_db()
    assert (job.state, job.idle_suspended_at) == (JobState.PREEMPTED, now)
    assert job.state_reason.startswith("suspended: GPUs idle for 2 min")
    assert ReconcileOutbox.objects.filter(job=job).exists()  # the reconciler re-suspends the Kubernetes Job
    assert requeue_preempted(bound=set()) == []  # waits for its owner
    later = now + timedelta(hours=2)
    # 1 GPU, suspended ~10 min into a 60 min max runtime: at most ~50 min could have been held.
    assert project_idle_reclaimed_gpu_hours(project=world.alpha, now=later) == pytest.approx(
        50 / 60, abs=0.02
    )
    Job.objects.filter(pk=job.pk).update(idle_suspended_at=timezone.now() - timedelta(minutes=6))
    job_idle_resume(actor=world.member, job=job)
    assert requeue_preempted(bound=set()) == [job.pk]
    job.refresh_from_db()
    assert (job.state, job.queue_front, job.idle_suspended_at) == (JobState.QUEUED, True, None)
    assert job.idle_reclaimed_gpu_hours == pytest.approx(6 / 60, abs=0.01)
    assert project_idle_reclaimed_gpu_hours(project=world.alpha) == pytest.approx(6 / 60, abs=0.01)
    actions = set(AuditLog.objects.filter(object_id=str(job.pk)).values_list("action", flat=True))
    assert {"job.idle_warn", "job.idle_suspend", "job.idle_resume"} <= actions


def test_an_exempt_job_is_never_reclaimed_and_only_managers_exempt(world: World, gpus: list[Gpu]) -> None:
    job = _job(world)
    _ingest(gpus[0], job, util=1)
    with pytest.raises(PermissionDenied):
        job_idle_exempt_set(actor=world.member, job=job, exempt=True)
    job_idle_exempt_set(actor=world.owner, job=job, exempt=True)
    now = timezone.now()
    assert idle_sweep(now=now) == {"warn": 0, "suspend": 0, "withdraw": 0}
    assert idle_sweep(now=now + timedelta(seconds=WARNING_S)) == {"warn": 0, "suspend": 0, "withdraw": 0}
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
    assert AuditLog.objects.filter(action="job.idle_exempt", actor=world.owner).exists()


def test_an_interactive_job_is_judged_over_its_own_window(world: World, gpus: list[Gpu]) -> None:
    # Both idle past the batch window; the notebook gets the interactive one (10 min here).
    QueueSettings.objects.filter(pk=1).update(idle_interactive_window_s=600)
    batch_job, notebook = _job(world, minutes=20), _job(world, minutes=20, interactive=True)
    _ingest(gpus[0], batch_job, util=1, seconds=700)
    _ingest(gpus[1], notebook, util=1, seconds=300)
    assert idle_sweep()["warn"] == 1
    assert Job.objects.get(pk=batch_job.pk).idle_warned_at is not None
    assert Job.objects.get(pk=notebook.pk).idle_warned_at is None  # idle 5 of its 10 minutes
    _ingest(gpus[1], notebook, util=1, seconds=700)
    assert idle_sweep()["warn"] == 1
    event = JobEvent.objects.get(job=notebook, reason="idle warning")
    assert "GPUs idle for 10 min" in event.message


def test_interactive_window_zero_never_reclaims_them_and_withdraws_a_warning(
    world: World, gpus: list[Gpu]
) -> None:
    notebook = _job(world, interactive=True)
    _ingest(gpus[0], notebook, util=1)
    QueueSettings.objects.filter(pk=1).update(idle_interactive_window_s=WINDOW_S)
    assert idle_sweep()["warn"] == 1
    QueueSettings.objects.filter(pk=1).update(idle_interactive_window_s=0)
    assert idle_sweep() == {"warn": 0, "suspend": 0, "withdraw": 1}
    later = timezone.now() + timedelta(hours=3)
    assert idle_sweep(now=later) == {"warn": 0, "suspend": 0, "withdraw": 0}
    assert Job.objects.get(pk=notebook.pk).state == JobState.RUNNING


def test_the_warning_cannot_outlast_the_window(db: None) -> None:
    # The suspension re-checks the sliding window: a longer warning would let a busy spike slide out unseen.
    with pytest.raises(ValidationError, match="cannot be longer"):
        QueueSettings(idle_window_s=600, idle_warning_s=601).full_clean()
    QueueSettings(idle_window_s=600, idle_warning_s=600).full_clean()
    with pytest.raises(ValidationError, match="Shorter than the warning"):
        QueueSettings(idle_window_s=600, idle_warning_s=600, idle_interactive_window_s=300).full_clean()
    QueueSettings(idle_window_s=600, idle_warning_s=600, idle_interactive_window_s=0).full_clean()


def test_sweeping_twice_warns_once_and_disabled_warns_nobody(world: World, gpus: list[Gpu]) -> None:
    job = _job(world)
    _ingest(gpus[0], job, util=1)
    QueueSettings.objects.filter(pk=1).update(idle_reclaim_enabled=False)
    assert idle_sweep()["warn"] == 0
    QueueSettings.objects.filter(pk=1).update(idle_reclaim_enabled=True)
    assert idle_sweep()["warn"] == 1
    assert idle_sweep()["warn"] == 0
    assert JobEvent.objects.filter(job=job, reason="idle warning").count() == 1


def test_metrics_count_idle_warnings_and_reclaims_from_the_timeline(world: World, gpus: list[Gpu]) -> None:
    from workloads.metrics import WorkloadsCollector

    job = _job(world)
    _ingest(gpus[0], job, util=1)
    now = timezone.now()
    idle_sweep(now=now)
    Job.objects.filter(pk=job.pk).update(idle_warned_at=now - timedelta(seconds=WARNING_S))
    assert idle_sweep(now=now)["suspend"] == 1
    samples = {
        (s.name, s.labels.get("project")): s.value
        for family in WorkloadsCollector().collect()
        for s in family.samples
    }
    assert samples[("gpuportal_idle_warnings_total", "alpha")] == 1
    assert samples[("gpuportal_idle_reclaims_total", "alpha")] == 1
