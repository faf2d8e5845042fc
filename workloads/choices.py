"""Enumerations shared by the UI, the admin and the API (style rule 4)."""

from __future__ import annotations

from django.db import models


class JobState(models.TextChoices):
    QUEUED = "queued", "Queued"
    ADMITTED = "admitted", "Admitted"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    PREEMPTED = "preempted", "Preempted"


TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
# States in which a job holds (or is about to hold) its GPUs; admission counts these.
ACTIVE_STATES = frozenset({JobState.ADMITTED, JobState.RUNNING})
# Forward-only transitions; anything else is refused by the compare-and-swap.
ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    JobState.QUEUED: frozenset(
        {JobState.ADMITTED, JobState.RUNNING, JobState.CANCELLED, JobState.FAILED, JobState.SUCCEEDED}
    ),
    JobState.ADMITTED: frozenset(
        {JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.PREEMPTED}
    ),
    JobState.RUNNING: frozenset(
        {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.PREEMPTED}
    ),
    JobState.PREEMPTED: frozenset({JobState.QUEUED, JobState.ADMITTED, JobState.CANCELLED}),
}


class Priority(models.TextChoices):
    LOW = "low", "Low"
    NORMAL = "normal", "Normal"
    HIGH = "high", "High"


PRIORITY_RANK = {Priority.LOW: 0, Priority.NORMAL: 1, Priority.HIGH: 2}


class EventKind(models.TextChoices):
    TRANSITION = "transition", "State change"
    K8S = "k8s", "Kubernetes event"
    ACTION = "action", "Action"
    NOTE = "note", "Note"


class Queue(models.TextChoices):
    """Celery queues (style rule 8)."""

    RECONCILE = "reconcile", "Reconcile"
    NOTIFY = "notify", "Notifications"
