"""Reads behind the workloads' Prometheus figures: all from the database, at scrape time, so every
web replica answers the same numbers (per-process counters would disagree across processes)."""

from __future__ import annotations

from django.db.models import Count, Min, Q, Sum
from django.utils import timezone

from accounts.models import GpuTypeLimit, Quota
from gpu import selectors as gpu_selectors
from workloads.choices import ACTIVE_STATES, JobState
from workloads.models import Job, JobEvent, ReconcileOutbox


def jobs_by_project_state() -> list[tuple[str, str, int]]:
    rows = Job.objects.values_list("project__slug", "state").annotate(n=Count("id")).order_by()
    return [(slug, state, n) for slug, state, n in rows]


def queue_oldest_age_s() -> dict[str, float]:
    """Per project: how long its oldest queued job has waited."""
    now = timezone.now()
    rows = (
        Job.objects.filter(state=JobState.QUEUED).values_list("project__slug").annotate(o=Min("submitted_at"))
    )
    return {slug: (now - oldest).total_seconds() for slug, oldest in rows.order_by()}


def gpus_held_by_project() -> list[tuple[str, int, int, int]]:
    """(project, whole GPUs held, MPS slices held, GPU quota) for projects holding or owning quota."""
    held = (
        Job.objects.filter(state__in=ACTIVE_STATES)
        .values_list("project__slug")
        .annotate(g=Sum("gpus"), s=Sum("mps_slices"))
        .order_by()
    )
    quota = dict(Quota.objects.values_list("project__slug", "gpus"))
    used = {slug: (int(g or 0), int(s or 0)) for slug, g, s in held}
    return [(slug, *used.get(slug, (0, 0)), quota.get(slug, 0)) for slug in sorted(set(used) | set(quota))]


def gpus_held_by_type() -> list[tuple[str, str, int, int | None]]:
    """(project, GPU type, whole GPUs held, the type's limit or None) for every type in use or
    limited. A job's type is its node's GPU product, as the queue counts it against the limit
    (workloads/queue/capacity.py), else the type it asked for ("" when neither is known)."""
    models = gpu_selectors.gpu_models_by_node()
    held: dict[tuple[str, str], int] = {}
    rows = Job.objects.filter(state__in=ACTIVE_STATES, gpus__gt=0).values_list(
        "project__slug", "node", "planned_node", "gpu_type", "gpus"
    )
    for slug, node, planned, asked, gpus in rows:
        key = (slug, models.get(node or planned) or asked)
        held[key] = held.get(key, 0) + gpus
    limits = {
        (slug, gpu_type): n
        for slug, gpu_type, n in GpuTypeLimit.objects.values_list("quota__project__slug", "gpu_type", "gpus")
    }
    return [
        (slug, t, held.get((slug, t), 0), limits.get((slug, t)))
        for slug, t in sorted(set(held) | set(limits))
    ]


def transitions_total() -> list[tuple[str, str, int]]:
    """Admissions and preemptions ever, per project, counted from the timeline (monotonic)."""
    rows = (
        JobEvent.objects.filter(to_state__in=[JobState.ADMITTED, JobState.PREEMPTED])
        .values_list("job__project__slug", "to_state")
        .annotate(n=Count("id"))
        .order_by()
    )
    return [(slug, state, n) for slug, state, n in rows]


def outbox_depth() -> tuple[int, float]:
    """Pending reconcile requests and the age of the oldest (the reconcile lag bound)."""
    agg = ReconcileOutbox.objects.aggregate(n=Count("job_id"), oldest=Min("requested_at"))
    oldest = agg["oldest"]
    return int(agg["n"] or 0), (timezone.now() - oldest).total_seconds() if oldest else 0.0


def reconcile_pending() -> list[tuple[str, str, int, float]]:
    """(project, stage, pending requests, age of the oldest) of the outbox: each row is a job whose
    desired state changed (submit, admit, preempt, cancel, suspend) and that no reconcile has yet
    confirmed in the cluster; `requested_at` is the latest change, so the age is the reconcile lag.
    Stage "unsent": never reached the broker; "sent": published, not yet done by a worker."""
    now = timezone.now()
    rows = (
        ReconcileOutbox.objects.annotate(sent=Q(published_at__isnull=False))
        .values_list("job__project__slug", "sent")
        .annotate(n=Count("job_id"), oldest=Min("requested_at"))
        .order_by()
    )
    return [
        (slug, "sent" if sent else "unsent", n, (now - oldest).total_seconds())
        for slug, sent, n, oldest in rows
    ]


IDLE_WARNED = Q(reason="idle warning")
IDLE_SUSPENDED = Q(to_state=JobState.PREEMPTED, reason__startswith="suspended: GPUs idle")


def idle_totals() -> list[tuple[str, int, int]]:
    """Idle warnings and idle suspensions ever, per project, counted from the timeline (monotonic)."""
    rows = (
        JobEvent.objects.filter(IDLE_WARNED | IDLE_SUSPENDED)
        .values_list("job__project__slug")
        .annotate(warned=Count("id", filter=IDLE_WARNED), suspended=Count("id", filter=IDLE_SUSPENDED))
        .order_by()
    )
    return [(slug, warned, suspended) for slug, warned, suspended in rows]
