"""In a real browser: the right-sizing hint on the job page from the stored peaks of a simulated run
(its samples go through the agents' ingest path), the one-click rerun at the suggested size, and the
project's oversized jobs next to allocated and used GPU-hours.

The screenshots are the user guide's (docs/img/). No cluster: pages, the ingest service and database
writes; daphne serves the portal from a subprocess on the test database.
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
from workloads.models import Job
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _simulated_run(world: World) -> Job:
    """A 1-GPU job that ran 40 min; its agent reported 7 GiB and 20 % on its GPU the whole time."""
    end = timezone.now()
    job = Job.objects.create(
        project=world.alpha,
        owner=world.owner,
        image=IMAGE,
        name="resnet-small",
        gpus=1,
        command=["python", "train.py"],
        node="gpu-node-0",
        state=JobState.RUNNING,
        started_at=end - timedelta(minutes=40),
    )
    node = make_node()
    (gpu,) = make_gpus(node, 1)
    pod = {"namespace": job.namespace, "pod": f"{job.k8s_name}-q8z2m"}
    samples = series(gpu.uuid, 120, start=datetime.now(UTC) - timedelta(seconds=120), util=20, **pod)
    for s in samples:
        s["processes"][0]["mem_used_mib"] = 7 * 1024
    ingest_batch(node=node, raw=batch(node.name, samples))
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, finished_at=end, exit_code=0)
    return Job.objects.get(pk=job.pk)


def test_the_hint_from_stored_peaks_and_the_one_click_rerun(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.sync_api import expect, sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # ORM reads between browser steps
    allow_images(world.alpha)
    job = _simulated_run(world)
    assert (job.peak_gpu_mem_mib, job.peak_sm_pct) == (7 * 1024, 20)  # stored by ingest, not the page
    with (
        daphne_server() as base,
        sync_playwright() as pw,
        signed_in_page(pw, base, world.owner) as (page, errors),
    ):
        page.goto(f"{base}/jobs/{job.uid}/")
        expect(page.locator("#rightsizing-text")).to_have_text(
            "This job asked 32 GiB on 1 GPU, peak 7 GiB and 20 %: a 2-slice share would do."
        )
        expect(page.locator("#gpu-peaks")).to_contain_text("7168 MiB of 32768 MiB GPU memory, 20 % SM")
        docs_shot(page, "rightsizing-hint.png")

        page.goto(f"{base}/jobs/projects/{world.alpha.slug}/usage/")
        expect(page.locator("#oversized-jobs")).to_contain_text("resnet-small")
        expect(page.locator("#usage-by-type")).to_contain_text("NVIDIA-GeForce-RTX-5090")
        page.wait_for_function("() => window.Chart && Chart.getChart('usage-type-chart')")
        page.wait_for_timeout(1500)  # Chart.js animates the bars in; the screenshot wants them drawn
        docs_shot(page, "usage-used-hours.png")

        page.goto(f"{base}/jobs/{job.uid}/")
        page.once("dialog", lambda d: d.accept())
        page.click("#rerun-rightsized")
        page.wait_for_url(lambda url: str(job.uid) not in url)
        rerun = Job.objects.get(rerun_of=job)
        assert (rerun.gpus, rerun.mps_slices) == (0, 2)
        expect(page.locator("dd").filter(has_text="MPS slices")).to_contain_text("2 MPS slices")
    assert not [e for e in errors if "Content Security Policy" in e], errors
