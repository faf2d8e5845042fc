"""Reads for the admission queue: a job's queue summary, the ordered queue, grants a user may see."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from accounts.models import User
from accounts.selectors import project_list
from workloads.choices import JobState
from workloads.models import Job, QuotaGrant


def queue_summary(job: Job) -> dict[str, Any] | None:
    """The read-only `queue` object of a queued job (API, pages, websocket); None once it left the queue."""
    if job.state != JobState.QUEUED:
        return None
    e = job.queue_explanation or {}
    return {
        "position": e.get("position_global"),
        "position_in_project": e.get("position_project"),
        "estimated_start": e.get("estimated_start"),
        "code": e.get("code", "pending"),
        "reason": e.get("sentence") or "waiting for the next admission cycle",
        "hints": list(e.get("hints") or []),
        "held": job.held,
    }


def queue_ordered() -> QuerySet[Job]:
    """Queued jobs in admission order (the stored position of the last cycle; held jobs last)."""
    return (
        Job.objects.filter(state=JobState.QUEUED)
        .select_related("project", "owner")
        .order_by("held", "queue_position", "submitted_at", "id")
    )


def grant_list(*, user: User) -> QuerySet[QuotaGrant]:
    return QuotaGrant.objects.select_related("project", "requested_by").filter(
        project__in=project_list(user=user)
    )
