"""Unknown and lost (docs/reliability.md: a job is failed only on evidence): what a successful
read of the cluster without evidence does.

`cluster_sync.job_sync` calls `evidence_judge` only after the API server answered: a read that
failed (down, 5xx) raises before it, so an outage never makes a job unknown. Evidence is a pod (any
phase) or a terminal Job condition. The moves:

- admitted or running, the Kubernetes Job gone and no pod left: unknown at once (the outcome can no
  longer be seen, and it is not guessed).
- running, the Job there with no pod and no outcome for GPUPORTAL_JOB_NO_POD_SECONDS: unknown.
- unknown, evidence seen again: `cluster_sync` moves it to running, succeeded or failed as observed.
- unknown for GPUPORTAL_JOB_UNKNOWN_SECONDS with still no evidence: lost, a terminal state of its
  own, since "failed" would claim an outcome nobody saw. Lost gives the quota back, so a Job still
  there is deleted first: it must never start later on GPUs the queue gave to someone else.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.utils import timezone

from workloads import app_settings
from workloads.choices import JobState
from workloads.k8s.reconcilers.job import JobReconciler
from workloads.k8s.status import Observation
from workloads.models import Job
from workloads.services.transitions import job_transition

GONE = "unknown: the Kubernetes Job is gone and its outcome was not seen"
NO_POD = "unknown: the Kubernetes Job has no pod and no outcome"


def evidence_judge(r: JobReconciler, obs: Observation, *, job_gone: bool) -> None:
    """Apply what one successful read of the Job (`job_gone`: answered 404) and its pods showed."""
    job = r.owner
    job.refresh_from_db(fields=["state", "state_changed_at", "no_evidence_since"])
    if obs.evidence:
        _evidence_seen(job)
    elif job.state == JobState.UNKNOWN:
        _lost_if_long(r, job_gone=job_gone)
    elif job_gone and job.state in (JobState.ADMITTED, JobState.RUNNING):
        job_transition(job=job, to=JobState.UNKNOWN, reason=GONE)
    elif job.state == JobState.RUNNING:
        _no_pod(job)


def _evidence_seen(job: Job) -> None:
    if job.no_evidence_since is not None:
        Job.objects.filter(pk=job.pk).update(no_evidence_since=None)


def _no_pod(job: Job) -> None:
    """A pod is replaced within seconds; only a long gap (Job controller stuck, pods deleted while
    the Job stays) leaves the run unaccounted for."""
    now = timezone.now()
    since = job.no_evidence_since
    if since is None:
        Job.objects.filter(pk=job.pk, no_evidence_since__isnull=True).update(no_evidence_since=now)
        since = now
    if now - since >= timedelta(seconds=app_settings.job_no_pod_s()):
        job_transition(job=job, to=JobState.UNKNOWN, reason=f"{NO_POD} since {_hms(since)}")


def _lost_if_long(r: JobReconciler, *, job_gone: bool) -> None:
    job, now = r.owner, timezone.now()
    waited = (now - job.state_changed_at).total_seconds()
    if waited < app_settings.job_unknown_s():
        return
    if not job_gone:
        r.delete()  # before the quota goes: raises on an outage, and the next sweep tries again
    where = "the Kubernetes Job is gone" if job_gone else "the Kubernetes Job was deleted"
    why = f"lost: no pod and no outcome seen for {int(waited)} s; {where}"
    if job_transition(job=job, to=JobState.LOST, reason=why):
        # Nothing is left to read a log from; the sweep must not come back for one.
        Job.objects.filter(pk=job.pk).update(deleted_in_cluster_at=now, log_captured=True)


def _hms(at: datetime) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
