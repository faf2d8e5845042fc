"""Templates through the API: edit (PUT, PATCH), submit with overrides, save a job as a template;
and the job's events in pages like every list."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.personas import World, api_client
from workloads.models import Job, JobTemplate
from workloads.services import templates as services
from workloads.tests.conftest import IMAGE

pytestmark = pytest.mark.django_db


@pytest.fixture
def template(jobs_world: World) -> JobTemplate:
    return services.template_create(
        actor=jobs_world.member,
        project=jobs_world.alpha,
        name="train",
        spec={"image": IMAGE, "gpus": 1, "args": ["--epochs", "3"]},
        description="three epochs",
    )


def url(template: JobTemplate, tail: str = "") -> str:
    return f"/api/v1/templates/{template.pk}/{tail}"


def fields(response: Any) -> dict[str, Any]:
    errors: dict[str, Any] = response.json()["error"]["fields"]
    return errors


def test_patch_changes_only_what_it_sends(jobs_world: World, template: JobTemplate) -> None:
    client = api_client(jobs_world.member)
    response = client.patch(url(template), {"description": "four epochs"}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["name"], body["description"], body["spec"]["args"]) == (
        "train",
        "four epochs",
        ["--epochs", "3"],
    )
    response = client.patch(url(template), {"spec": {"image": IMAGE, "gpus": 2}}, format="json")
    assert (response.json()["spec"]["gpus"], response.json()["spec"]["args"]) == (2, [])  # replaced whole
    template.refresh_from_db()
    assert template.spec["gpus"] == 2


def test_a_bad_edit_is_refused_and_changes_nothing(jobs_world: World, template: JobTemplate) -> None:
    client = api_client(jobs_world.member)
    hostile = client.patch(url(template), {"spec": {"image": IMAGE, "hostPID": True}}, format="json")
    assert hostile.status_code == 400
    assert "hostPID" in fields(hostile)
    over = client.patch(url(template), {"spec": {"image": IMAGE, "gpus": 99}}, format="json")
    assert "gpus" in fields(over)
    unknown = client.patch(url(template), {"owner": "me"}, format="json")
    assert "owner" in fields(unknown)
    null = client.patch(url(template), {"spec": None}, format="json")
    assert "null" in fields(null)["spec"][0]
    put = client.put(url(template), {"name": "renamed"}, format="json")
    assert put.status_code == 400
    assert "spec" in fields(put)
    template.refresh_from_db()
    assert (template.name, template.spec["gpus"]) == ("train", 1)


def test_put_replaces_name_description_and_spec(jobs_world: World, template: JobTemplate) -> None:
    client = api_client(jobs_world.member)
    body = {"name": "eval", "spec": {"image": IMAGE, "mps_slices": 1}}
    response = client.put(url(template), body, format="json")
    assert response.status_code == 200, response.json()
    assert (response.json()["name"], response.json()["description"]) == ("eval", "")
    assert response.json()["spec"]["mps_slices"] == 1


def test_viewer_cannot_edit_submit_or_save(jobs_world: World, template: JobTemplate) -> None:
    viewer = api_client(jobs_world.viewer)
    assert viewer.get(url(template)).status_code == 200
    assert viewer.patch(url(template), {"description": "x"}, format="json").status_code == 403
    assert viewer.post(url(template, "submit/"), {}, format="json").status_code == 403
    job = services.template_submit(actor=jobs_world.member, template=template)
    assert viewer.post(f"/api/v1/jobs/{job.uid}/template/", {"name": "v"}, format="json").status_code == 403
    assert JobTemplate.objects.count() == 1


def test_submit_from_a_template_with_overrides(jobs_world: World, template: JobTemplate) -> None:
    client = api_client(jobs_world.member)
    response = client.post(url(template, "submit/"), {"gpus": 2, "name": "run-2"}, format="json")
    assert response.status_code == 201, response.json()
    job = Job.objects.get(uid=response.json()["id"])
    assert (job.project, job.owner, job.gpus, job.name, job.args) == (
        jobs_world.alpha,
        jobs_world.member,
        2,
        "run-2",
        ["--epochs", "3"],
    )
    plain = client.post(url(template, "submit/"), {}, format="json")
    assert plain.status_code == 201
    assert plain.json()["gpus"] == 1
    bad = client.post(url(template, "submit/"), {"gpus": 99, "hostNetwork": True}, format="json")
    assert bad.status_code == 400
    assert {"gpus", "hostNetwork"} <= set(fields(bad))
    assert Job.objects.count() == 2


def test_a_job_saved_as_a_template_submits_the_same_request(jobs_world: World) -> None:
    client = api_client(jobs_world.member)
    spec = {"project": "alpha", "image": IMAGE, "gpus": 1, "env": [{"name": "SEED", "value": "7"}]}
    job = client.post("/api/v1/jobs/", spec, format="json").json()
    saved = client.post(f"/api/v1/jobs/{job['id']}/template/", {"name": "seed-7"}, format="json")
    assert saved.status_code == 201, saved.json()
    assert (saved.json()["project"], saved.json()["spec"]["env"]) == (
        "alpha",
        [{"name": "SEED", "value": "7"}],
    )
    again = client.post(f"/api/v1/jobs/{job['id']}/template/", {"name": "seed-7"}, format="json")
    assert "name" in fields(again)
    found = client.get("/api/v1/templates/?name=seed-7").json()
    assert [t["id"] for t in found["results"]] == [saved.json()["id"]]
    assert client.get("/api/v1/templates/?name=nothing").json()["count"] == 0


def test_events_come_in_pages(jobs_world: World, template: JobTemplate) -> None:
    from workloads.models import JobEvent

    job = services.template_submit(actor=jobs_world.member, template=template)
    JobEvent.objects.bulk_create(JobEvent(job=job, kind="k8s", message=f"m{i}") for i in range(60))
    client = api_client(jobs_world.member)
    first = client.get(f"/api/v1/jobs/{job.uid}/events/?page_size=50").json()
    assert (first["count"], len(first["results"])) == (61, 50)
    assert first["results"][0]["to_state"] == "queued"  # oldest first
    rest = client.get(first["next"]).json()
    assert (len(rest["results"]), rest["next"]) == (11, None)
