"""Enumerations shared by the UI, the admin, the API and the task publisher."""

from __future__ import annotations

from enum import StrEnum

from django.db import models


class JobState(models.TextChoices):
    QUEUED = "queued", "Queued"
    ADMITTED = "admitted", "Admitted"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    PREEMPTED = "preempted", "Preempted"
    # No evidence either way: the Job or its pods vanished from a successful read. Holds its GPUs.
    UNKNOWN = "unknown", "Unknown"
    # Declared after GPUPORTAL_JOB_UNKNOWN_SECONDS unknown: ended, outcome never seen (not "failed": R4).
    LOST = "lost", "Lost"


class Placement(models.TextChoices):
    """Where a job may run beyond its GPU type. "real-node": the local cluster's real node only
    (tests and demo, GPUPORTAL_REAL_NODE_PLACEMENT); empty: any ordinary GPU node."""

    ANY = "", "Any GPU node"
    REAL_NODE = "real-node", "The local cluster's real node"


TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.LOST})
# States in which a job holds (or is about to hold) its GPUs; admission counts these. An unknown job
# may still run on its GPUs (the cluster may only be unreadable), so it holds them until resolved.
ACTIVE_STATES = frozenset({JobState.ADMITTED, JobState.RUNNING, JobState.UNKNOWN})
# Forward-only transitions; anything else is refused by the compare-and-swap. A queued job only
# leaves the queue through admission (or a cancel): a run the portal never admitted must not look
# like a legitimate one, so queued -> running / succeeded / failed does not exist.
ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    JobState.QUEUED: frozenset({JobState.ADMITTED, JobState.CANCELLED}),
    JobState.ADMITTED: frozenset(
        {
            JobState.RUNNING,
            JobState.SUCCEEDED,
            JobState.FAILED,
            JobState.CANCELLED,
            JobState.PREEMPTED,
            JobState.UNKNOWN,
        }
    ),
    JobState.RUNNING: frozenset(
        {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.PREEMPTED, JobState.UNKNOWN}
    ),
    # Evidence back: running or its outcome; none for long enough: lost. Not preemptible: suspending
    # a Job nobody can see proves nothing, and its GPUs are not known to be free.
    JobState.UNKNOWN: frozenset(
        {JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.LOST}
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
    """Celery queues; workers subscribe by these names."""

    RECONCILE = "reconcile", "Reconcile"
    NOTIFY = "notify", "Notifications"


class TaskName(StrEnum):
    """Every Celery task of this app, by the name it is registered and sent under.

    Writers send tasks by name through `workloads.services.publisher`, so no module below the task
    layer imports `workloads.tasks` (that import would tie services and tasks in a cycle).
    """

    RECONCILE_JOB = "workloads.reconcile_job"
    RECONCILE_JOB_UID = "workloads.reconcile_job_uid"
    RECONCILE_NAMESPACE = "workloads.reconcile_namespace"
    RECONCILE_NODE = "workloads.reconcile_node"
    RECORD_K8S_EVENT = "workloads.record_k8s_event"  # one event: sent by releases before 2026-12-05
    RECORD_K8S_EVENTS = "workloads.record_k8s_events"
    NOTIFY_JOB = "workloads.notify_job"
    SWEEP = "workloads.sweep"
    GRANTS_EXPIRE = "workloads.grants_expire"
    IDLE_SWEEP = "workloads.idle_sweep"
