"""A job of several workers as a whole: started again after a worker failed (or by hand, from the
page), and flagged when every worker's GPUs went idle after being busy (a collective may be hung).

A job of several workers one of which failed: all of its workers start again, or it fails.

One worker restarted alone would rejoin a collective the others left, so the Job's own retries are
off for these jobs (`builders.build_job`: backoffLimit 0, so the Job controller fails the Job and
stops the other workers). Where the operators allow restarts (`QueueSettings.workers_restarts`),
the failed Kubernetes Job is deleted and the job goes the way of a preempted one: back to the front
of its queue once its pods are gone, a new Job made for it, admitted again as a whole (on the
nodes free then), its workers released together. Each restart is counted on the job.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from accounts.audit import audit_record
from accounts.models import User
from gpu.selectors import pod_activity
from workloads.choices import EventKind, JobState
from workloads.idle_rules import Evidence, hung
from workloads.k8s.reconcilers.job import JobReconciler
from workloads.k8s.status import Observation
from workloads.models import Job, QueueSettings
from workloads.selectors import can_act_on_job
from workloads.services.idle import activity_by_job, thresholds
from workloads.services.notifications import WORKERS_HUNG
from workloads.services.publisher import job_notify, outbox_write
from workloads.services.transitions import job_note, job_transition


def workers_restart(*, r: JobReconciler, obs: Observation) -> bool:
    """Start all workers again after one failed, when restarts are left; True when it did (the caller
    then records nothing of the failure but the reason)."""
    job = r.owner
    running = job.state in (JobState.ADMITTED, JobState.RUNNING)
    if job.workers < 2 or obs.state != JobState.FAILED or not running:
        return False
    limit = QueueSettings.load().workers_restarts
    if job.restarts >= limit:
        return False
    done = job.restarts + 1
    failed = f"{obs.reason} (exit code {obs.exit_code})" if obs.exit_code is not None else obs.reason
    why = f"{failed}: all {job.workers} workers start again (restart {done} of {limit})"
    if not job_transition(job=job, to=JobState.PREEMPTED, reason=why[:300], restarts=done):
        return False
    r.delete()
    _new_job_next(job)
    job_notify(
        job.pk, f"had a worker fail; all {job.workers} workers start again (restart {done} of {limit})"
    )
    return True


def _new_job_next(job: Job) -> None:
    """The next start gets a new Kubernetes Job (the failed one is finished for good, or being
    deleted); the job's reconcile makes it, and the queue starts it again once the old pods are gone."""
    Job.objects.filter(pk=job.pk).update(created_in_cluster_at=None, hang_noticed_at=None)
    outbox_write(job.pk)


def workers_restart_now(*, actor: User, job: Job, request: HttpRequest | None = None) -> Job:
    """Start every worker of a running job of several again, from the front of its queue (the page's
    button, for a collective that may be hung)."""
    if not can_act_on_job(user=actor, job=job):
        raise PermissionDenied("Members restart their own jobs; a manager of the project, anyone's.")
    if job.workers < 2 or job.state != JobState.RUNNING:
        raise ValidationError({"state": ["Only a running job of several workers starts again as a whole."]})
    with transaction.atomic():
        why = f"all {job.workers} workers started again by {actor}"
        if not job_transition(job=job, to=JobState.PREEMPTED, reason=why, actor=actor):
            raise ValidationError({"state": ["The job changed state meanwhile; reload and retry."]})
        # Preempted: its Kubernetes Job is suspended (every pod goes) and resumed once admitted again.
        Job.objects.filter(pk=job.pk).update(hang_noticed_at=None)
        outbox_write(job.pk)
        job_note(job=job, reason="workers restarted", message=why, kind=EventKind.ACTION)
        audit_record(actor=actor, action="job.workers_restart", obj=job, project=job.project, request=request)
    job.refresh_from_db()
    return job


def hang_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Flag the running jobs of several workers whose GPUs have all been idle for the operators'
    window after being busy (timeline, email, webhook), and clear the flag of those busy again."""
    now = now or timezone.now()
    row = QueueSettings.load()
    counts = {"flagged": 0, "cleared": 0}
    window = row.workers_hang_after_s
    if not window:
        return counts
    since = now - timedelta(seconds=window)
    jobs = list(
        Job.objects.select_related("project").filter(
            state=JobState.RUNNING, workers__gt=1, gpus__gt=0, started_at__lte=since
        )
    )
    rows = pod_activity(namespaces=sorted({j.namespace for j in jobs}), since=since, until=now)
    activity = activity_by_job(jobs, rows)
    for job in jobs:
        gpus = activity[job.pk]
        was_busy = job.busy_gpu_seconds > 0
        seen, numbers = hung(gpus, was_busy=was_busy, now=now, window_s=window, t=thresholds(row))
        every_worker = len({g.pod for g in gpus}) >= job.workers
        if seen is Evidence.IDLE and every_worker and job.hang_noticed_at is None:
            why = f"all {job.workers} workers idle for {round(window / 60)} min after being busy: {numbers}"
            counts["flagged"] += _flag(job, now, why)
        elif seen is Evidence.BUSY and job.hang_noticed_at is not None:
            counts["cleared"] += _clear(job, numbers)
    return counts


def _flag(job: Job, now: datetime, why: str) -> int:
    with transaction.atomic():
        rows = Job.objects.filter(pk=job.pk, state=JobState.RUNNING, hang_noticed_at__isnull=True)
        if not rows.update(hang_noticed_at=now):
            return 0
        job_note(job=job, reason="workers idle: a collective may be hung", message=why)
        job_notify(job.pk, WORKERS_HUNG)
    return 1


def _clear(job: Job, numbers: str) -> int:
    with transaction.atomic():
        rows = Job.objects.filter(pk=job.pk, hang_noticed_at=job.hang_noticed_at)
        if not rows.update(hang_noticed_at=None):
            return 0
        job_note(job=job, reason="workers busy again", message=f"GPUs busy again: {numbers}")
    return 1
