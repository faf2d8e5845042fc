"""Jobs on a GPU that just failed go back to the queue with a notice, not to failed.

The gpu app announces a failed GPU on `gpu.signals.gpu_failed` (it never imports workloads). The
jobs it ran are found by the pods its telemetry attributed to it (`job-<uid>-…` in the project's
namespace), on that node; a job of several workers is found by any worker's pod on any of its nodes,
and goes back whole. Each moves to PREEMPTED with the reason; the reconciler re-suspends its
Kubernetes Job and the admission cycle requeues it at the front of its priority once its pods are
gone (`services.queue.requeue_preempted`), so it reruns on a GPU that is offered.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q

from workloads.choices import JobState
from workloads.models import Job
from workloads.services.publisher import job_notify, outbox_write
from workloads.services.queue import NOTICE_FIELDS
from workloads.services.transitions import job_transition

PREEMPTIBLE = (JobState.ADMITTED, JobState.RUNNING)


def jobs_on_gpu(*, node: str, pods: list[tuple[str, str]]) -> list[Job]:
    """The node's admitted or running jobs that own one of `pods` (namespace, pod name): any of whose
    workers runs there."""
    wanted = set(pods)
    there = Q(node=node) | Q(worker_nodes__contains=[node])
    jobs = Job.objects.select_related("project").filter(there, state__in=PREEMPTIBLE)
    return [
        job
        for job in jobs
        if any(ns == job.namespace and name.startswith(f"{job.k8s_name}-") for ns, name in wanted)
    ]


def jobs_requeue_for_failed_gpu(
    *, node: str, gpu_uuid: str, reason: str, pods: list[tuple[str, str]]
) -> list[int]:
    """Preempt (with notice) every job on the failed GPU; returns their ids."""
    why = f"GPU {gpu_uuid} on {node} failed: {reason}"
    done = []
    for job in jobs_on_gpu(node=node, pods=pods):
        with transaction.atomic():
            if not job_transition(job=job, to=JobState.PREEMPTED, reason=why):
                continue
            Job.objects.filter(pk=job.pk).update(**dict.fromkeys(NOTICE_FIELDS), borrowing=False)
            outbox_write(job.pk)
            job_notify(job.pk, f"was stopped because {why}; it is back at the front of its queue and reruns")
        done.append(job.pk)
    return done
