"""GPU-hours: the one place they are summed, rolled up and written as CSV.

The ledger is the jobs themselves (started_at, finished_at, size; `Job.gpu_hours` is the one
formula). Readers: the queue's fair share (decayed GPU-hours per project and per (project, owner)),
the per-job export (API and admin CSV) and the usage history (GPU-hours per user or project per
day, for the chart, the CSV and the API). A job's hours are split over the day buckets its run
overlaps, so a week-long job counts on every day.

MPS slices are priced with the slice count of the shared GPUs of the node the job ran on, as
operators set them per GPU (`SlicePlan`), not with the cluster-wide default.

Used GPU-hours are the part of those hours the GPUs were busy: the telemetry samples of the job's GPUs
whose SM utilisation was at least `busy_sm_pct` (default 5 %), each counting for the time since the
GPU's previous sample (`Job.busy_gpu_seconds`, kept by workloads.services.peaks), times the job's
share of each GPU (1, or its slices' fraction). A job's used hours are spread over the days of its
run like its allocated hours. A job's GPU type is the one it asked for, else its node's GPU product.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from statistics import median
from typing import Any

from django.db.models import Q, QuerySet
from django.http import HttpResponse
from django.utils import timezone

from accounts.exports import csv_download
from accounts.models import User
from gpu import selectors as gpu_selectors
from workloads import app_settings
from workloads.choices import JobState
from workloads.models import Job
from workloads.queue import Usage
from workloads.queue.fairshare import UsageRecord, decayed, gpu_equivalent
from workloads.selectors import job_list

HALF_LIVES_KEPT = 10  # older records weigh < 0.1 %
SlicePlan = Mapping[str, int]  # node name -> slices per shared GPU


def slice_plan() -> SlicePlan:
    """Node -> slices per GPU, for nodes (gone ones too) whose shared GPUs all have one count."""
    plan = gpu_selectors.shared_slices_by_node(include_deleted=True)
    return {node: counts[0] for node, counts in plan.items() if len(set(counts)) == 1}


def job_equivalent(job: Job, plan: SlicePlan) -> float:
    """Whole GPUs, or the job's slices as a fraction of the GPU it ran on. The job records its node,
    not which of the node's GPUs: where that cannot tell the count (never bound, node not shared now,
    shared GPUs of mixed counts) the cluster-wide default applies. The plan is today's, so a count
    changed after the job ran reprices it."""
    per_gpu = plan.get(job.node or job.planned_node) or app_settings.mps_slices_per_gpu()
    return job.workers * gpu_equivalent(job.gpus, job.mps_slices, per_gpu)


def job_gpu_hours(job: Job, now: datetime, plan: SlicePlan) -> float:
    """Allocated GPU-hours of one job up to `now` (run time times `job_equivalent`)."""
    if job.started_at is None:
        return 0.0
    hours = max(0.0, ((job.finished_at or now) - job.started_at).total_seconds() / 3600)
    return hours * job_equivalent(job, plan)


def job_used_hours(job: Job, plan: SlicePlan) -> float:
    """Busy GPU-hours of one job: whole GPUs' busy seconds as they are, slices' times their share."""
    share = 1.0 if job.gpus else job_equivalent(job, plan)
    return job.busy_gpu_seconds / 3600 * share


def gpu_type(job: Job, models: Mapping[str, str]) -> str:
    """The type the job asked for, else the GPU product of the node it ran on ("" when neither)."""
    return job.gpu_type or models.get(job.node or job.planned_node, "")


def _runs(qs: QuerySet[Job], since: datetime) -> QuerySet[Job]:
    qs = qs.filter(started_at__isnull=False).filter(Q(gpus__gt=0) | Q(mps_slices__gt=0))
    return qs.filter(Q(finished_at__isnull=True) | Q(finished_at__gte=since)).select_related("project")


def fair_share_usage(*, now: datetime, half_life_hours: float) -> Usage:
    """Decayed GPU-hours as of `now`, running jobs included up to now (age 0)."""
    since = now - timedelta(hours=half_life_hours * HALF_LIVES_KEPT)
    plan = slice_plan()
    records = [
        UsageRecord(
            job.project.slug, str(job.owner_id), job_gpu_hours(job, now, plan), job.finished_at or now
        )
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


def _split(
    job: Job, now: datetime, since: datetime, plan: SlicePlan
) -> Iterable[tuple[datetime, float, float]]:
    """(day, allocated, used) hours per day of the run; used in proportion to allocated."""
    start, end = max(job.started_at or now, since), job.finished_at or now
    size = job_equivalent(job, plan)
    whole = job_gpu_hours(job, now, plan)
    used_ratio = job_used_hours(job, plan) / whole if whole else 0.0
    while start < end:
        bucket_end = min(end, _day(start) + timedelta(days=1))
        hours = (bucket_end - start).total_seconds() / 3600 * size
        yield _day(start), hours, hours * used_ratio
        start = bucket_end


def usage_history(*, jobs: QuerySet[Job], group: str, days: int = 30) -> list[dict[str, Any]]:
    """Rows {day, <group>, gpu_hours, used_gpu_hours} for the last `days` days (UTC), sorted."""
    now = timezone.now()
    since = _day(now) - timedelta(days=days - 1)
    totals: dict[tuple[str, str], tuple[float, float]] = {}
    plan = slice_plan()
    for job in _runs(jobs.select_related("owner"), since):
        key = job.project.slug if group == "project" else job.owner.email
        for day, hours, used in _split(job, now, since, plan):
            at = (day.date().isoformat(), key)
            before = totals.get(at, (0.0, 0.0))
            totals[at] = (before[0] + hours, before[1] + used)
    return [
        {"day": day, group: key, "gpu_hours": round(hours, 4), "used_gpu_hours": round(used, 4)}
        for (day, key), (hours, used) in sorted(totals.items())
    ]


def week_over_week(*, jobs: QuerySet[Job]) -> tuple[float, float]:
    """Allocated GPU-hours of the last 7 days (today included, UTC) and of the 7 before them."""
    rows = usage_history(jobs=jobs, group="user", days=14)
    split = (_day(timezone.now()) - timedelta(days=6)).date().isoformat()
    this = sum(r["gpu_hours"] for r in rows if r["day"] >= split)
    before = sum(r["gpu_hours"] for r in rows if r["day"] < split)
    return round(this, 2), round(before, 2)


def usage_totals(*, jobs: QuerySet[Job], by: str, days: int = 30) -> list[dict[str, Any]]:
    """Allocated and used GPU-hours of the last `days` days per 'user', 'project' or 'gpu_type'."""
    now = timezone.now()
    since = _day(now) - timedelta(days=days - 1)
    plan, models = slice_plan(), gpu_selectors.gpu_models_by_node()
    totals: dict[str, tuple[float, float]] = {}
    for job in _runs(jobs.select_related("owner"), since):
        key = {"user": job.owner.email, "project": job.project.slug}.get(by) or gpu_type(job, models)
        before = totals.get(key, (0.0, 0.0))
        split = list(_split(job, now, since, plan))
        totals[key] = (before[0] + sum(s[1] for s in split), before[1] + sum(s[2] for s in split))
    return [
        {by: key, "gpu_hours": round(hours, 4), "used_gpu_hours": round(used, 4)}
        for key, (hours, used) in sorted(totals.items())
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


def totals_chart(rows: list[dict[str, Any]], *, by: str) -> dict[str, Any]:
    """Chart.js shape for `usage_totals` rows: one bar pair (allocated, used) per key."""
    labels = [r[by] or "any" for r in rows]
    allocated = {"label": "Allocated", "data": [r["gpu_hours"] for r in rows]}
    return {
        "labels": labels,
        "datasets": [allocated, {"label": "Used", "data": [r["used_gpu_hours"] for r in rows]}],
    }


def gpu_hours_rows(
    *, user: User, since: datetime | None = None, project: str | None = None, state: str | None = None
) -> list[dict[str, Any]]:
    """Allocated GPU-hours per job the user can see (started jobs only), optionally of one project
    or in one state."""
    qs = job_list(user=user, project=project, state=state).filter(started_at__isnull=False)
    qs = qs.filter(Q(gpus__gt=0) | Q(mps_slices__gt=0))
    if since is not None:
        qs = qs.filter(Q(finished_at__isnull=True) | Q(finished_at__gte=since))
    now, plan, models = timezone.now(), slice_plan(), gpu_selectors.gpu_models_by_node()
    return [gpu_hours_row(job, now, plan=plan, models=models) for job in qs.order_by("started_at")]


def gpu_hours_row(
    job: Job, now: datetime, *, plan: SlicePlan, models: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """One job's line of the GPU-hours export (API and admin alike); `plan` from `slice_plan()`."""
    return {
        "job": str(job.uid),
        "project": job.project.slug,
        "user": job.owner.email,
        "state": job.state,
        "gpus": job.gpus * job.workers,  # every worker's
        "mps_slices": job.mps_slices,
        "gpu_type": gpu_type(job, models or {}),
        "started_at": job.started_at.isoformat() if job.started_at else "",
        "finished_at": job.finished_at.isoformat() if job.finished_at else "",
        "gpu_hours": round(job_gpu_hours(job, now, plan), 4),
        "used_gpu_hours": round(job_used_hours(job, plan), 4),
    }


def gpu_hours_rollup(rows: Iterable[dict[str, Any]], *, by: str) -> list[dict[str, Any]]:
    """Sum rows per 'user', 'project' or 'gpu_type' (allocated and used)."""
    totals: dict[str, tuple[float, float]] = {}
    for row in rows:
        before = totals.get(row[by], (0.0, 0.0))
        totals[row[by]] = (before[0] + float(row["gpu_hours"]), before[1] + float(row["used_gpu_hours"]))
    return [
        {by: key, "gpu_hours": round(hours, 4), "used_gpu_hours": round(used, 4)}
        for key, (hours, used) in sorted(totals.items())
    ]


def csv_response(rows: list[dict[str, Any]], filename: str) -> HttpResponse:
    """Rows of one shape as a CSV download (the columns are the first row's keys)."""
    fields = list(rows[0]) if rows else ["job", "project", "user", "gpu_hours"]
    return csv_download(fields, ([row.get(name) for name in fields] for row in rows), filename)
