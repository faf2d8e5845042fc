"""/metrics carries the queue, quota, transitions and outbox figures, read from the database at
scrape time: a second process (another web replica) scrapes the same numbers."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.personas import World
from workloads.choices import JobState
from workloads.models import Job, ReconcileOutbox
from workloads.services import jobs as services
from workloads.services.transitions import job_transition
from workloads.tests.conftest import IMAGE

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "metrics-test-token-0123456789"
SAMPLE = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(text: str) -> SAMPLE:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith(("gpuportal_job", "gpuportal_queue", "gpuportal_quota", "gpuportal_outbox"))
    }


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


def _in_another_process() -> str:
    """What a second web replica would answer: a fresh interpreter on the same database."""
    code = (
        "import django; django.setup();"
        "from prometheus_client import REGISTRY, generate_latest;"
        "print(generate_latest(REGISTRY).decode())"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings_test"}
    env["GPUPORTAL_TEST_DB"] = connection.settings_dict["NAME"]
    # settings_test points tests at TEST.NAME; a plain process reads NAME, so hand it the test DB.
    env["DATABASE_URL"] = env["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


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
    there = _samples(_in_another_process())
    assert {k: v for k, v in there.items() if "seconds" not in k[0]} == {
        k: v for k, v in here.items() if "seconds" not in k[0]
    }


def test_metrics_stay_behind_the_token() -> None:
    with override_settings(GPU_METRICS_TOKEN=TOKEN):
        assert Client().get("/metrics").status_code == 401
        assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
