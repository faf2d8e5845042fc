"""The job state machine's one write path: compare-and-swap, an event row, and on-commit effects.

`filter(pk=..., state=old).update(state=new)` makes concurrent reconcilers, cancels and the
admission loop safe without row locks: zero rows updated means somebody else moved the job first,
and the caller re-reads instead of overwriting. Transitions are forward only
(workloads.choices.ALLOWED_TRANSITIONS).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import User
from workloads.choices import ALLOWED_TRANSITIONS, TERMINAL_STATES, EventKind, JobState
from workloads.k8s.faults import fault_point
from workloads.models import Job, JobEvent
from workloads.services import broadcast, publisher

NOTIFY_ON = {
    JobState.RUNNING: "started",
    JobState.SUCCEEDED: "succeeded",
    JobState.FAILED: "failed",
    JobState.LOST: "was lost (the cluster showed no trace of it)",
}


def _timestamps(to: JobState, at: datetime, extra: dict[str, Any]) -> dict[str, Any]:
    updates: dict[str, Any] = {"state": to, "state_changed_at": at}
    if to == JobState.ADMITTED:
        updates["admitted_at"] = at
    if to == JobState.RUNNING:
        updates["started_at"] = extra.pop("started_at", None) or at
    if to in TERMINAL_STATES:
        updates["finished_at"] = extra.pop("finished_at", None) or at
    updates.update({k: v for k, v in extra.items() if v is not None})
    return updates


def _after_commit(job_id: int, old: str, to: JobState) -> None:
    transaction.on_commit(lambda: broadcast.job_changed(job_id))
    # Unknown -> running is the same run seen again: the owner was told it started already.
    kind = NOTIFY_ON.get(to) if old != JobState.UNKNOWN or to != JobState.RUNNING else None
    if kind:
        publisher.job_notify(job_id, kind)


def job_transition(
    *,
    job: Job,
    to: JobState,
    reason: str,
    actor: User | None = None,
    at: datetime | None = None,
    **extra: Any,
) -> bool:
    """Move `job` to `to` if its current state allows it; True when this call made the move."""
    at = at or timezone.now()
    with transaction.atomic():
        old = Job.objects.filter(pk=job.pk).values_list("state", flat=True).first()
        if old is None or to not in ALLOWED_TRANSITIONS.get(old, frozenset()):
            return False
        updates = _timestamps(to, at, dict(extra))
        updates["state_reason"] = reason[:300]
        if actor is not None and to == JobState.CANCELLED:
            updates["cancelled_by"] = actor
        if not Job.objects.filter(pk=job.pk, state=old).update(**updates):
            return False
        JobEvent.objects.create(
            job=job,
            kind=EventKind.TRANSITION,
            at=at,
            from_state=old,
            to_state=to,
            reason=reason[:120],
            message=reason,
        )
        fault_point("inside_transition")  # the chaos tests: a kill here must roll back both writes
        _after_commit(job.pk, old, to)
    job.refresh_from_db()
    if job.borrowing and to != JobState.RUNNING:  # admitted, preempted or ended: the quota backstop moves
        publisher.namespace_refresh(job.project_id)
    return True


def job_note(*, job: Job, reason: str, message: str = "", kind: EventKind = EventKind.NOTE) -> JobEvent:
    return JobEvent.objects.create(job=job, kind=kind, reason=reason[:120], message=message)
