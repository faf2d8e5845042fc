"""A failed GPU's jobs are preempted with a notice (not failed) and the queue takes them back."""

from __future__ import annotations

from typing import Any

import pytest

from gpu.signals import gpu_failed
from tests.fixtures.personas import World
from workloads.choices import JobState
from workloads.models import Job, JobEvent, ReconcileOutbox
from workloads.services.queue import requeue_preempted
from workloads.tests.conftest import capture_sends

pytestmark = pytest.mark.django_db


def _job(
    world: World, *, state: JobState = JobState.RUNNING, node: str = "gpu-node-0", gpus: int = 2, **extra: Any
) -> Job:
    return Job.objects.create(
        project=world.alpha, owner=world.member, image="pytorch", gpus=gpus, node=node, state=state, **extra
    )


def _send(job: Job, node: str = "gpu-node-0") -> None:
    gpu_failed.send(
        sender=object,
        node=node,
        gpu_uuid="GPU-1",
        reason="XID 79",
        pods=[(job.namespace, f"{job.k8s_name}-x7k2p")],
    )


def test_the_jobs_on_a_failed_gpu_are_preempted_with_the_reason_and_requeued(
    world: World, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    notes = capture_sends(monkeypatch, "workloads.notify_job")
    hit, other = _job(world), _job(world)
    with django_capture_on_commit_callbacks(execute=True):
        _send(hit)
    hit.refresh_from_db()
    other.refresh_from_db()
    reason = "GPU GPU-1 on gpu-node-0 failed: XID 79"
    assert (hit.state, hit.state_reason, other.state) == (JobState.PREEMPTED, reason, JobState.RUNNING)
    assert JobEvent.objects.filter(job=hit, to_state=JobState.PREEMPTED).get().message == reason
    assert ReconcileOutbox.objects.filter(job=hit).exists()
    assert [n for n in notes if n[0] == hit.pk and reason in n[1]]
    assert requeue_preempted(bound=set()) == [hit.pk]
    hit.refresh_from_db()
    assert (hit.state, hit.queue_front, hit.node) == (JobState.QUEUED, True, "")


def test_jobs_elsewhere_or_already_done_are_left_alone(world: World) -> None:
    done = _job(world, state=JobState.SUCCEEDED)
    elsewhere = _job(world, node="gpu-node-1")
    _send(done)
    _send(elsewhere)  # the pod matches, but the failure is on another node
    assert Job.objects.get(pk=done.pk).state == JobState.SUCCEEDED
    assert Job.objects.get(pk=elsewhere.pk).state == JobState.RUNNING


def test_a_failed_gpu_under_any_worker_requeues_the_whole_job_of_several_workers(
    world: World, django_capture_on_commit_callbacks: Any
) -> None:
    job = _job(world, workers=2, planned_node="gpu-node-0", worker_nodes=["gpu-node-0", "gpu-node-1"])
    with django_capture_on_commit_callbacks(execute=True):
        gpu_failed.send(
            sender=object,
            node="gpu-node-1",
            gpu_uuid="GPU-9",
            reason="XID 79",
            pods=[(job.namespace, f"{job.k8s_name}-1-q2w3e")],
        )
    job.refresh_from_db()
    assert (job.state, job.state_reason) == (JobState.PREEMPTED, "GPU GPU-9 on gpu-node-1 failed: XID 79")
    assert requeue_preempted(bound=set()) == [job.pk]
    job.refresh_from_db()
    assert (job.state, job.queue_front, job.workers) == (JobState.QUEUED, True, 2)
