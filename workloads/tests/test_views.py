from __future__ import annotations

import pytest

from tests.fixtures.personas import World, session_client
from workloads.models import Job
from workloads.tests.conftest import IMAGE

pytestmark = pytest.mark.django_db
FORM = {
    "project": "alpha",
    "image": IMAGE,
    "gpus": 1,
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


def test_viewer_has_no_project_to_submit_to(jobs_world: World) -> None:
    client = session_client(jobs_world.viewer)
    assert "viewers read only" in client.get("/jobs/submit/").content.decode()
    response = client.post("/jobs/submit/", FORM)
    assert response.status_code == 400
    assert Job.objects.count() == 0
