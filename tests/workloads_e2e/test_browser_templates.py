"""In a real browser: save a job as a template, submit from it with an override, rerun with changes.

The screenshots it takes are the user guide's (docs/img/). No cluster is needed: every step is a
page and a database write; daphne serves the portal from a subprocess on the test database.
"""

from __future__ import annotations

import pytest

from accounts.choices import Role
from accounts.models import Membership
from tests.fixtures.browser import docs_shot, signed_in_page
from tests.fixtures.personas import World
from tests.gpu_e2e.live import daphne_server
from workloads.models import Job, JobTemplate, ProjectVolume
from workloads.services import jobs as services
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SPEC = {
    "image": IMAGE,
    "command": ["python", "train.py"],
    "args": ["--lr", "0.1"],
    "env": [{"name": "EPOCHS", "value": "3"}],
    "gpus": 1,
    "cpu_millicores": 200,
    "memory_mib": 512,
    "volumes": [{"volume": "data", "mount_path": "/data", "read_only": False}],
}


def test_save_as_template_submit_from_it_and_rerun_with_changes(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.sync_api import expect, sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # ORM reads between browser steps
    allow_images(world.alpha)
    allow_images(world.beta)
    ProjectVolume.objects.create(project=world.alpha, name="refs", claim_name="refs", read_only=True)
    Membership.objects.create(project=world.beta, user=world.member, role=Role.MEMBER)
    first = services.job_submit(actor=world.member, project=world.alpha, data={**SPEC, "name": "baseline"})
    with (
        daphne_server() as base,
        sync_playwright() as pw,
        signed_in_page(pw, base, world.member) as (page, errors),
    ):
        # 1. Save the job as a template from its page.
        page.goto(f"{base}/jobs/{first.uid}/")
        page.click("#save-as-template summary")
        page.fill("#id_template-name", "nightly-train")
        page.fill("#id_template-description", "The baseline run: 1 GPU, the data volume at /data.")
        page.click("#save-template")
        page.wait_for_url("**/jobs/projects/alpha/templates/")
        expect(page.locator("#templates")).to_contain_text("nightly-train")
        expect(page.locator("#templates")).to_contain_text("python train.py --lr 0.1")
        docs_shot(page, "templates-list.png")
        template = JobTemplate.objects.get(name="nightly-train")

        # 2. The submit form shows the chosen project's images and volumes, and only its volumes.
        page.goto(f"{base}/jobs/submit/")
        page.select_option("#id_project", "beta")
        expect(page.locator('[data-catalog="alpha"]')).to_be_hidden()
        expect(page.locator('[data-catalog="beta"]')).to_contain_text("registry.example.com/team/train")
        assert page.locator('#id_volume_0 option[value="refs"]').is_disabled()

        # 3. Submit from the template with an override; a read-only volume gets Read-only ticked.
        page.select_option("#template-choice", str(template.pk))
        page.click("#use-template")
        expect(page.locator("#template-used")).to_contain_text("nightly-train")
        expect(page.locator("#id_command")).to_have_value("python train.py")
        expect(page.locator('[data-catalog="alpha"]')).to_contain_text("refs (read-only)")
        page.fill("#id_cpu_millicores", "300")
        page.select_option("#id_volume_1", "refs")
        expect(page.locator("#id_read_only_1")).to_be_checked()
        page.fill("#id_mount_path_1", "/refs")
        page.click("#add-volume")  # a third row, numbered on from the last
        expect(page.locator("label[for=id_volume_2]")).to_contain_text("Volume 3")
        expect(page.locator("#id_volume_2")).to_be_focused()
        assert page.locator("#id_read_only_2").is_checked() is False
        docs_shot(page, "submit-from-template.png")
        page.click("#submit-job")
        page.wait_for_url(f"{base}/jobs/*-*/")
        second = Job.objects.exclude(pk=first.pk).get()
        assert (second.cpu_millicores, second.command, second.args) == (300, SPEC["command"], SPEC["args"])
        assert second.volumes[1] == {"volume": "refs", "mount_path": "/refs", "read_only": True}

        # 4. Rerun it with changes from its page.
        page.click("#rerun-edit")
        page.wait_for_url("**/rerun/edit/")
        expect(page.locator("#id_args")).to_have_value("--lr 0.1")
        page.fill("#id_args", "--lr 0.05")
        docs_shot(page, "rerun-with-changes.png")
        page.click("#submit-job")
        page.wait_for_url(f"{base}/jobs/*-*/")
        expect(page.locator(".notice")).to_contain_text("a rerun of")
    third = Job.objects.exclude(pk__in=[first.pk, second.pk]).get()
    assert third.rerun_of == second
    assert third.args == ["--lr", "0.05"]
    assert third.cpu_millicores == 300
    assert not [e for e in errors if "Content Security Policy" in e], errors
