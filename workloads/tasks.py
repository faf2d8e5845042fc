"""Celery tasks: thin, id-keyed, enqueued on commit (style rules 6-9).

Each loads by id, returns quietly when the row is gone, and calls one service. Transient
Kubernetes errors retry with backoff and jitter; with acks_late and reject-on-worker-lost a worker
killed mid-task leaves the message for another worker, and every step is idempotent.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail

from workloads import cluster_sync
from workloads.admission import admission_pass
from workloads.dispatch import enqueue_reconcile, outbox_dispatch
from workloads.k8s import builders
from workloads.k8s.client import get_client
from workloads.k8s.errors import K8sTransientError
from workloads.models import Job

log = logging.getLogger(__name__)
# Declared retries (style rule 9): transient API errors only, with backoff and jitter.
K8S_RETRY = (K8sTransientError,)
# The options every Kubernetes reconcile task shares (node_tasks.py uses them too).
RECONCILE_TASK: dict[str, Any] = {
    "autoretry_for": K8S_RETRY,
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "retry_jitter": True,
    "max_retries": 8,
    "soft_time_limit": 60,
    "time_limit": 90,
    "ignore_result": True,
}


@shared_task(
    name="workloads.reconcile_job",
    **RECONCILE_TASK,
)
def reconcile_job(job_id: int) -> None:
    cluster_sync.job_reconcile(job_id=job_id, client=get_client())


@shared_task(
    name="workloads.reconcile_job_uid",
    **RECONCILE_TASK,
)
def reconcile_job_uid(uid: str) -> None:
    job_id = Job.objects.filter(uid=uid).values_list("pk", flat=True).first()
    if job_id is not None:
        cluster_sync.job_reconcile(job_id=job_id, client=get_client())


@shared_task(
    name="workloads.reconcile_namespace",
    **RECONCILE_TASK,
)
def reconcile_namespace(project_id: int) -> None:
    cluster_sync.namespace_reconcile(project_id=project_id, client=get_client())


@shared_task(
    name="workloads.record_k8s_event",
    soft_time_limit=60,
    time_limit=90,
    ignore_result=True,
)
def record_k8s_event(event: dict[str, Any]) -> None:
    cluster_sync.k8s_event_record(event=event)


@shared_task(
    name="workloads.sweep",
    expires=50,
    soft_time_limit=60,
    time_limit=90,
    ignore_result=True,
)
def sweep() -> int:
    """The periodic safety net: admit, republish the outbox, re-enqueue unfinished jobs, report orphans."""
    admission_pass()
    outbox_dispatch()
    ids = cluster_sync.jobs_needing_reconcile()
    for job_id in ids:
        if not enqueue_reconcile(job_id):
            break
    report_orphans()
    return len(ids)


def report_orphans() -> int:
    import orjson

    body = orjson.loads(
        get_client().list_raw("/apis/batch/v1/jobs", {"labelSelector": builders.MANAGED_SELECTOR})
    )
    return len(cluster_sync.orphans_report(cluster_jobs=body.get("items") or []))


@shared_task(
    name="workloads.notify_job",
    autoretry_for=(OSError,),
    max_retries=5,
    retry_backoff=10,
    soft_time_limit=60,
    time_limit=90,
    ignore_result=True,
)
def notify_job(job_id: int, kind: str) -> None:
    job = Job.objects.select_related("owner", "project").filter(pk=job_id).first()
    if job is None or not job.owner.notify_by_email:
        return
    subject = f"[GPU portal] job {job} {kind}"
    lines = [
        f"Your job {job} in project {job.project.slug} {kind}.",
        f"State: {job.state} ({job.state_reason})",
    ]
    if job.exit_code is not None:
        lines.append(f"Exit code: {job.exit_code}")
    send_mail(subject, "\n".join(lines), settings.DEFAULT_FROM_EMAIL, [job.owner.email])


@shared_task(
    name="workloads.grants_expire",
    expires=50,
    soft_time_limit=60,
    time_limit=90,
    ignore_result=True,
)
def grants_expire() -> int:
    """Approved quota grants past their end (and undecided requests) expire by themselves, audited;
    grants that began since the last run (every 60 s; 2 min look-back, re-applying is idempotent)
    raise their project's ResourceQuota."""
    from datetime import timedelta

    from django.utils import timezone

    from workloads.grants import grants_expire as expire
    from workloads.grants import grants_started

    grants_started(since=timezone.now() - timedelta(minutes=2))
    return len(expire())
