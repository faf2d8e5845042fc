"""Decayed GPU-hours: usage_now = sum(gpu_hours_i * 0.5 ** (age_i / half_life)).

A record's age is measured from the moment its GPU-hours ended (now, for a running job). Folding is
pure: the caller stores the returned `Usage` and passes it back next time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from workloads.queue.model import RunningJob, Usage


@dataclass(frozen=True)
class UsageRecord:
    project: str
    owner: str
    gpu_hours: float
    ended_at: datetime


def decay_factor(since: datetime, now: datetime, half_life_hours: float) -> float:
    age_h = max(0.0, (now - since).total_seconds() / 3600.0)
    return float(0.5 ** (age_h / half_life_hours)) if half_life_hours > 0 else 0.0


def decayed(records: Iterable[UsageRecord], now: datetime, half_life_hours: float) -> Usage:
    """Decayed usage of a list of records, from nothing."""
    return fold(Usage(as_of=now), records, now, half_life_hours)


def fold(usage: Usage, records: Iterable[UsageRecord], now: datetime, half_life_hours: float) -> Usage:
    """Bring `usage` forward to `now` and add the records (finished jobs, or the slice of a running
    job accrued since the last fold)."""
    k = decay_factor(usage.as_of, now, half_life_hours)
    projects = {p: v * k for p, v in usage.projects.items()}
    users = {u: v * k for u, v in usage.users.items()}
    for rec in records:
        w = rec.gpu_hours * decay_factor(rec.ended_at, now, half_life_hours)
        projects[rec.project] = projects.get(rec.project, 0.0) + w
        key = (rec.project, rec.owner)
        users[key] = users.get(key, 0.0) + w
    return Usage(as_of=now, projects=projects, users=users)


def gpu_equivalent(gpus: int, slices: int, slices_per_gpu: int) -> float:
    return gpus + slices / max(1, slices_per_gpu)


def running_records(
    running: Iterable[RunningJob], since: datetime, now: datetime, slices_per_gpu: int
) -> list[UsageRecord]:
    """GPU-hours each running job accrued between `since` and `now` (age 0: they end now)."""
    out = []
    for job in running:
        start = max(job.started_at, since)
        hours = max(0.0, (now - start).total_seconds() / 3600.0)
        size = job.workers * gpu_equivalent(job.gpus, job.slices, slices_per_gpu)
        out.append(UsageRecord(job.project, job.owner, size * hours, now))
    return out


def usage_now(
    usage: Usage, running: Iterable[RunningJob], now: datetime, half_life_hours: float, slices_per_gpu: int
) -> Usage:
    """The usage that orders the queue: stored usage decayed to now plus running jobs' accrual
    since `usage.as_of`."""
    return fold(usage, running_records(running, usage.as_of, now, slices_per_gpu), now, half_life_hours)
