"""Reads for jobs. Tenancy lives here: a job of a project the user cannot see does not exist."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.http import Http404
from django.utils import timezone

from accounts.models import Project, Quota, User
from accounts.selectors import project_list
from workloads.choices import ACTIVE_STATES
from workloads.models import Job, JobEvent, JobTemplate


def job_list(*, user: User, state: str | None = None, project: str | None = None) -> QuerySet[Job]:
    qs = Job.objects.select_related("project", "owner").filter(project__in=project_list(user=user))
    if state:
        qs = qs.filter(state=state)
    if project:
        qs = qs.filter(project__slug=project)
    return qs.defer("log_tail")


def job_get(*, user: User, uid: Any) -> Job:
    try:
        job = (
            Job.objects.select_related("project", "owner")
            .filter(project__in=project_list(user=user), uid=uid)
            .first()
        )
    except Exception as exc:  # a malformed UUID is simply not found
        raise Http404("No such job.") from exc
    if job is None:
        raise Http404("No such job.")
    return job


def job_events(*, job: Job) -> QuerySet[JobEvent]:
    return JobEvent.objects.filter(job=job).order_by("at", "id")


def template_list(*, user: User, project: str | None = None) -> QuerySet[JobTemplate]:
    qs = JobTemplate.objects.select_related("project").filter(project__in=project_list(user=user))
    return qs.filter(project__slug=project) if project else qs


def template_get(*, user: User, pk: int) -> JobTemplate:
    template = template_list(user=user).filter(pk=pk).first()
    if template is None:
        raise Http404("No such template.")
    return template


def quota_usage(*, project: Project) -> dict[str, int]:
    """What the project's admitted and running jobs hold now."""
    agg = Job.objects.filter(project=project, state__in=ACTIVE_STATES).aggregate(
        gpus=Sum("gpus"),
        mps_slices=Sum("mps_slices"),
        cpu_millicores=Sum("cpu_millicores"),
        memory_mib=Sum("memory_mib"),
        jobs=Count("id"),
    )
    return {key: int(value or 0) for key, value in agg.items()}


def quota_headroom(*, project: Project) -> dict[str, int]:
    quota = Quota.objects.filter(project=project).first() or Quota(project=project)
    used = quota_usage(project=project)
    return {
        "gpus": quota.gpus - used["gpus"],
        "mps_slices": quota.mps_slices - used["mps_slices"],
        "cpu_millicores": quota.cpu_millicores - used["cpu_millicores"],
        "memory_mib": quota.memory_mib - used["memory_mib"],
        "jobs": quota.max_concurrent_jobs - used["jobs"],
    }


def gpu_hours_rows(*, user: User, since: datetime | None = None) -> list[dict[str, Any]]:
    """Allocated GPU-hours per job the user can see (started jobs only)."""
    qs = job_list(user=user).filter(started_at__isnull=False).filter(Q(gpus__gt=0) | Q(mps_slices__gt=0))
    if since is not None:
        qs = qs.filter(Q(finished_at__isnull=True) | Q(finished_at__gte=since))
    now = timezone.now()
    return [_row(job, now) for job in qs.order_by("started_at")]


def _row(job: Job, now: datetime) -> dict[str, Any]:
    return {
        "job": str(job.uid),
        "project": job.project.slug,
        "user": job.owner.email,
        "state": job.state,
        "gpus": job.gpus,
        "mps_slices": job.mps_slices,
        "gpu_type": job.gpu_type,
        "started_at": job.started_at.isoformat() if job.started_at else "",
        "finished_at": job.finished_at.isoformat() if job.finished_at else "",
        "gpu_hours": round(job.gpu_hours(now), 4),
    }


def gpu_hours_rollup(rows: Iterable[dict[str, Any]], *, by: str) -> list[dict[str, Any]]:
    """Sum rows per 'user' or 'project'."""
    totals: dict[str, float] = {}
    for row in rows:
        totals[row[by]] = totals.get(row[by], 0.0) + float(row["gpu_hours"])
    return [{by: key, "gpu_hours": round(value, 4)} for key, value in sorted(totals.items())]
