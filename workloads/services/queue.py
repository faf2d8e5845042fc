"""Writes of the admission queue: the admission cycle's moves, and the operators' queue actions.

The cycle (`workloads.admission`) decides; these functions apply one decision each, by
compare-and-swap on the job's state, so a second cycle running at the same time is harmless.
Admitting or preempting only changes the row and writes the outbox; the job's reconcile then
(un)suspends the Kubernetes Job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest

from accounts.audit import audit_record
from accounts.models import User
from accounts.selectors import is_operator
from gpu import services as gpu_services
from workloads.choices import ACTIVE_STATES, JobState
from workloads.messages import explanation_admitted, explanation_stored
from workloads.models import Job
from workloads.queue import CyclePlan, Explanation, PreemptionNotice
from workloads.services.publisher import job_notify, outbox_write
from workloads.services.transitions import job_transition

NOTICE_FIELDS = ("preempt_deadline", "preempt_notice_at", "preempt_for")


def job_admit(*, job_id: int, node: str, borrowing: bool, worker_nodes: Iterable[str] = ()) -> bool:
    """`worker_nodes`: a job of several workers, each worker's node by index (`node` is the first)."""
    job = Job.objects.select_related("project").get(pk=job_id)
    why = "admitted on borrowed quota (preemptible)" if borrowing else "admitted: quota and a node have room"
    if job.workers > 1:
        why = f"all {job.workers} workers admitted together: quota and nodes have room for each"
    placed: dict[str, Any] = {
        "planned_node": node,
        "worker_nodes": list(worker_nodes),
        "borrowing": borrowing,
    }
    if not job_transition(job=job, to=JobState.ADMITTED, reason=why, **placed):
        return False
    Job.objects.filter(pk=job_id).update(
        queue_front=False, queue_position=None, queue_explanation=explanation_admitted(node, borrowing)
    )
    outbox_write(job_id)
    return True


def nodes_held(*, held: Mapping[str, int]) -> None:
    """The nodes the queue holds for a waiting job of several workers (node -> job id), marked on the
    gpu app's nodes as "project/job" for the tiles; the others' marks cleared."""
    jobs = {j.pk: j for j in Job.objects.select_related("project").filter(pk__in=set(held.values()))}
    gpu_services.node_holds_set(
        holds={node: f"{jobs[jid].project.slug}/{jobs[jid]}" for node, jid in held.items() if jid in jobs}
    )


def job_preempt(*, job_id: int) -> bool:
    """Notice ended: give the borrowed GPUs back. The reconciler re-suspends the Kubernetes Job."""
    job = Job.objects.select_related("project").get(pk=job_id)
    if not job_transition(job=job, to=JobState.PREEMPTED, reason="preempted: borrowed quota reclaimed"):
        return False
    Job.objects.filter(pk=job_id).update(**dict.fromkeys(NOTICE_FIELDS), borrowing=False)
    outbox_write(job_id)
    job_notify(job_id, "was preempted (borrowed GPUs reclaimed); it is back at the front of its queue")
    return True


def requeue_preempted(*, bound: set[str]) -> list[int]:
    """Preempted jobs with no pod left (`bound`: uids of jobs whose pods the cluster still has) go
    back to the queue, at the front of their priority. Jobs suspended for idle GPUs wait for their
    owner to resume them (services.idle_actions)."""
    out = []
    preempted = Job.objects.select_related("project").filter(state=JobState.PREEMPTED)
    for job in preempted.filter(idle_suspended_at__isnull=True):
        if str(job.uid) in bound:
            continue
        if job_transition(job=job, to=JobState.QUEUED, reason="requeued after preemption", queue_front=True):
            Job.objects.filter(pk=job.pk).update(planned_node="", worker_nodes=[], node="", pod_name="")
            outbox_write(job.pk)
            out.append(job.pk)
    return out


def notices_apply(*, plan: CyclePlan, now: datetime) -> None:
    if plan.withdraw:
        Job.objects.filter(pk__in=plan.withdraw).update(**dict.fromkeys(NOTICE_FIELDS))
    for notice in plan.notices:
        if _notice_store(notice):
            when = notice.deadline.strftime("%H:%M UTC")
            job_notify(notice.job_id, f"will be preempted at {when}: the lending project needs its GPUs back")


def _notice_store(notice: PreemptionNotice) -> bool:
    return bool(
        Job.objects.filter(pk=notice.job_id, state__in=ACTIVE_STATES, preempt_deadline__isnull=True).update(
            preempt_deadline=notice.deadline, preempt_notice_at=notice.issued_at, preempt_for=notice.for_job
        )
    )


def explanations_store(*, explanations: Iterable[Explanation]) -> list[int]:
    """Store each explanation and place on its (still queued) job; returns the ids whose explanation
    changed. One read of what is stored and one write of the rows that differ: two UPDATEs per queued
    job every cycle (each second), changed or not, cost half the controller's admission time under
    the load test (py-spy)."""
    wanted = {e.job_id: (explanation_stored(e), e.position_global or None) for e in explanations}
    stored = list(
        Job.objects.filter(pk__in=wanted, state=JobState.QUEUED).values_list(
            "pk", "queue_explanation", "queue_position"
        )
    )
    stale = [(pk, text) for pk, text, position in stored if (text, position) != wanted[pk]]
    rows = [Job(pk=pk, queue_explanation=wanted[pk][0], queue_position=wanted[pk][1]) for pk, _ in stale]
    # state=QUEUED again: a job admitted since the read keeps its "admitted" explanation.
    Job.objects.filter(state=JobState.QUEUED).bulk_update(rows, ["queue_explanation", "queue_position"])
    return [pk for pk, text in stale if text != wanted[pk][0]]


QUEUE_ACTIONS: dict[str, dict[str, Any]] = {
    "hold": {"held": True},
    "release": {"held": False},
    "front": {"queue_front": True},
}


def queue_action(*, actor: User, job_ids: list[int], action: str, request: HttpRequest | None = None) -> int:
    """Operators: hold, release or move queued jobs to the front. Returns how many changed."""
    if not is_operator(actor):
        raise PermissionDenied("Only operators change the queue.")
    changes = QUEUE_ACTIONS[action]
    count = 0
    for job in Job.objects.select_related("project").filter(pk__in=job_ids, state=JobState.QUEUED):
        with transaction.atomic():
            if Job.objects.filter(pk=job.pk, state=JobState.QUEUED).update(**changes):
                audit_record(
                    actor=actor,
                    action=f"queue.{action}",
                    obj=job,
                    project=job.project,
                    after=changes,
                    request=request,
                )
                count += 1
    return count
