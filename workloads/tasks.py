"""Celery tasks: thin, id-keyed, sent by name after commit (`workloads.services.publisher`).

Each takes ids, calls one service, and that service returns quietly when the row is gone.
Transient Kubernetes errors retry with backoff and jitter; with acks_late and reject-on-worker-lost
a worker killed mid-task leaves the message for another worker, and every step is idempotent.
Names come from `workloads.choices.TaskName`, the list the publisher sends from.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from workloads.admission.cycle import admission_cycle
from workloads.choices import TaskName
from workloads.k8s.client import get_client
from workloads.k8s.errors import K8sTransientError
from workloads.k8s.faults import fault_point
from workloads.selectors import job_of_uid
from workloads.services import (
    cluster_sync,
    grants,
    idle,
    k8s_events,
    nodes,
    notifications,
    publisher,
    workers,
)
from workloads.services.publisher import outbox_dispatch

log = logging.getLogger(__name__)
# Retries are declared and narrow: transient API errors only, with backoff and jitter.
K8S_RETRY = (K8sTransientError,)
# The options every Kubernetes reconcile task shares.
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
    name=TaskName.RECONCILE_JOB.value,
    **RECONCILE_TASK,
)
def reconcile_job(job_id: int) -> None:
    publisher.reconcile_started(job_id)
    cluster_sync.job_reconcile(job_id=job_id, client=get_client())
    fault_point("before_ack")  # the chaos tests: done, not acknowledged; the message comes again


@shared_task(
    name=TaskName.RECONCILE_JOB_UID.value,
    **RECONCILE_TASK,
)
def reconcile_job_uid(uid: str) -> None:
    publisher.reconcile_uid_started(uid)
    job = job_of_uid(uid=uid)
    if job is not None:
        cluster_sync.job_sync(job=job, client=get_client())


@shared_task(
    name=TaskName.RECONCILE_NAMESPACE.value,
    **RECONCILE_TASK,
)
def reconcile_namespace(project_id: int) -> None:
    cluster_sync.namespace_reconcile(project_id=project_id, client=get_client())


@shared_task(
    name=TaskName.RECORD_K8S_EVENTS.value,
    soft_time_limit=60,
    time_limit=90,
    ignore_result=True,
)
def record_k8s_events(events: list[dict[str, Any]]) -> None:
    k8s_events.k8s_events_record(events=events)


@shared_task(
    name=TaskName.RECORD_K8S_EVENT.value,
    soft_time_limit=60,
    time_limit=90,
    ignore_result=True,
)
def record_k8s_event(event: dict[str, Any]) -> None:
    """One event: what earlier releases sent, served while their queued messages drain."""
    k8s_events.k8s_event_record(event=event)


@shared_task(
    name=TaskName.SWEEP.value,
    expires=50,
    soft_time_limit=60,
    time_limit=90,
    ignore_result=True,
)
def sweep() -> int:
    """The periodic safety net: admit, republish the outbox, re-enqueue unfinished jobs, report orphans."""
    admission_cycle()
    outbox_dispatch()
    return cluster_sync.sweep(client=get_client())


@shared_task(
    name=TaskName.NOTIFY_JOB.value,
    autoretry_for=(OSError,),
    max_retries=5,
    retry_backoff=10,
    soft_time_limit=60,
    time_limit=90,
    ignore_result=True,
)
def notify_job(job_id: int, kind: str) -> None:
    notifications.job_notify(job_id=job_id, kind=kind)


@shared_task(
    name=TaskName.GRANTS_EXPIRE.value,
    expires=50,
    soft_time_limit=60,
    time_limit=90,
    ignore_result=True,
)
def grants_expire() -> int:
    """Grants past their end expire, and grants that began since the last run raise their quota."""
    return len(grants.grants_tick())


@shared_task(
    name=TaskName.RECONCILE_NODE.value,
    **RECONCILE_TASK,
)
def reconcile_node(node_id: int) -> None:
    nodes.node_sync(node_id=node_id, client=get_client())


@shared_task(
    name=TaskName.IDLE_SWEEP.value,
    expires=50,
    soft_time_limit=60,
    time_limit=90,
    ignore_result=True,
)
def idle_sweep() -> dict[str, int]:
    """Warn the owners of jobs whose GPUs stay idle, withdraw warnings, suspend after the warning;
    flag jobs of several workers whose GPUs all went idle after being busy."""
    return {**idle.idle_sweep(), **workers.hang_sweep()}
