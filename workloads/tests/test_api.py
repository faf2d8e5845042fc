"""The jobs and templates API: create, list, filters, cancel, rerun, logs, events, CSV, scopes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from accounts.choices import TokenScope
from tests.fixtures.personas import World, api_client
from workloads.choices import JobState
from workloads.models import Job
from workloads.services import jobs as services
from workloads.tests.conftest import IMAGE
from workloads.tests.fakes import FakeKube

pytestmark = pytest.mark.django_db


def create(client: Any, **body: Any) -> Any:
    return client.post(
        "/api/v1/jobs/", {"project": "alpha", "image": IMAGE, "gpus": 1, **body}, format="json"
    )


def test_member_submits_and_lists(jobs_world: World, fake_kube: FakeKube) -> None:
    client = api_client(jobs_world.member)
    response = create(client, name="first")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["state"], body["project"], body["gpus"]) == ("queued", "alpha", 1)
    listed = client.get("/api/v1/jobs/?state=queued&project=alpha").json()
    assert [j["id"] for j in listed["results"]] == [body["id"]]
    assert client.get("/api/v1/jobs/?state=running").json()["count"] == 0
    assert fake_kube.calls == []


def test_bad_input_names_the_field(jobs_world: World, fake_kube: FakeKube) -> None:
    response = create(api_client(jobs_world.member), gpus="4", env=[{"name": "CUDA_X", "value": "1"}])
    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) == {"gpus", "env"}
    assert Job.objects.count() == 0
    assert fake_kube.calls == []


def test_bad_state_filter_is_400(jobs_world: World) -> None:
    assert api_client(jobs_world.member).get("/api/v1/jobs/?state=bogus").status_code == 400


def test_read_token_cannot_submit(jobs_world: World) -> None:
    client = api_client(jobs_world.member, scopes=(TokenScope.READ,))
    assert create(client).status_code == 403


def test_viewer_reads_but_cannot_submit_or_cancel(jobs_world: World) -> None:
    job = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    viewer = api_client(jobs_world.viewer)
    assert viewer.get(f"/api/v1/jobs/{job.uid}/").status_code == 200
    assert create(viewer).status_code == 403
    assert viewer.post(f"/api/v1/jobs/{job.uid}/cancel/").status_code == 403
    assert viewer.post(f"/api/v1/jobs/{job.uid}/rerun/").status_code == 403


def test_cancel_rerun_and_edits(jobs_world: World) -> None:
    client = api_client(jobs_world.member)
    job_id = create(client, args=["a"]).json()["id"]
    rerun = client.post(f"/api/v1/jobs/{job_id}/rerun/", {"gpus": 2}, format="json")
    assert rerun.status_code == 201
    assert (rerun.json()["gpus"], rerun.json()["args"]) == (2, ["a"])
    bad = client.post(f"/api/v1/jobs/{job_id}/rerun/", {"gpus": -1}, format="json")
    assert bad.status_code == 400
    cancelled = client.post(f"/api/v1/jobs/{job_id}/cancel/")
    assert cancelled.json()["state"] == JobState.CANCELLED
    assert client.post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 400


def test_logs_serve_the_kept_tail_and_events_the_timeline(jobs_world: World) -> None:
    client = api_client(jobs_world.member)
    job_id = create(client).json()["id"]
    Job.objects.filter(uid=job_id).update(log_tail="line 1\nline 2\n", log_captured=True, pod_name="p")
    response = client.get(f"/api/v1/jobs/{job_id}/logs/?follow=1")
    assert response.status_code == 200
    body = b"".join(response.streaming_content)  # type: ignore[attr-defined]
    assert body == b"line 1\nline 2\n"
    events = client.get(f"/api/v1/jobs/{job_id}/events/").json()
    assert events["results"][0]["to_state"] == "queued"


def test_accounting_csv(jobs_world: World) -> None:
    client = api_client(jobs_world.member)
    job_id = create(client, gpus=2).json()["id"]
    now = timezone.now()
    Job.objects.filter(uid=job_id).update(started_at=now - timedelta(hours=1), finished_at=now)
    response = client.get("/api/v1/jobs/accounting/")
    assert response["Content-Type"] == "text/csv"
    text = response.content.decode()
    assert job_id in text
    assert ",2.0,0.0\r\n" in text  # allocated, used (no telemetry)
    by_project = client.get("/api/v1/jobs/accounting/?group=project").content.decode()
    assert by_project.splitlines() == ["project,gpu_hours,used_gpu_hours", "alpha,2.0,0.0"]
    by_user = client.get("/api/v1/jobs/accounting/?group=user").content.decode()
    assert by_user.splitlines() == ["user,gpu_hours,used_gpu_hours", "bob@example.com,2.0,0.0"]
    assert client.get("/api/v1/jobs/accounting/?group=planet").status_code == 400


def test_accounting_csv_never_hands_a_spreadsheet_a_formula(jobs_world: World) -> None:
    client = api_client(jobs_world.member)
    job_id = create(client, gpus=1).json()["id"]
    now = timezone.now()
    Job.objects.filter(uid=job_id).update(started_at=now - timedelta(hours=1), finished_at=now)
    type(jobs_world.member).objects.filter(pk=jobs_world.member.pk).update(email="=1+2@example.com")
    by_user = client.get("/api/v1/jobs/accounting/?group=user").content.decode()
    assert by_user.splitlines() == ["user,gpu_hours,used_gpu_hours", "'=1+2@example.com,1.0,0.0"]


def test_templates_roundtrip(jobs_world: World) -> None:
    client = api_client(jobs_world.member)
    body = {"project": "alpha", "name": "train", "spec": {"image": IMAGE, "gpus": 1}}
    created = client.post("/api/v1/templates/", body, format="json")
    assert created.status_code == 201, created.json()
    assert client.post("/api/v1/templates/", body, format="json").status_code == 400
    hostile = {**body, "name": "x", "spec": {"image": IMAGE, "hostPID": True}}
    assert client.post("/api/v1/templates/", hostile, format="json").status_code == 400
    template_id = created.json()["id"]
    assert client.get("/api/v1/templates/?project=alpha").json()["count"] == 1
    assert client.delete(f"/api/v1/templates/{template_id}/").status_code == 204


def test_queued_jobs_are_capped_per_user_and_per_project_with_a_clear_429(jobs_world: World) -> None:
    from workloads.models import QueueSettings

    QueueSettings.objects.update_or_create(
        pk=1, defaults={"max_queued_per_user": 2, "max_queued_per_project": 3}
    )
    bob, alice = api_client(jobs_world.member), api_client(jobs_world.owner)
    assert [create(bob).status_code for _ in range(2)] == [201, 201]
    refused = create(bob)
    assert refused.status_code == 429
    assert "2 queued jobs" in refused.json()["error"]["message"]
    assert create(alice).status_code == 201  # the cap is per user
    full = create(alice)
    assert full.status_code == 429
    assert "Project alpha already has 3 queued jobs" in full.json()["error"]["message"]
    assert Job.objects.filter(project=jobs_world.alpha).count() == 3  # nothing half-written
