"""What people do about idle reclaim: snooze a warning, resume a suspended job, exempt a job.

Each is a compare-and-swap on the idle fields, in one transaction with its timeline row and audit
record, so a snooze racing the sweep's suspension either wins (no suspension) or is refused.
"""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F
from django.http import HttpRequest
from django.utils import timezone

from accounts.audit import audit_record
from accounts.models import User
from accounts.services import require_manager
from workloads.choices import EventKind, JobState
from workloads.idle_rules import reclaimed_gpu_hours
from workloads.models import Job, QueueSettings
from workloads.selectors import can_act_on_job
from workloads.services.publisher import outbox_write
from workloads.services.transitions import job_note


def _require_actor(actor: User, job: Job) -> None:
    if not can_act_on_job(user=actor, job=job):
        raise PermissionDenied(
            "Members snooze and resume their own jobs; a manager of the project, anyone's."
        )


def job_idle_snooze(*, actor: User, job: Job, request: HttpRequest | None = None) -> Job:
    """Withdraw the warning and restart the idle window; at most `idle_max_snoozes` times per job."""
    _require_actor(actor, job)
    limit = QueueSettings.load().idle_max_snoozes
    now = timezone.now()
    with transaction.atomic():
        rows = Job.objects.filter(
            pk=job.pk, state=JobState.RUNNING, idle_warned_at__isnull=False, idle_snoozes__lt=limit
        )
        if not rows.update(idle_warned_at=None, idle_reset_at=now, idle_snoozes=F("idle_snoozes") + 1):
            raise ValidationError({"idle": [_why_not_snoozed(job, limit)]})
        job.refresh_from_db()
        note = f"snoozed by {actor} ({job.idle_snoozes} of {limit}): the idle window starts again"
        job_note(job=job, reason="idle warning snoozed", message=note, kind=EventKind.ACTION)
        audit_record(
            actor=actor,
            action="job.idle_snooze",
            obj=job,
            project=job.project,
            after={"snoozes": job.idle_snoozes},
            request=request,
        )
    return job


def _why_not_snoozed(job: Job, limit: int) -> str:
    job.refresh_from_db()
    if job.idle_warned_at is None:
        return "The job has no idle warning to snooze."
    return f"The job was snoozed {job.idle_snoozes} times already, the most allowed ({limit})."


def job_idle_resume(*, actor: User, job: Job, request: HttpRequest | None = None) -> Job:
    """Put a job suspended for idleness back in the queue: the next admission cycle requeues it at the
    front of its priority (services.queue.requeue_preempted), once its pods are gone."""
    _require_actor(actor, job)
    now = timezone.now()
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state != JobState.PREEMPTED or job.idle_suspended_at is None:
            raise ValidationError({"idle": ["The job is not suspended for idle GPUs."]})
        hours = _reclaimed(job, now)
        Job.objects.filter(pk=job.pk).update(
            idle_suspended_at=None,
            idle_reset_at=None,
            idle_snoozes=0,
            idle_reclaimed_gpu_hours=F("idle_reclaimed_gpu_hours") + hours,
        )
        note = f"resumed by {actor}: back to the queue ({hours:.2f} GPU-hours reclaimed while suspended)"
        job_note(job=job, reason="resumed after idle suspension", message=note, kind=EventKind.ACTION)
        audit_record(
            actor=actor,
            action="job.idle_resume",
            obj=job,
            project=job.project,
            after={"reclaimed_gpu_hours": round(hours, 4)},
            request=request,
        )
        outbox_write(job.pk)
    job.refresh_from_db()
    return job


def _reclaimed(job: Job, until: datetime) -> float:
    return reclaimed_gpu_hours(
        suspended_at=job.idle_suspended_at or until,
        until=until,
        started_at=job.started_at,
        max_runtime_s=job.max_runtime_minutes * 60,
        gpus=job.gpu_equivalent,
    )


def job_idle_exempt_set(*, actor: User, job: Job, exempt: bool, request: HttpRequest | None = None) -> Job:
    """Managers (and operators) exempt a job from idle reclaim, or take the exemption back."""
    require_manager(actor=actor, project=job.project, what="exempt jobs from idle reclaim")
    with transaction.atomic():
        before = {"idle_exempt": job.idle_exempt}
        Job.objects.filter(pk=job.pk).update(idle_exempt=exempt)
        job.refresh_from_db()
        what = "exempt from idle reclaim" if exempt else "no longer exempt from idle reclaim"
        job_note(job=job, reason=what, message=f"{what} ({actor})", kind=EventKind.ACTION)
        audit_record(
            actor=actor,
            action="job.idle_exempt",
            obj=job,
            project=job.project,
            before=before,
            after={"idle_exempt": exempt},
            request=request,
        )
    return job
