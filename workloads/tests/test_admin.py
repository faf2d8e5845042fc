from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.messages.storage.fallback import FallbackStorage
from django.test import RequestFactory

from tests.fixtures.personas import World
from workloads.admin.jobs import JobAdmin
from workloads.choices import JobState
from workloads.models import Job
from workloads.services import jobs as services
from workloads.tests.conftest import IMAGE

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
