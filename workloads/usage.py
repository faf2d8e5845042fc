"""GPU-hours history from the accounting rows (the jobs themselves: started_at, finished_at, size).

Two readers: the queue's fair share (decayed GPU-hours per project and per (project, owner)) and the
usage history (GPU-hours per user or project per day, for the chart, the CSV and the API). A job's
hours are split over the day buckets its run overlaps, so a week-long job counts on every day.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from statistics import median
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from workloads.choices import JobState
from workloads.models import Job
from workloads.queue import Usage
from workloads.queue.fairshare import UsageRecord, decayed

HALF_LIVES_KEPT = 10  # older records weigh < 0.1 %


def _runs(qs: QuerySet[Job], since: datetime) -> QuerySet[Job]:
    qs = qs.filter(started_at__isnull=False).filter(Q(gpus__gt=0) | Q(mps_slices__gt=0))
    return qs.filter(Q(finished_at__isnull=True) | Q(finished_at__gte=since)).select_related("project")


def fair_share_usage(*, now: datetime, half_life_hours: float) -> Usage:
    """Decayed GPU-hours as of `now`, running jobs included up to now (age 0)."""
    since = now - timedelta(hours=half_life_hours * HALF_LIVES_KEPT)
    records = [
        UsageRecord(job.project.slug, str(job.owner_id), job.gpu_hours(now), job.finished_at or now)
        for job in _runs(Job.objects.all(), since)
    ]
    return decayed(records, now, half_life_hours)


def expected_runtimes(*, limit: int = 500) -> dict[tuple[str, str], float]:
    """Median run time in seconds of recent successful jobs per (project, owner) and (project, "")."""
    rows = (
        Job.objects.filter(state=JobState.SUCCEEDED, started_at__isnull=False, finished_at__isnull=False)
        .order_by("-finished_at")
        .values_list("project__slug", "owner_id", "started_at", "finished_at")[:limit]
    )
    samples: dict[tuple[str, str], list[float]] = {}
    for slug, owner_id, started, finished in rows:
        if started is None or finished is None:
            continue
        seconds = (finished - started).total_seconds()
        samples.setdefault((slug, str(owner_id)), []).append(seconds)
        samples.setdefault((slug, ""), []).append(seconds)
    return {key: float(median(values)) for key, values in samples.items()}


def _day(at: datetime) -> datetime:
    return at.replace(hour=0, minute=0, second=0, microsecond=0)


def _split(job: Job, now: datetime, since: datetime) -> Iterable[tuple[datetime, float]]:
    start, end = max(job.started_at or now, since), job.finished_at or now
    while start < end:
        bucket_end = min(end, _day(start) + timedelta(days=1))
        yield _day(start), (bucket_end - start).total_seconds() / 3600 * job.gpu_equivalent
        start = bucket_end


def usage_history(*, jobs: QuerySet[Job], group: str, days: int = 30) -> list[dict[str, Any]]:
    """Rows {day, <group>, gpu_hours} for the last `days` days (UTC), sorted."""
    now = timezone.now()
    since = _day(now) - timedelta(days=days - 1)
    totals: dict[tuple[str, str], float] = {}
    for job in _runs(jobs.select_related("owner"), since):
        key = job.project.slug if group == "project" else job.owner.email
        for day, hours in _split(job, now, since):
            totals[(day.date().isoformat(), key)] = totals.get((day.date().isoformat(), key), 0.0) + hours
    return [
        {"day": day, group: key, "gpu_hours": round(hours, 4)} for (day, key), hours in sorted(totals.items())
    ]


def chart_data(rows: list[dict[str, Any]], *, group: str) -> dict[str, Any]:
    """Chart.js shape: labels (days) and one dataset per user or project."""
    days = sorted({r["day"] for r in rows})
    keys = sorted({r[group] for r in rows})
    index = {(r["day"], r[group]): r["gpu_hours"] for r in rows}
    return {
        "labels": days,
        "datasets": [{"label": k, "data": [index.get((d, k), 0) for d in days]} for k in keys],
    }
