from __future__ import annotations

import pytest
from django.test import override_settings

from tests.fixtures.personas import World, session_client
from workloads.models import Job
from workloads.tests.conftest import IMAGE

pytestmark = pytest.mark.django_db
FORM = {
    "project": "alpha",
    "image": IMAGE,
    "gpus": 1,
    "workers": 1,
    "mps_slices": 0,
    "cpu_millicores": 100,
    "memory_mib": 64,
    "max_runtime_minutes": 10,
    "priority": "normal",
}


def test_submit_form_shows_headroom_and_explains_errors_in_place(jobs_world: World) -> None:
    client = session_client(jobs_world.member)
    page = client.get("/jobs/submit/").content.decode()
    assert "Quota headroom" in page
    response = client.post("/jobs/submit/", {**FORM, "image": "docker.io/evil/x:1", "env": "CUDA_X=1"})
    assert response.status_code == 400
    body = response.content.decode()
    assert 'data-error-for="image"' in body
    assert 'data-error-for="env"' in body
    assert Job.objects.count() == 0


def test_submit_form_creates_the_job_and_redirects(jobs_world: World) -> None:
    client = session_client(jobs_world.member)
    response = client.post(
        "/jobs/submit/", {**FORM, "command": "python train.py --lr 0.1", "env": "EPOCHS=3"}
    )
    job = Job.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/jobs/{job.uid}/"
    assert (job.command, job.env) == (
        ["python", "train.py", "--lr", "0.1"],
        [{"name": "EPOCHS", "value": "3"}],
    )
    detail = client.get(f"/jobs/{job.uid}/").content.decode()
    assert "workloads/live.js" in detail
    assert "<script>" not in detail  # CSP: no inline scripts
    assert str(job.uid) in client.get("/jobs/").content.decode()


def test_the_real_node_placement_is_offered_only_where_the_site_switches_it_on(jobs_world: World) -> None:
    client = session_client(jobs_world.member)
    with override_settings(GPUPORTAL_REAL_NODE_PLACEMENT=False):
        assert 'name="placement"' not in client.get("/jobs/submit/").content.decode()
    with override_settings(GPUPORTAL_REAL_NODE_PLACEMENT=True):
        page = client.get("/jobs/submit/").content.decode()
        assert 'name="placement"' in page
        # Left empty, the placement is any GPU node: the form still submits.
        assert client.post("/jobs/submit/", FORM).status_code == 302
        assert client.post("/jobs/submit/", {**FORM, "placement": "real-node"}).status_code == 302
    assert [job.placement for job in Job.objects.order_by("id")] == ["", "real-node"]


def test_viewer_has_no_project_to_submit_to(jobs_world: World) -> None:
    client = session_client(jobs_world.viewer)
    assert "viewers read only" in client.get("/jobs/submit/").content.decode()
    response = client.post("/jobs/submit/", FORM)
    assert response.status_code == 400
    assert Job.objects.count() == 0


def test_usage_page_renders_chart_data_csv_link_and_grant_form(jobs_world: World) -> None:
    from datetime import timedelta

    from django.utils import timezone

    started = timezone.now() - timedelta(hours=2)
    job = Job.objects.create(
        project=jobs_world.alpha,
        owner=jobs_world.member,
        image=IMAGE,
        gpus=2,
        state="succeeded",
        started_at=started,
        finished_at=started + timedelta(hours=1),
    )
    client = session_client(jobs_world.member)
    assert "/jobs/projects/alpha/usage/" in client.get("/jobs/").content.decode()
    response = client.get("/jobs/projects/alpha/usage/")
    assert response.status_code == 200
    body = response.content.decode()
    assert '<script id="usage-data" type="application/json">' in body
    data = response.context["data"]
    assert [d["label"] for d in data["datasets"]] == [job.owner.email]
    assert sum(sum(d["data"]) for d in data["datasets"]) == pytest.approx(2.0, abs=0.01)
    assert "/api/v1/usage/?project=alpha&amp;group=user&amp;export=csv" in body
    assert "vendor/chartjs/chart.umd.js" in body
    assert "workloads/usage.js" in body
    assert 'id="grant-form"' in body
    assert "<script>" not in body  # CSP: no inline script
    csv = client.get("/api/v1/usage/?project=alpha&group=user&export=csv")
    assert csv.status_code == 200
    assert jobs_world.member.email in csv.content.decode()


def test_usage_page_of_a_foreign_project_is_404(jobs_world: World) -> None:
    client = session_client(jobs_world.outsider)
    assert client.get("/jobs/projects/alpha/usage/").status_code == 404


def test_bad_grant_request_rerenders_with_field_errors_and_writes_nothing(jobs_world: World) -> None:
    from accounts.models import AuditLog
    from workloads.models import QuotaGrant

    client = session_client(jobs_world.member)
    response = client.post(
        "/jobs/projects/alpha/usage/",
        {"gpus": "0", "slices": "0", "starts_at": "2030-01-02T00:00", "until": "2030-01-01T00:00"},
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert 'data-error-for="gpus"' in body
    assert 'data-error-for="until"' in body
    response = client.post("/jobs/projects/alpha/usage/", {"gpus": "x", "until": "soon"})
    assert response.status_code == 400
    assert 'data-error-for="until"' in response.content.decode()
    assert QuotaGrant.objects.count() == 0
    assert not AuditLog.objects.filter(action="grant.request").exists()


def test_grant_request_creates_a_requested_grant_with_an_audit_row(jobs_world: World) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from accounts.models import AuditLog
    from workloads.models import GrantStatus, QuotaGrant

    client = session_client(jobs_world.member)
    until = (timezone.now() + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    response = client.post(
        "/jobs/projects/alpha/usage/",
        {"gpus": "4", "slices": "0", "until": until, "reason": "paper deadline"},
    )
    assert response.status_code == 302
    grant = QuotaGrant.objects.get()
    assert (grant.project, grant.requested_by, grant.gpus) == (jobs_world.alpha, jobs_world.member, 4)
    assert grant.status == GrantStatus.REQUESTED
    assert grant.reason == "paper deadline"
    assert AuditLog.objects.filter(action="grant.request", object_id=str(grant.pk)).count() == 1
    page = client.get("/jobs/projects/alpha/usage/").content.decode()
    assert "paper deadline" in page
