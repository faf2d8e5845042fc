"""A job of several workers one of which failed: all of its workers start again, or it fails.

One worker restarted alone would rejoin a collective the others left, so the Job's own retries are
off for these jobs (`builders.build_job`: backoffLimit 0, so the Job controller fails the Job and
stops the other workers). Where the operators allow restarts (`QueueSettings.workers_restarts`),
the failed Kubernetes Job is deleted and the job goes the way of a preempted one: back to the front
of its queue once its pods are gone, a new Job made for it, admitted again as a whole (on the
nodes free then), its workers released together. Each restart is counted on the job.
"""

from __future__ import annotations

from workloads.choices import JobState
from workloads.k8s.reconcilers.job import JobReconciler
from workloads.k8s.status import Observation
from workloads.models import Job, QueueSettings
from workloads.services.publisher import job_notify, outbox_write
from workloads.services.transitions import job_transition


def workers_restart(*, r: JobReconciler, obs: Observation) -> bool:
    """Start all workers again after one failed, when restarts are left; True when it did (the caller
    then records nothing of the failure but the reason)."""
    job = r.owner
    running = job.state in (JobState.ADMITTED, JobState.RUNNING)
    if job.workers < 2 or obs.state != JobState.FAILED or not running:
        return False
    limit = QueueSettings.load().workers_restarts
    if job.restarts >= limit:
        return False
    done = job.restarts + 1
    failed = f"{obs.reason} (exit code {obs.exit_code})" if obs.exit_code is not None else obs.reason
    why = f"{failed}: all {job.workers} workers start again (restart {done} of {limit})"
    if not job_transition(job=job, to=JobState.PREEMPTED, reason=why[:300], restarts=done):
        return False
    r.delete()
    # A new Job is made for the next start: the failed one is finished for good.
    Job.objects.filter(pk=job.pk).update(created_in_cluster_at=None)
    outbox_write(job.pk)
    job_notify(
        job.pk, f"had a worker fail; all {job.workers} workers start again (restart {done} of {limit})"
    )
    return True
