"""In a real browser: submit through the form, watch the state change live (websocket), read the log.

daphne serves the portal (HTTP + websockets) from a subprocess on the test database; the test
process plays controller and worker (admission + reconcile against the real cluster), and its
on-commit broadcasts reach the page through a private Redis channel layer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from django.conf import settings
from django.test import Client

from tests.fixtures.personas import World
from tests.workloads_e2e.live_portal import drive_until
from workloads.choices import JobState
from workloads.models import Job
from workloads.tasks import reconcile_job
from workloads.tests.conftest import IMAGE, allow_images

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


@contextlib.contextmanager
def member_page(world: World, portal_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Page]:
    """A Chromium page signed in as alpha's member, alpha's images allowed."""
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls the tests make are
    # ordinary blocking calls between browser steps, so Django's async-context guard is relaxed here only.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    allow_images(world.alpha)
    client = Client()
    client.force_login(world.member)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        context = browser.new_context()
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": portal_server}])
        try:
            yield context.new_page()
        finally:
            browser.close()


def test_submit_watch_live_and_read_logs(
    world: World, kube: object, portal_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.sync_api import expect

    with member_page(world, portal_server, monkeypatch) as page:
        page.goto(f"{portal_server}/jobs/submit/")
        page.fill("#id_image", "docker.io/library/ubuntu:24.04")
        page.fill("#id_cpu_millicores", "100")
        page.fill("#id_memory_mib", "64")
        page.click("#submit-job")
        expect(page.locator('[data-error-for="image"]')).to_contain_text("allow-list")
        page.fill("#id_image", IMAGE)
        page.fill("#id_sim_run_seconds", "3")
        page.click("#submit-job")
        page.wait_for_url("**/jobs/*-*/")
        job = Job.objects.get()
        state = page.locator('[data-job] [data-field="state"]')
        expect(state).to_have_text("Queued")
        expect(page.locator("#live-status")).to_have_text("live", timeout=15000)
        page.evaluate("window.__noReload = 1")
        drive_until(job, JobState.RUNNING)
        expect(state).to_have_text("Running", timeout=15000)
        drive_until(job, JobState.SUCCEEDED)
        expect(state).to_have_text("Succeeded", timeout=15000)
        assert page.evaluate("window.__noReload") == 1, "the page reloaded instead of updating live"
        page.reload()
        expect(page.locator("#job-log")).to_contain_text("step 3/3 done", timeout=15000)


def test_a_followed_log_streams_through_asgi_while_the_job_runs(
    world: World, kube: object, portal_server: str
) -> None:
    """daphne must send log lines as they come: a buffered follow would never answer."""
    import urllib.request

    from workloads.services import jobs as services

    allow_images(world.alpha)
    job = services.job_submit(
        actor=world.member,
        project=world.alpha,
        data={"image": IMAGE, "cpu_millicores": 100, "memory_mib": 64, "simulate": {"run_seconds": 300}},
    )
    drive_until(job, JobState.RUNNING)
    client = Client()
    client.force_login(world.member)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    request = urllib.request.Request(  # noqa: S310 - loopback test server
        f"{portal_server}/api/v1/jobs/{job.uid}/logs/?follow=1",
        headers={"Cookie": f"{settings.SESSION_COOKIE_NAME}={cookie}"},
    )
    with urllib.request.urlopen(request, timeout=20) as response:  # noqa: S310
        first = [response.readline().decode() for _ in range(2)]
    # The first lines of the simulated container's log (deploy/localcluster/sample.log), in order.
    assert first == [
        "gpuportal simulated container started\n",
        "found 4 x NVIDIA GeForce RTX 5090 (32768 MiB)\n",
    ]
    services.job_cancel(actor=world.owner, job=job)
    reconcile_job(job.pk)


def test_a_job_of_several_workers_through_the_form(
    world: World, kube: object, portal_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.sync_api import expect

    with member_page(world, portal_server, monkeypatch) as page:
        page.goto(f"{portal_server}/jobs/submit/")
        page.fill("#id_image", IMAGE)
        page.fill("#id_workers", "3")
        page.fill("#id_gpus", "4")
        page.fill("#id_cpu_millicores", "100")
        page.fill("#id_memory_mib", "64")
        page.fill("#id_sim_run_seconds", "30")
        page.click("#submit-job")
        # alpha's quota is 8 GPUs: 3 workers of 4 could never start, and the form says so in place.
        expect(page.locator('[data-error-for="workers"]')).to_contain_text(
            "more than this project's quota of 8"
        )
        page.fill("#id_workers", "2")
        page.click("#submit-job")
        page.wait_for_url("**/jobs/*-*/")
        job = Job.objects.get()
        assert (job.workers, job.gpus) == (2, 4)
        drive_until(job, JobState.RUNNING)
        page.reload()
        job.refresh_from_db()
        workers = page.locator("#workers")
        expect(workers).to_contain_text("2, all started together")
        for index, node in enumerate(job.planned_nodes):
            expect(workers).to_contain_text(f"{index} on {node}")
        expect(page.locator("dl")).to_contain_text("each worker: 4 GPUs")
