"""A researcher's home in headless Chromium against a live daphne: their jobs with readable reasons,
updated live when the queue moves one, the quota bars; the user guide's screenshot."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from accounts.models import Quota
from tests.fixtures.browser import docs_shot, signed_in_page
from tests.fixtures.personas import World
from tests.gpu_e2e.live import daphne_server
from workloads.choices import JobState
from workloads.models import Job, JobTemplate
from workloads.services.broadcast import job_changed
from workloads.tests.conftest import IMAGE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _announce(job_id: int) -> None:
    try:
        job_changed(job_id)
    finally:
        connection.close()


def test_the_home_shows_my_jobs_and_moves_them_live(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    # Playwright's sync API runs an event loop in this thread; the ORM calls between browser steps are
    # ordinary blocking calls, so Django's async-context guard is relaxed here only.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    Quota.objects.filter(project=world.alpha).update(gpus=8, cpu_millicores=32000, memory_mib=131072)
    now = timezone.now()

    def job(**fields: object) -> Job:
        return Job.objects.create(project=world.alpha, owner=world.member, image=IMAGE, **fields)

    job(
        name="resnet-50",
        gpus=4,
        state=JobState.RUNNING,
        node="gpu-node-1",
        started_at=now - timedelta(hours=2),
    )
    waiting = job(
        name="bert-large",
        gpus=8,
        queue_explanation={
            "code": "quota",
            "sentence": "project quota 4/8 GPUs in use",
            "position_global": 1,
        },
    )
    JobTemplate.objects.create(
        project=world.alpha, name="fine-tune", spec={"image": IMAGE}, created_by=world.member
    )
    with (
        daphne_server() as base,
        sync_playwright() as pw,
        signed_in_page(pw, base, world.member) as (page, errors),
    ):
        page.goto(f"{base}/dashboard/")
        expect(page.locator("#live-status")).to_have_text("live", timeout=15000)
        row = page.locator(f"tr[data-job='{waiting.uid}'] [data-field='reason']")
        expect(row).to_have_text("waiting: project quota 4/8 GPUs in use")
        expect(page.locator("[data-quota='GPUs']")).to_have_text("4 of 8 in use")
        docs_shot(page, "home.png")
        Job.objects.filter(pk=waiting.pk).update(
            queue_explanation={
                "code": "no_node",
                "sentence": "no node has 8 free GPUs; the largest free block is 4",
            }
        )
        # From another thread: this one runs Playwright's event loop, where async_to_sync cannot.
        announce = threading.Thread(target=_announce, args=(waiting.pk,))
        announce.start()
        announce.join()
        expect(row).to_have_text(
            "waiting: no node has 8 free GPUs; the largest free block is 4", timeout=10000
        )
    assert not [e for e in errors if "Content Security Policy" in e], errors
