"""Minimal admission until the queue issue replaces it: admit queued jobs whose project quota has
room, counting the project's admitted and running jobs; priority first, then submit time.

One pass runs under a Postgres advisory lock, so two passes (controller and sweep, or two
controllers during a hand-over) never admit against the same headroom. Admitting is only a
state change; the job's reconcile then un-suspends the Kubernetes Job. The namespace's
ResourceQuota is the backstop the API server enforces.
"""

from __future__ import annotations

from django.db import connection, transaction
from django.db.models import Case, IntegerField, Value, When

from accounts.models import Quota
from workloads.choices import PRIORITY_RANK, JobState
from workloads.dispatch import outbox_write
from workloads.models import Job
from workloads.selectors import quota_usage
from workloads.transitions import job_transition

ADMISSION_LOCK = 0x6770_7061  # "gppa"


def _lock() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADMISSION_LOCK])


def _fits(job: Job, quota: Quota, used: dict[str, int]) -> bool:
    return (
        used["gpus"] + job.gpus <= quota.gpus
        and used["mps_slices"] + job.mps_slices <= quota.mps_slices
        and used["cpu_millicores"] + job.cpu_millicores <= quota.cpu_millicores
        and used["memory_mib"] + job.memory_mib <= quota.memory_mib
        and used["jobs"] + 1 <= quota.max_concurrent_jobs
    )


def _take(job: Job, used: dict[str, int]) -> None:
    used["gpus"] += job.gpus
    used["mps_slices"] += job.mps_slices
    used["cpu_millicores"] += job.cpu_millicores
    used["memory_mib"] += job.memory_mib
    used["jobs"] += 1


def _queue() -> list[Job]:
    rank = Case(
        *[When(priority=p, then=Value(r)) for p, r in PRIORITY_RANK.items()],
        default=Value(0),
        output_field=IntegerField(),
    )
    qs = Job.objects.filter(state=JobState.QUEUED).select_related("project", "project__quota")
    return list(qs.annotate(rank=rank).order_by("-rank", "submitted_at", "id"))


def admission_pass() -> list[int]:
    """Admit what fits now; returns the ids admitted. The queue issue replaces this function."""
    admitted: list[int] = []
    with transaction.atomic():
        _lock()
        usage: dict[int, dict[str, int]] = {}
        for job in _queue():
            quota = getattr(job.project, "quota", None)
            if quota is None:
                continue
            used = usage.setdefault(job.project_id, quota_usage(project=job.project))
            if not _fits(job, quota, used):
                continue
            if job_transition(job=job, to=JobState.ADMITTED, reason="admitted: project quota has room"):
                _take(job, used)
                outbox_write(job.pk)
                admitted.append(job.pk)
    return admitted
