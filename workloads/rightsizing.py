"""Right-sizing: the size a job asked for next to the peaks its GPUs showed, and a smaller size that
would have done (docs/user-guide.md, "Right-sizing").

Peaks are per GPU (`Job.peak_gpu_mem_mib`: the job's own processes' memory on its busiest GPU;
`Job.peak_sm_pct`: the highest SM utilisation of a GPU running it, which on a shared GPU includes the
other tenants, so the hint errs on the large side). A suggestion keeps `rightsizing_headroom_pct`
above both peaks; an MPS slice is taken as 1/slices of the GPU's memory and SM. The rule is pure
(`suggest`); `oversized_jobs` is the project page's read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import QuerySet
from django.utils import timezone

from accounts.models import Project
from workloads import app_settings
from workloads.accounting import slice_plan
from workloads.choices import TERMINAL_STATES
from workloads.models import Job


@dataclass(frozen=True)
class Hint:
    """A smaller size for a job: `gpus` whole GPUs or `mps_slices` slices, and the sentence saying why."""

    text: str
    gpus: int
    mps_slices: int

    @property
    def edits(self) -> dict[str, int]:
        """The spec fields a rerun at this size changes (workloads.services.jobs.job_rerun)."""
        return {"gpus": self.gpus, "mps_slices": self.mps_slices}

    @property
    def size(self) -> str:
        return f"{self.gpus} GPU{'s' if self.gpus > 1 else ''}" if self.gpus else f"{self.mps_slices} slices"


def _gib(mib: float) -> str:
    gib = mib / 1024
    return f"{gib:.0f}" if gib >= 10 or gib == int(gib) else f"{gib:.1f}"


def run_minutes(job: Job, now: datetime) -> float:
    if job.started_at is None:
        return 0.0
    return max(0.0, ((job.finished_at or now) - job.started_at).total_seconds() / 60)


def _share(job: Job, per_gpu: int) -> float:
    """The part of one GPU each of the job's GPUs gives it: 1, or its slices over the GPU's."""
    return 1.0 if job.gpus else min(1.0, job.mps_slices / per_gpu)


def _measured(job: Job) -> tuple[int, int, int] | None:
    if job.telemetry_until is None or not job.gpu_mem_total_mib or (not job.gpus and not job.mps_slices):
        return None
    return job.gpu_mem_total_mib, job.peak_gpu_mem_mib or 0, job.peak_sm_pct or 0


def _slices_needed(total: int, mem: int, sm: int, per_gpu: int) -> int:
    room = 1 + app_settings.rightsizing_headroom_pct() / 100
    by_mem = math.ceil(mem * room / (total / per_gpu))
    by_sm = math.ceil(sm * room / 100 * per_gpu)
    return max(1, by_mem, by_sm)


def suggest(job: Job, *, per_gpu: int, now: datetime | None = None) -> Hint | None:
    """A smaller size that holds the job's peaks, or None (no telemetry, too short a run, no smaller
    size fits). Pure: everything comes from the job's own fields."""
    measured = _measured(job)
    if measured is None or run_minutes(job, now or timezone.now()) < app_settings.rightsizing_min_minutes():
        return None
    total, mem, sm = measured
    peaks = f"peak {_gib(mem)} GiB and {sm} %"
    each = " each worker" if job.workers > 1 else ""
    if job.gpus > 1:
        # A job of several workers: the busiest GPU of any worker decides, for every worker.
        room = 1 + app_settings.rightsizing_headroom_pct() / 100
        need = max(1, math.ceil(job.gpus * max(mem * room / total, sm * room / 100)))
        if need >= job.gpus:
            return None
        fewer = f"{need} GPU{'s' if need > 1 else ''}{each}"
        text = f"asked {job.gpus} GPUs of {_gib(total)} GiB{each}, {peaks} per GPU: {fewer} would do"
        return Hint(text, need, 0)
    if job.workers > 1:
        return None  # MPS slices are for jobs of one worker
    slices = _slices_needed(total, mem, sm, per_gpu)
    asked = per_gpu if job.gpus else job.mps_slices
    if slices >= asked:
        return None
    what = "1 GPU" if job.gpus else f"{job.mps_slices} slices of a {_gib(total)} GiB GPU"
    asked_mib = total * _share(job, per_gpu)
    text = f"asked {_gib(asked_mib)} GiB on {what}, {peaks}: a {slices}-slice share would do"
    return Hint(text, 0, slices)


def is_oversized(job: Job, *, per_gpu: int) -> bool:
    """A finished run of at least the minimum length whose peaks stayed under the operator's shares
    of what it asked for (memory and SM both; a slice's share of the GPU counts as its whole)."""
    measured = _measured(job)
    if measured is None or job.state not in TERMINAL_STATES or job.finished_at is None:
        return False
    if run_minutes(job, job.finished_at) < app_settings.rightsizing_min_minutes():
        return False
    total, mem, sm = measured
    share = _share(job, per_gpu)
    mem_pct, sm_pct = 100 * mem / (total * share), sm / share
    return mem_pct < app_settings.oversized_mem_pct() and sm_pct < app_settings.oversized_sm_pct()


def per_gpu_for(job: Job, plan: Mapping[str, int] | None = None) -> int:
    """Slices per GPU of the node the job ran on (as accounting prices them), else the default."""
    known = slice_plan() if plan is None else plan
    return known.get(job.node or job.planned_node) or app_settings.mps_slices_per_gpu()


def oversized_jobs(*, project: Project, days: int = 30, limit: int = 50) -> list[tuple[Job, Hint | None]]:
    """The project's finished jobs of the last `days` that asked for far more than they used, newest
    first, each with its suggestion (None where no smaller size fits the rule, e.g. one slice)."""
    since = timezone.now() - timedelta(days=days)
    qs: QuerySet[Job] = Job.objects.filter(
        project=project, state__in=TERMINAL_STATES, finished_at__gte=since, telemetry_until__isnull=False
    )
    plan = dict(slice_plan())
    out = []
    for job in qs.select_related("owner").order_by("-finished_at")[:500]:
        per_gpu = per_gpu_for(job, plan)
        if is_oversized(job, per_gpu=per_gpu):
            out.append((job, suggest(job, per_gpu=per_gpu, now=job.finished_at)))
    return out[:limit]
