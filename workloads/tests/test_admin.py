from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.messages.storage.fallback import FallbackStorage
from django.test import Client, RequestFactory
from django.utils import timezone

from tests.fixtures.personas import World
from workloads.admin.jobs import JobAdmin
from workloads.choices import JobState, TaskName
from workloads.models import GrantStatus, Job, JobTemplate, QuotaGrant
from workloads.services import jobs as services
from workloads.tests.conftest import IMAGE, capture_sends

pytestmark = pytest.mark.django_db


def test_operators_cancel_jobs_and_export_gpu_hours_from_the_admin(jobs_world: World) -> None:
    job = services.job_submit(
        actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE, "gpus": 1}
    )
    request = RequestFactory().post("/admin/workloads/job/")
    request.user = jobs_world.admin
    request.session = {}  # type: ignore[assignment]
    request._messages = FallbackStorage(request)  # type: ignore[attr-defined]
    model_admin = JobAdmin(Job, admin.site)
    model_admin.cancel_jobs(request, Job.objects.filter(pk=job.pk))
    job.refresh_from_db()
    assert (job.state, job.cancelled_by) == (JobState.CANCELLED, jobs_world.admin)
    response = model_admin.export_gpu_hours(request, Job.objects.all())
    assert response["Content-Type"] == "text/csv"
    assert str(job.uid) in response.content.decode()


def _admin(world: World) -> Client:
    client = Client()
    client.force_login(world.admin)
    return client


def test_the_admin_shows_a_jobs_whole_spec_its_fields_without_a_column_too(
    jobs_world: World, settings: Any
) -> None:
    settings.GPUPORTAL_JOB_SIMULATION = True
    data = {"image": IMAGE, "gpus": 1, "simulate": {"run_seconds": 5}}
    job = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data=data)
    page = _admin(jobs_world).get(f"/admin/workloads/job/{job.pk}/change/").content.decode()
    assert "&quot;run_seconds&quot;: 5," in page
    assert f"&quot;image&quot;: &quot;{IMAGE}&quot;" in page


def test_operators_add_a_job_template_in_the_admin_and_a_bad_spec_is_a_field_error(jobs_world: World) -> None:
    client = _admin(jobs_world)
    spec = '{"image": "%s", "gpus": 1}'
    form = {"project": str(jobs_world.alpha.pk), "name": "train", "description": ""}
    response = client.post("/admin/workloads/jobtemplate/add/", {**form, "spec": spec % IMAGE})
    assert response.status_code == 302, response.content.decode()[:1500]
    template = JobTemplate.objects.get(name="train")
    assert (template.spec["gpus"], template.created_by) == (1, jobs_world.admin)
    bad = client.post(
        "/admin/workloads/jobtemplate/add/",
        {**form, "name": "bad", "spec": spec % "docker.io/evil/x:1"},
    )
    assert bad.status_code == 200
    assert "allow-list" in bad.content.decode()
    assert not JobTemplate.objects.filter(name="bad").exists()


def test_editing_an_approved_grant_in_the_admin_reapplies_the_resource_quota(
    jobs_world: World, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    refreshed = capture_sends(monkeypatch, TaskName.RECONCILE_NAMESPACE)
    now = timezone.now()
    grant = QuotaGrant.objects.create(
        project=jobs_world.alpha,
        requested_by=jobs_world.member,
        gpus=1,
        starts_at=now,
        until=now + timedelta(days=1),
        status=GrantStatus.APPROVED,
    )
    form = {
        "project": jobs_world.alpha.pk,
        "gpus": 3,
        "slices": 0,
        "starts_at_0": now.strftime("%Y-%m-%d"),
        "starts_at_1": now.strftime("%H:%M:%S"),
        "until_0": (now + timedelta(days=1)).strftime("%Y-%m-%d"),
        "until_1": now.strftime("%H:%M:%S"),
        "reason": "deadline",
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = _admin(jobs_world).post(f"/admin/workloads/quotagrant/{grant.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:1500]
    grant.refresh_from_db()
    assert grant.gpus == 3
    assert refreshed == [jobs_world.alpha.pk]
