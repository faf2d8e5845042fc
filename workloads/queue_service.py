"""The admission cycle: live cluster read, then plan and apply under the admission lock.

Steps of `admission_cycle()` (each write is a compare-and-swap, so a second runner is harmless):

1. Read the live nodes and pods from the cluster, outside any transaction (no lock is ever held
   across a Kubernetes call).
2. In one transaction under the Postgres advisory lock: requeue preempted jobs whose pods are gone,
   build the `ClusterState`, call `plan_cycle`.
3. Withdraw notices no longer needed; store new notices (deadline) and notify the owners.
4. Preempt victims whose notice ended: admitted/running -> preempted. The reconciler re-suspends
   the Kubernetes Job; once its pods are gone a later cycle puts it back as queued, front.
5. Admit: queued -> admitted with the planned node and the borrowing flag; the job's outbox row makes
   the reconciler un-suspend the Kubernetes Job after commit.
6. Store each pending job's explanation and position; push the changed ones to the job pages.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from workloads import broadcast
from workloads.choices import ACTIVE_STATES, JobState
from workloads.dispatch import outbox_write
from workloads.k8s.client import KubeClient, get_client
from workloads.models import Job
from workloads.queue import CyclePlan, Explanation, PreemptionNotice, plan_cycle
from workloads.queue_nodes import LiveCluster, live_cluster
from workloads.queue_state import cluster_state
from workloads.transitions import job_transition

log = logging.getLogger(__name__)
ADMISSION_LOCK = 0x6770_7061  # "gppa"
NOTICE_FIELDS = ("preempt_deadline", "preempt_notice_at", "preempt_for")


def _lock() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADMISSION_LOCK])


def admission_cycle(*, client: KubeClient | None = None, now: datetime | None = None) -> list[int]:
    """One cycle; returns the ids admitted."""
    live = live_cluster(client or get_client())
    changed: list[int] = []
    with transaction.atomic():
        _lock()
        now = now or timezone.now()
        requeue_preempted(live=live)
        plan = plan_cycle(cluster_state(now=now, live=live), now)
        notices_apply(plan=plan, now=now)
        for job_id in plan.preempt:
            job_preempt(job_id=job_id)
        admitted = [
            a.job_id for a in plan.admit if job_admit(job_id=a.job_id, node=a.node, borrowing=a.borrowing)
        ]
        changed = explanations_store(explanations=plan.explanations.values())
    for job_id in changed:
        broadcast.job_changed(job_id)
    return admitted


def job_admit(*, job_id: int, node: str, borrowing: bool) -> bool:
    job = Job.objects.select_related("project").get(pk=job_id)
    why = "admitted on borrowed quota (preemptible)" if borrowing else "admitted: quota and a node have room"
    if not job_transition(job=job, to=JobState.ADMITTED, reason=why, planned_node=node, borrowing=borrowing):
        return False
    Job.objects.filter(pk=job_id).update(
        queue_front=False, queue_position=None, queue_explanation=_admitted_explanation(node, borrowing)
    )
    outbox_write(job_id)
    return True


def _admitted_explanation(node: str, borrowing: bool) -> dict[str, Any]:
    sentence = f"admitted on {node}" + (" (borrowed quota, may be preempted)" if borrowing else "")
    return {
        "code": "admitted",
        "sentence": sentence,
        "hints": [],
        "position_project": None,
        "position_global": None,
        "estimated_start": None,
    }


def job_preempt(*, job_id: int) -> bool:
    """Notice ended: give the borrowed GPUs back. The reconciler re-suspends the Kubernetes Job."""
    job = Job.objects.select_related("project").get(pk=job_id)
    if not job_transition(job=job, to=JobState.PREEMPTED, reason="preempted: borrowed quota reclaimed"):
        return False
    Job.objects.filter(pk=job_id).update(**dict.fromkeys(NOTICE_FIELDS), borrowing=False)
    outbox_write(job_id)
    _notify(job_id, "was preempted (borrowed GPUs reclaimed); it is back at the front of its queue")
    return True


def requeue_preempted(*, live: LiveCluster) -> list[int]:
    """Preempted jobs whose pods are gone go back to the queue, at the front of their priority."""
    bound = live.job_uids()
    out = []
    for job in Job.objects.select_related("project").filter(state=JobState.PREEMPTED):
        if str(job.uid) in bound:
            continue
        if job_transition(job=job, to=JobState.QUEUED, reason="requeued after preemption", queue_front=True):
            Job.objects.filter(pk=job.pk).update(planned_node="", node="", pod_name="")
            outbox_write(job.pk)
            out.append(job.pk)
    return out


def notices_apply(*, plan: CyclePlan, now: datetime) -> None:
    if plan.withdraw:
        Job.objects.filter(pk__in=plan.withdraw).update(**dict.fromkeys(NOTICE_FIELDS))
    for notice in plan.notices:
        if _notice_store(notice):
            when = notice.deadline.strftime("%H:%M UTC")
            _notify(notice.job_id, f"will be preempted at {when}: the lending project needs its GPUs back")


def _notice_store(notice: PreemptionNotice) -> bool:
    return bool(
        Job.objects.filter(pk=notice.job_id, state__in=ACTIVE_STATES, preempt_deadline__isnull=True).update(
            preempt_deadline=notice.deadline, preempt_notice_at=notice.issued_at, preempt_for=notice.for_job
        )
    )


def _notify(job_id: int, kind: str) -> None:
    from workloads.tasks import notify_job

    def send() -> None:
        try:
            notify_job.delay(job_id, kind)
        except Exception:
            log.warning("could not enqueue the queue notice for job %s", job_id)

    transaction.on_commit(send)


def explanation_json(e: Explanation) -> dict[str, Any]:
    return {
        "code": e.code,
        "sentence": e.sentence,
        "hints": list(e.hints),
        "numbers": dict(e.numbers),
        "position_project": e.position_project or None,
        "position_global": e.position_global or None,
        "estimated_start": e.estimated_start.isoformat() if e.estimated_start else None,
    }


def explanations_store(*, explanations: Iterable[Explanation]) -> list[int]:
    """Store each explanation on its (still queued) job; returns the ids whose text or place changed."""
    changed = []
    for e in explanations:
        data = explanation_json(e)
        position = e.position_global or None
        rows = Job.objects.filter(pk=e.job_id, state=JobState.QUEUED).exclude(queue_explanation=data)
        if rows.update(queue_explanation=data, queue_position=position):
            changed.append(e.job_id)
        else:
            Job.objects.filter(pk=e.job_id, state=JobState.QUEUED).update(queue_position=position)
    return changed
