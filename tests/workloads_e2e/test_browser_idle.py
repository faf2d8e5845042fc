"""In a real browser: the idle warning banner on a job page (its GPUs' samples went through the agents'
ingest path and the idle sweep warned it), and its snooze button. The screenshot is the user guide's
(docs/img/idle-warning.png). No cluster: daphne serves the portal from a subprocess on the test database.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from gpu.ingest import ingest_batch
from gpu.tests.factories import batch, make_gpus, make_node, series
from tests.fixtures.browser import docs_shot, signed_in_page
from tests.fixtures.personas import World
from tests.gpu_e2e.live import daphne_server
from workloads.choices import JobState
from workloads.models import Job, JobEvent, QueueSettings
from workloads.services.idle import idle_sweep
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _idle_job(world: World) -> Job:
    """A 1-GPU job running 45 min whose GPU sat at 1 % with its memory flat for the last 31 min."""
    job = Job.objects.create(
        project=world.alpha,
        owner=world.member,
        image=IMAGE,
        name="notebook-forgotten",
        gpus=1,
        command=["python", "train.py"],
        node="gpu-node-0",
        state=JobState.RUNNING,
        started_at=timezone.now() - timedelta(minutes=45),
    )
    node = make_node()
    (gpu,) = make_gpus(node, 1)
    pod = {"namespace": job.namespace, "pod": f"{job.k8s_name}-q8z2m"}
    start = datetime.now(UTC) - timedelta(minutes=31)
    ingest_batch(node=node, raw=batch(node.name, series(gpu.uuid, 31 * 60, start=start, util=1, **pod)[::10]))
    return job


def test_the_idle_warning_banner_and_its_snooze(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    from playwright.sync_api import expect, sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # ORM reads between browser steps
    allow_images(world.alpha)
    QueueSettings.load()  # the defaults: 5 %, 5 %, 30 min window, 10 min warning, 2 snoozes
    job = _idle_job(world)
    assert idle_sweep()["warn"] == 1
    with (
        daphne_server() as base,
        sync_playwright() as pw,
        signed_in_page(pw, base, world.member) as (page, errors),
    ):
        page.goto(f"{base}/jobs/{job.uid}/")
        expect(page.locator("#idle-warning-text")).to_contain_text("idle for 30 min")
        expect(page.locator("#idle-snooze")).to_have_text("Snooze (2 of 2 left)")
        docs_shot(page, "idle-warning.png")
        page.click("#idle-snooze")
        expect(page.locator("#idle-warning")).to_have_count(0)
    assert JobEvent.objects.filter(job=job, reason="idle warning snoozed").exists()
    assert Job.objects.get(pk=job.pk).idle_snoozes == 1
    assert not [e for e in errors if "Content Security Policy" in e], errors
