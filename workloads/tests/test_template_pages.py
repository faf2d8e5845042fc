"""The pages of job templates, rerun with changes, volumes and args on the submit form."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.personas import World, session_client
from workloads.models import Job, JobTemplate, ProjectVolume
from workloads.services import jobs as services
from workloads.services.templates import template_create
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
SPEC: dict[str, Any] = {
    "image": IMAGE,
    "command": ["python", "train.py"],
    "args": ["--lr", "0.1"],
    "env": [{"name": "EPOCHS", "value": "3"}],
    "gpus": 1,
    "cpu_millicores": 200,
    "memory_mib": 128,
    "volumes": [{"volume": "data", "mount_path": "/data", "read_only": True}],
}


def _template(world: World, name: str = "train") -> JobTemplate:
    return template_create(
        actor=world.member, project=world.alpha, name=name, spec=SPEC, description="nightly"
    )


def _job(world: World) -> Job:
    return services.job_submit(actor=world.member, project=world.alpha, data=SPEC)


def test_save_as_template_from_a_job_page(jobs_world: World) -> None:
    job = _job(jobs_world)
    client = session_client(jobs_world.member)
    page = client.get(f"/jobs/{job.uid}/").content.decode()
    assert 'id="save-template"' in page
    assert 'name="template-name"' in page
    response = client.post(
        f"/jobs/{job.uid}/save-template/", {"template-name": "from-job", "template-description": "as run"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/jobs/projects/alpha/templates/"
    template = JobTemplate.objects.get()
    assert (template.name, template.description) == ("from-job", "as run")
    assert template.spec == services.job_spec_request(job)
    listing = client.get(response["Location"]).content.decode()
    assert "from-job" in listing
    assert "as run" in listing
    assert IMAGE in listing
    assert "python train.py --lr 0.1" in listing
    assert "data at /data (ro)" in listing


def test_a_duplicate_name_from_the_job_page_is_explained_in_place(jobs_world: World) -> None:
    _template(jobs_world)
    job = _job(jobs_world)
    response = session_client(jobs_world.member).post(
        f"/jobs/{job.uid}/save-template/", {"template-name": "train"}
    )
    assert response.status_code == 400
    assert 'data-error-for="name"' in response.content.decode()
    assert JobTemplate.objects.count() == 1


def test_save_as_template_from_the_submit_form_submits_nothing(jobs_world: World) -> None:
    client = session_client(jobs_world.member)
    data = {**FORM, "command": "python eval.py", "action": "save-template", "template-name": "eval"}
    response = client.post("/jobs/submit/", {**data, "template-description": "quick eval"})
    assert response.status_code == 302
    template = JobTemplate.objects.get()
    assert (template.name, template.description, template.project) == ("eval", "quick eval", jobs_world.alpha)
    assert template.spec["command"] == ["python", "eval.py"]
    assert template.spec["cpu_millicores"] == 100
    assert Job.objects.count() == 0


def test_saving_from_the_form_without_a_name_rerenders_with_the_error(jobs_world: World) -> None:
    client = session_client(jobs_world.member)
    response = client.post("/jobs/submit/", {**FORM, "action": "save-template"})
    assert response.status_code == 400
    assert 'data-error-for="name"' in response.content.decode()
    assert JobTemplate.objects.count() == 0
    assert Job.objects.count() == 0


def test_the_templates_page_lists_and_a_viewer_reads_only(jobs_world: World) -> None:
    template = _template(jobs_world)
    page = session_client(jobs_world.member).get("/jobs/projects/alpha/templates/").content.decode()
    assert f"/jobs/templates/{template.pk}/edit/" in page
    assert "data-confirm=" in page
    assert "nightly" in page
    assert "1 GPU, 200m CPU, 128 MiB" in page
    viewer = session_client(jobs_world.viewer).get("/jobs/projects/alpha/templates/").content.decode()
    assert "train" in viewer
    assert "/edit/" not in viewer
    assert "/delete/" not in viewer
    assert "templates/" in session_client(jobs_world.member).get("/me/projects/alpha/").content.decode()


def test_edit_a_template_name_description_and_spec(jobs_world: World) -> None:
    template = _template(jobs_world)
    client = session_client(jobs_world.member)
    page = client.get(f"/jobs/templates/{template.pk}/edit/").content.decode()
    assert 'value="train"' in page
    assert 'value="python train.py"' in page
    assert 'value="/data"' in page
    data = {**FORM, "template-name": "train-big", "template-description": "more CPU", "cpu_millicores": 500}
    response = client.post(f"/jobs/templates/{template.pk}/edit/", {**data, "args": "--epochs 9"})
    assert response.status_code == 302
    template.refresh_from_db()
    assert (template.name, template.description) == ("train-big", "more CPU")
    assert template.spec["cpu_millicores"] == 500
    assert template.spec["args"] == ["--epochs", "9"]
    assert template.spec["volumes"] == []  # the form's rows replace the spec whole


def test_a_bad_spec_in_the_edit_form_changes_nothing(jobs_world: World) -> None:
    template = _template(jobs_world)
    data = {**FORM, "template-name": "x", "image": "docker.io/evil/x:1"}
    response = session_client(jobs_world.member).post(f"/jobs/templates/{template.pk}/edit/", data)
    assert response.status_code == 400
    assert 'data-error-for="image"' in response.content.decode()
    template.refresh_from_db()
    assert template.name == "train"
    assert template.spec["image"] == IMAGE


def test_delete_a_template(jobs_world: World) -> None:
    template = _template(jobs_world)
    client = session_client(jobs_world.member)
    assert client.get(f"/jobs/templates/{template.pk}/delete/").status_code == 405
    response = client.post(f"/jobs/templates/{template.pk}/delete/")
    assert response.status_code == 302
    assert not JobTemplate.objects.exists()


def test_submit_from_a_template_with_an_override(jobs_world: World) -> None:
    template = _template(jobs_world)
    client = session_client(jobs_world.member)
    submit = client.get("/jobs/submit/").content.decode()
    assert f'<option value="{template.pk}"' in submit  # the template choice
    url = f"/jobs/submit/?template={template.pk}"
    page = client.get(url).content.decode()
    assert 'id="template-used"' in page
    assert 'value="python train.py"' in page
    assert 'value="200"' in page
    form = {**FORM, "command": "python train.py", "args": "--lr 0.1", "env": "EPOCHS=3"}
    rows = {"volume_0": "data", "mount_path_0": "/data", "read_only_0": "on"}
    response = client.post(url, {**form, **rows, "cpu_millicores": 300})
    job = Job.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/jobs/{job.uid}/"
    assert job.cpu_millicores == 300  # the override
    assert (job.command, job.args, job.env) == (SPEC["command"], SPEC["args"], SPEC["env"])
    assert job.volumes == SPEC["volumes"]


def test_a_submit_from_a_template_stays_in_its_project(jobs_world: World) -> None:
    template = _template(jobs_world)
    response = session_client(jobs_world.owner).post(
        f"/jobs/submit/?template={template.pk}", {**FORM, "project": "beta"}
    )
    assert response.status_code == 400
    assert Job.objects.count() == 0


def test_rerun_with_changes_keeps_rerun_of(jobs_world: World) -> None:
    job = _job(jobs_world)
    client = session_client(jobs_world.member)
    assert f"/jobs/{job.uid}/rerun/edit/" in client.get(f"/jobs/{job.uid}/").content.decode()
    page = client.get(f"/jobs/{job.uid}/rerun/edit/").content.decode()
    assert 'value="--lr 0.1"' in page
    assert "EPOCHS=3" in page
    assert 'value="/data"' in page
    form = {**FORM, "command": "python train.py", "args": "--lr 0.5", "gpus": 0}
    response = client.post(f"/jobs/{job.uid}/rerun/edit/", form)
    new = Job.objects.exclude(pk=job.pk).get()
    assert response.status_code == 302
    assert response["Location"] == f"/jobs/{new.uid}/"
    assert new.rerun_of == job
    assert new.args == ["--lr", "0.5"]
    assert new.gpus == 0
    assert new.command == job.command


def test_rerun_with_changes_is_refused_to_a_viewer(jobs_world: World) -> None:
    job = _job(jobs_world)
    client = session_client(jobs_world.viewer)
    assert "/rerun/edit/" not in client.get(f"/jobs/{job.uid}/").content.decode()
    assert client.get(f"/jobs/{job.uid}/rerun/edit/").status_code == 403
    assert client.post(f"/jobs/{job.uid}/rerun/edit/", FORM).status_code == 403
    assert Job.objects.count() == 1


def test_args_and_a_volume_mount_from_the_form(jobs_world: World) -> None:
    client = session_client(jobs_world.member)
    rows = {"volume_0": "data", "mount_path_0": "/data/in"}
    response = client.post("/jobs/submit/", {**FORM, **rows, "args": '--name "two words"'})
    assert response.status_code == 302
    job = Job.objects.get()
    assert job.args == ["--name", "two words"]
    assert job.volumes == [{"volume": "data", "mount_path": "/data/in", "read_only": False}]
    assert "<code>data</code> at <code>/data/in</code>" in client.get(f"/jobs/{job.uid}/").content.decode()


def test_a_read_only_volume_is_refused_read_write(jobs_world: World) -> None:
    ProjectVolume.objects.create(project=jobs_world.alpha, name="refs", claim_name="refs", read_only=True)
    client = session_client(jobs_world.member)
    rows = {"volume_0": "refs", "mount_path_0": "/refs"}
    response = client.post("/jobs/submit/", {**FORM, **rows})
    assert response.status_code == 400
    assert 'data-error-for="read_only_0"' in response.content.decode()
    assert Job.objects.count() == 0
    assert client.post("/jobs/submit/", {**FORM, **rows, "read_only_0": "on"}).status_code == 302
    assert Job.objects.get().volumes == [{"volume": "refs", "mount_path": "/refs", "read_only": True}]


def test_another_projects_volume_or_a_path_without_volume_is_refused(jobs_world: World) -> None:
    ProjectVolume.objects.create(project=jobs_world.beta, name="beta-only", claim_name="b")
    client = session_client(jobs_world.owner)  # manages alpha; beta's volume is not offered to it
    response = client.post(
        "/jobs/submit/", {**FORM, "volume_0": "beta-only", "mount_path_0": "/b", "mount_path_1": "/x"}
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert 'data-error-for="volume_0"' in body
    assert 'data-error-for="volume_1"' in body
    assert Job.objects.count() == 0


def test_the_form_shows_each_projects_images_and_volumes(jobs_world: World) -> None:
    ProjectVolume.objects.create(project=jobs_world.alpha, name="refs", claim_name="refs", read_only=True)
    page = session_client(jobs_world.member).get("/jobs/submit/").content.decode()
    assert 'data-catalog="alpha"' in page
    assert "<code>registry.example.com/team/train</code>" in page
    assert "<code>refs</code> (read-only)" in page
    assert 'data-read-only="refs "' in page
    assert "workloads/submit.js" in page
    assert "<script>" not in page


def test_a_refused_image_names_the_allowed_ones(jobs_world: World) -> None:
    response = session_client(jobs_world.member).post(
        "/jobs/submit/", {**FORM, "image": "docker.io/evil/x:1"}
    )
    assert response.status_code == 400
    assert "Allowed: registry.example.com/team/train (any tag or digest)" in response.content.decode()


def test_a_viewer_cannot_save_or_edit_templates(jobs_world: World) -> None:
    template, job = _template(jobs_world), _job(jobs_world)
    client = session_client(jobs_world.viewer)
    assert 'id="save-template"' not in client.get(f"/jobs/{job.uid}/").content.decode()
    assert client.post(f"/jobs/{job.uid}/save-template/", {"template-name": "v"}).status_code == 403
    assert client.get(f"/jobs/templates/{template.pk}/edit/").status_code == 403
    assert (
        client.post(f"/jobs/templates/{template.pk}/edit/", {**FORM, "template-name": "v"}).status_code == 403
    )
    assert client.post(f"/jobs/templates/{template.pk}/delete/").status_code == 403
    assert client.get(f"/jobs/submit/?template={template.pk}").status_code == 403
    assert list(JobTemplate.objects.values_list("name", flat=True)) == ["train"]


def test_another_projects_template_is_404(jobs_world: World) -> None:
    template, job = _template(jobs_world), _job(jobs_world)
    client = session_client(jobs_world.outsider)
    assert client.get("/jobs/projects/alpha/templates/").status_code == 404
    assert client.get(f"/jobs/templates/{template.pk}/edit/").status_code == 404
    assert client.post(f"/jobs/templates/{template.pk}/delete/").status_code == 404
    assert client.get(f"/jobs/submit/?template={template.pk}").status_code == 404
    assert client.post(f"/jobs/{job.uid}/save-template/", {"template-name": "x"}).status_code == 404
    assert client.get(f"/jobs/{job.uid}/rerun/edit/").status_code == 404
    assert (
        str(template.pk)
        not in client.get("/jobs/submit/").content.decode().split("template-choice")[-1][:200]
    )
    assert JobTemplate.objects.count() == 1


def test_a_posted_third_volume_row_is_read(jobs_world: World) -> None:
    """Add a volume (submit.js) posts rows past the two the form starts with."""
    ProjectVolume.objects.create(project=jobs_world.alpha, name="refs", claim_name="refs", read_only=True)
    rows = {"volume_0": "", "mount_path_0": "", "volume_1": "", "volume_2": "refs", "mount_path_2": "/r"}
    response = session_client(jobs_world.member).post("/jobs/submit/", {**FORM, **rows})
    assert response.status_code == 400
    assert 'data-error-for="read_only_2"' in response.content.decode()
    assert 'id="id_volume_3"' not in response.content.decode()


def test_a_prefilled_form_has_a_free_row_after_its_volumes(jobs_world: World) -> None:
    ProjectVolume.objects.create(project=jobs_world.alpha, name="refs", claim_name="refs", read_only=True)
    mounts = [{"volume": "data", "mount_path": "/data"}, {"volume": "refs", "mount_path": "/refs"}]
    job = services.job_submit(
        actor=jobs_world.member, project=jobs_world.alpha, data={**SPEC, "volumes": mounts}
    )
    page = session_client(jobs_world.member).get(f"/jobs/{job.uid}/rerun/edit/").content.decode()
    assert 'value="/refs"' in page
    assert 'id="id_volume_2"' in page
    assert 'id="id_volume_3"' not in page


def test_the_allow_list_in_words() -> None:
    from workloads.images import allowed_text

    assert allowed_text(frozenset()) == "This project allows no images yet; ask an operator to add one."
    many = frozenset((f"r{i:02d}.example.com", "team/x") for i in range(12))
    assert allowed_text(many).startswith("Allowed: r00.example.com/team/x, r01.example.com/team/x")
    assert allowed_text(many).endswith("r09.example.com/team/x and 2 more (any tag or digest).")
