"""The jobs API's job body: JobSerializer builds it in one pass (workloads/api/serializers.py); it must
equal DRF's own output from the same declared fields, key for key and in the same order, for jobs in
every state, with empty and set optional fields, in UTC and in another current time zone."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.utils import timezone
from rest_framework import serializers

from tests.fixtures.personas import World, api_client
from workloads.api.serializers import JobSerializer
from workloads.choices import JobState
from workloads.models import Job
from workloads.services import jobs as services
from workloads.tests.conftest import IMAGE

pytestmark = pytest.mark.django_db


def _jobs(world: World) -> list[Job]:
    """A queued job, a running one on a node, a failed one with its exit code, a shared-GPU one."""
    now = timezone.now().replace(microsecond=123456)
    spec: dict[str, Any] = {
        "image": IMAGE,
        "gpus": 2,
        "command": ["python", "train.py"],
        "args": ["--lr", "3e-4"],
        "env": [{"name": "SEED", "value": "7"}],
    }
    datas = [{**spec, "name": f"j{i}"} for i in range(3)] + [{"image": IMAGE, "mps_slices": 2}]
    made = [services.job_submit(actor=world.member, project=world.alpha, data=data) for data in datas]
    Job.objects.filter(pk=made[1].pk).update(
        state=JobState.RUNNING, node="gpu-node-0", admitted_at=now - timedelta(minutes=3), started_at=now
    )
    Job.objects.filter(pk=made[2].pk).update(
        state=JobState.FAILED,
        exit_code=3,
        state_reason="OOMKilled",
        started_at=now - timedelta(hours=1),
        finished_at=now,
        peak_gpu_mem_mib=9000,
        peak_sm_pct=88,
    )
    return list(Job.objects.select_related("project", "owner").order_by("id"))


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin"])
def test_the_one_pass_body_equals_drfs_field_by_field(jobs_world: World, zone: str) -> None:
    jobs = _jobs(jobs_world)
    with mock.patch("django.utils.timezone.now", return_value=timezone.now()), timezone.override(zone):
        for job in jobs:
            serializer = JobSerializer(context={})
            ours = serializer.to_representation(job)
            drf = serializers.ModelSerializer.to_representation(serializer, job)
            assert list(ours) == list(drf)  # the same keys, in the same order
            assert ours == dict(drf), job.state
    assert {job.state for job in jobs} == {JobState.QUEUED, JobState.RUNNING, JobState.FAILED}


def test_the_list_sends_the_one_pass_body(jobs_world: World) -> None:
    jobs = _jobs(jobs_world)
    listed = api_client(jobs_world.member).get("/api/v1/jobs/?page_size=100").json()["results"]
    failed = next(body for body in listed if body["id"] == str(jobs[2].uid))
    assert (failed["state"], failed["exit_code"], failed["state_reason"]) == ("failed", 3, "OOMKilled")
    assert failed["finished_at"].endswith(".123456Z")
    assert failed["owner"] == jobs_world.member.email
    assert failed["project"] == "alpha"


def test_a_lists_rows_equal_each_jobs_own_body(jobs_world: World) -> None:
    """Each job's body in a page of the list is the body its own GET sends."""
    jobs = _jobs(jobs_world)
    client = api_client(jobs_world.member)
    with mock.patch("django.utils.timezone.now", return_value=timezone.now()):
        listed = client.get("/api/v1/jobs/?page_size=100").json()["results"]
        each = [client.get(f"/api/v1/jobs/{body['id']}/").json() for body in listed]
    assert len(listed) == len(jobs)
    assert listed == each
