"""/metrics carries the queue, quota, transitions and outbox figures, read from the database at
scrape time: a second process (another web replica) scrapes the same numbers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client, override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from accounts.models import GpuTypeLimit
from gpu.models import Node
from gpu.tests.factories import make_node
from tests.fixtures.personas import World
from workloads.choices import JobState
from workloads.models import Job, ReconcileOutbox
from workloads.services import jobs as services
from workloads.services.transitions import job_transition
from workloads.tests import second_process
from workloads.tests.conftest import IMAGE

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "metrics-test-token-0123456789"
SAMPLE = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(text: str) -> SAMPLE:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith(
            ("gpuportal_job", "gpuportal_queue", "gpuportal_quota", "gpuportal_outbox", "gpuportal_reconcile")
        )
    }


def _at(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def _scenario(world: World) -> None:
    """alpha: 3 queued (one waiting 10 min), 1 admitted then running (2 GPUs), 1 preempted."""
    submit = {"image": IMAGE, "gpus": 1}
    queued = [services.job_submit(actor=world.member, project=world.alpha, data=submit) for _ in range(3)]
    Job.objects.filter(pk=queued[0].pk).update(submitted_at=timezone.now() - timedelta(minutes=10))
    for gpus, end in ((2, JobState.RUNNING), (1, JobState.PREEMPTED)):
        job = services.job_submit(actor=world.member, project=world.alpha, data={**submit, "gpus": gpus})
        assert job_transition(job=job, to=JobState.ADMITTED, reason="test")
        assert job_transition(job=job, to=JobState.RUNNING, reason="test")
        if end == JobState.PREEMPTED:
            assert job_transition(job=job, to=JobState.PREEMPTED, reason="test")
    ReconcileOutbox.objects.filter(job_id=queued[1].pk).update(
        requested_at=timezone.now() - timedelta(seconds=90)
    )
    ReconcileOutbox.objects.filter(job_id=queued[2].pk).update(published_at=None)  # never reached the broker
    # The running job's node has H100s; alpha may hold 4 of them and 2 RTX 5090s.
    Node.objects.filter(pk=make_node("gpu-node-h100").pk).update(gpu_model="NVIDIA-H100")
    Job.objects.filter(state=JobState.RUNNING).update(node="gpu-node-h100")
    for gpu_type, n in (("NVIDIA-H100", 4), ("NVIDIA-GeForce-RTX-5090", 2)):
        GpuTypeLimit.objects.create(quota=world.alpha.quota, gpu_type=gpu_type, gpus=n)


@override_settings(GPU_METRICS_TOKEN=TOKEN)
def test_the_figures_match_the_scenario_in_two_processes(jobs_world: World) -> None:
    _scenario(jobs_world)
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    here = _samples(response.content.decode())
    alpha = (("project", "alpha"),)
    assert here[("gpuportal_jobs", (("project", "alpha"), ("state", "queued")))] == 3
    assert here[("gpuportal_jobs", (("project", "alpha"), ("state", "running")))] == 1
    assert 599 < here[("gpuportal_queue_oldest_seconds", alpha)] < 700
    assert here[("gpuportal_quota_gpus_held", alpha)] == 2
    assert here[("gpuportal_quota_gpus", alpha)] == 8
    assert here[("gpuportal_job_transitions_total", (("project", "alpha"), ("to_state", "admitted")))] == 2
    assert here[("gpuportal_job_transitions_total", (("project", "alpha"), ("to_state", "preempted")))] == 1
    assert here[("gpuportal_outbox_depth", ())] == 5
    assert here[("gpuportal_outbox_oldest_seconds", ())] >= 90
    h100, rtx = (
        _at(project="alpha", gpu_type="NVIDIA-H100"),
        _at(project="alpha", gpu_type="NVIDIA-GeForce-RTX-5090"),
    )
    assert here[("gpuportal_quota_gpus_held_by_type", h100)] == 2
    assert here[("gpuportal_quota_gpu_type_limit", h100)] == 4
    assert here[("gpuportal_quota_gpus_held_by_type", rtx)] == 0
    assert here[("gpuportal_quota_gpu_type_limit", rtx)] == 2
    assert here[("gpuportal_reconcile_pending", _at(project="alpha", stage="sent"))] == 4
    assert here[("gpuportal_reconcile_pending", _at(project="alpha", stage="unsent"))] == 1
    assert 90 <= here[("gpuportal_reconcile_lag_seconds", alpha)] < 200
    there = _samples(second_process.scrape(TOKEN))
    assert {k: v for k, v in there.items() if "seconds" not in k[0]} == {
        k: v for k, v in here.items() if "seconds" not in k[0]
    }


def test_metrics_stay_behind_the_token() -> None:
    with override_settings(GPU_METRICS_TOKEN=TOKEN):
        assert Client().get("/metrics").status_code == 401
        assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
