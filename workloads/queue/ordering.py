"""Queue order: priority class (higher first), "front" jobs (moved to the front, or returning from
preemption) first within their priority, then fair share (lower decayed project usage, then lower
decayed user usage), then submit time, then id."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from workloads.queue.model import PendingJob, Usage

SortKey = tuple[int, int, float, float, datetime, int]


def sort_key(job: PendingJob, usage: Usage) -> SortKey:
    return (
        -job.priority,
        0 if job.front else 1,
        usage.projects.get(job.project, 0.0),
        usage.users.get((job.project, job.owner), 0.0),
        job.submitted_at,
        job.id,
    )


def order(pending: Iterable[PendingJob], usage: Usage) -> list[PendingJob]:
    """All pending jobs, held ones included (they keep their place but are never admitted)."""
    return sorted(pending, key=lambda j: sort_key(j, usage))
