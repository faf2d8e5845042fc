"""Unknown and lost are shown as such: API (filter and OpenAPI enum), pages, admin filter, gpuctl's help."""

from __future__ import annotations

import pytest

import gpuctl
from tests.fixtures.personas import World, api_client, session_client
from workloads.choices import JobState
from workloads.models import Job
from workloads.services import jobs as services
from workloads.tests.conftest import IMAGE
from workloads.tests.test_admin import _admin

pytestmark = pytest.mark.django_db
WHY = "unknown: the Kubernetes Job is gone and its outcome was not seen"


def unknown_job(world: World) -> Job:
    job = services.job_submit(actor=world.member, project=world.alpha, data={"image": IMAGE, "gpus": 1})
    Job.objects.filter(pk=job.pk).update(state=JobState.UNKNOWN, state_reason=WHY)
    job.refresh_from_db()
    return job


def test_the_api_filters_and_documents_unknown_and_lost(jobs_world: World) -> None:
    job = unknown_job(jobs_world)
    client = api_client(jobs_world.member)
    listed = client.get("/api/v1/jobs/?state=unknown").json()
    assert [(j["id"], j["state"], j["state_reason"]) for j in listed["results"]] == [
        (str(job.uid), "unknown", WHY)
    ]
    assert client.get("/api/v1/jobs/?state=lost").json()["count"] == 0
    schema = client.get("/api/schema/?format=json").content.decode()
    assert '"unknown"' in schema
    assert '"lost"' in schema


def test_the_job_pages_say_unknown_and_what_it_means(jobs_world: World) -> None:
    job = unknown_job(jobs_world)
    client = session_client(jobs_world.member)
    listing = client.get("/jobs/?state=unknown").content.decode()
    assert 'class="state state-unknown">Unknown</mark>' in listing
    assert WHY in listing
    page = client.get(f"/jobs/{job.uid}/").content.decode()
    assert 'class="state state-unknown">Unknown</mark>' in page
    assert "keeps its GPUs" in page
    assert "Cancel it to end it now" in page
    Job.objects.filter(pk=job.pk).update(state=JobState.LOST)
    page = client.get(f"/jobs/{job.uid}/").content.decode()
    assert ">Lost</mark>" in page
    assert "given back to the queue" in page


def test_the_admin_filters_jobs_by_unknown(jobs_world: World) -> None:
    unknown_job(jobs_world)
    page = _admin(jobs_world).get("/admin/workloads/job/?state__exact=unknown").content.decode()
    assert "?state__exact=unknown" in page
    assert "?state__exact=lost" in page
    assert "1 job" in page or "1 result" in page


def test_gpuctl_names_every_state_in_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        gpuctl.parser().parse_args(["jobs", "--help"])
    helps = " ".join(capsys.readouterr().out.split())
    assert all(state in helps for state in JobState.values), helps
