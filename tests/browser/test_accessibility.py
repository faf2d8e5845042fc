"""Every page a user and an operator reach passes axe-core (from npm, node_modules/axe-core) in headless
Chromium with no serious or critical violation; the submit form and the cluster map work by keyboard alone.

daphne serves the portal from a subprocess on the test database (tests/gpu_e2e/live.py); axe is injected
into each page as a script tag, so the browser context bypasses the CSP for that one inline script only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from allauth.mfa.totp.internal.auth import format_hotp_value, hotp_value
from allauth.mfa.totp.internal.auth import yield_hotp_counters_from_time as counters
from django.conf import settings
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect, sync_playwright

from accounts.models import User
from gpu.tests.factories import make_gpus, make_node
from gpu.tests.ws import session_cookie
from tests.fixtures.personas import PASSWORD, World
from tests.gpu_e2e.live import ROOT, daphne_server
from workloads.choices import JobState
from workloads.models import Job, JobTemplate
from workloads.services import jobs as job_services
from workloads.services import publisher
from workloads.services import templates as template_services
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")


@pytest.fixture
def site(world: World, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A project with an allowed image, a template, a queued job, a node with GPUs; daphne serving it."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # ORM reads between Playwright's steps
    monkeypatch.setattr(publisher, "send", lambda *args, **kwargs: True)  # no worker in this test
    allow_images(world.alpha)
    job = job_services.job_submit(
        actor=world.member,
        project=world.alpha,
        data={"image": IMAGE, "cpu_millicores": 100, "memory_mib": 64},
    )
    template_services.template_from_job(actor=world.member, job=job, name="train-small")
    failed = job_services.job_submit(actor=world.member, project=world.alpha, data={"image": IMAGE})
    now = timezone.now()
    Job.objects.filter(pk=failed.pk).update(  # a finished job's page: exit code, stored log, events
        state=JobState.FAILED, started_at=now, finished_at=now, exit_code=3, log_tail="step 1\nboom\n"
    )
    running = job_services.job_submit(
        actor=world.member, project=world.alpha, data={"image": IMAGE, "gpus": 1}
    )
    Job.objects.filter(pk=running.pk).update(  # a running job's page: live log panel, idle banner, hint
        state=JobState.RUNNING,
        started_at=now - timedelta(minutes=40),
        node="gpu-node-0",
        peak_gpu_mem_mib=7000,
        peak_sm_pct=20,
        gpu_mem_total_mib=32607,
        idle_warned_at=now,
    )
    node = make_node("gpu-node-0")
    make_gpus(node, 2)
    with daphne_server() as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        yield {
            "base": base,
            "browser": browser,
            "job": job,
            "failed": failed,
            "running": running,
            "node": node,
            "world": world,
        }
        browser.close()


def _page(site: dict[str, Any], user: User | None) -> Page:
    browser: Browser = site["browser"]
    context = browser.new_context(bypass_csp=True, viewport={"width": 1280, "height": 900})
    if user is not None:
        cookie = session_cookie(user).split("=", 1)[1]
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": site["base"]}])
    return context.new_page()


def _violations(page: Page, path: str, status: int, base: str) -> list[str]:
    response = page.goto(base + path, wait_until="load")
    assert response is not None
    assert (response.status, page.url) == (status, base + path), f"{path} is not the page meant"
    page.wait_for_timeout(300)  # the live scripts fill their first values
    return _axe(page, path)


def _axe(page: Page, where: str) -> list[str]:
    page.add_script_tag(path=str(AXE))
    found: list[dict[str, Any]] = page.evaluate("async () => (await window.axe.run(document)).violations")
    return [
        f"{where} [{v['impact']}] {v['id']}: {v['help']} -- "
        + "; ".join(node["html"][:160] for node in v["nodes"][:5])
        for v in found
        if v["impact"] in BLOCKING
    ]


def _visits(site: dict[str, Any]) -> list[tuple[User | None, list[tuple[str, int]]]]:
    """Who sees which page, with the status it answers: every page a user and an operator reach."""
    world: World = site["world"]
    job: Job = site["job"]
    template = JobTemplate.objects.get()
    node = site["node"]
    user_pages = [
        "/dashboard/",
        "/jobs/",
        "/jobs/submit/",
        f"/jobs/{job.uid}/",
        f"/jobs/{job.uid}/rerun/edit/",
        f"/jobs/{site['failed'].uid}/",
        f"/jobs/{site['running'].uid}/",
        "/jobs/projects/alpha/usage/",  # usage and the project's grants
        "/jobs/projects/alpha/templates/",
        f"/jobs/templates/{template.pk}/edit/",
        "/me/projects/alpha/",
        "/me/tokens/",
        "/me/settings/",
        "/cluster/",
        f"/cluster/nodes/{node.name}/",
        "/api/docs/",
        "/accounts/2fa/",
        "/accounts/password/change/",
        "/accounts/email/",
        "/accounts/reauthenticate/",
    ]
    admin_pages = [
        "/cluster/",
        f"/cluster/nodes/{node.name}/",
        "/admin/",
        "/admin/workloads/job/",
        f"/admin/workloads/job/{job.pk}/change/",
        "/admin/accounts/project/",
        f"/admin/accounts/project/{world.alpha.pk}/change/",
        f"/admin/accounts/quota/{world.alpha.quota.pk}/change/",
        f"/admin/accounts/user/{world.member.pk}/change/",
        f"/admin/accounts/user/{world.member.pk}/password/",
        "/admin/accounts/auditlog/",
        "/admin/gpu/node/",
        f"/admin/gpu/node/{node.pk}/change/",
        "/admin/mfa/authenticator/",
    ]
    anonymous = ["/accounts/login/", "/accounts/password/reset/", "/accounts/signup/"]
    return [
        (None, [(path, 200) for path in anonymous]),
        (
            world.member,
            [(path, 200) for path in user_pages] + [("/no/such/page/", 404), ("/me/projects/beta/", 404)],
        ),
        (world.owner, [("/me/projects/alpha/", 200), ("/jobs/projects/alpha/usage/", 200)]),  # manager forms
        (world.viewer, [(f"/jobs/{job.uid}/rerun/edit/", 403)]),  # a viewer may not submit: the 403 page
        (world.admin, [(path, 200) for path in admin_pages]),
    ]


def test_every_page_has_no_serious_or_critical_axe_violation(site: dict[str, Any]) -> None:
    problems: list[str] = []
    for user, pages in _visits(site):
        page = _page(site, user)
        for path, status in pages:
            problems += _violations(page, path, status, site["base"])
        page.context.close()
    assert not problems, "\n".join(problems)


def _sign_in(page: Page, base: str) -> list[str]:
    page.goto(f"{base}/accounts/login/")
    problems = _axe(page, "/accounts/login/")
    page.fill("input[name=login]", "bob@example.com")
    page.fill("input[name=password]", PASSWORD)
    page.locator("main form [type=submit]").last.click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    return problems


def test_the_mfa_set_up_pages_have_no_serious_or_critical_axe_violation(site: dict[str, Any]) -> None:
    """Signed in through the form (MFA set-up asks for a recent sign-in): reauthenticate if asked, the
    TOTP page with its QR code, then the recovery codes it makes."""
    base = site["base"]
    page = _page(site, None)
    problems = _sign_in(page, base)
    page.goto(f"{base}/accounts/2fa/totp/activate/")
    if "reauthenticate" in page.url:
        problems += _axe(page, "/accounts/reauthenticate/")
        page.fill("input[name=password]", PASSWORD)
        page.locator("main form [type=submit]").last.click()
        page.wait_for_url("**/accounts/2fa/totp/activate/")
    problems += _axe(page, "/accounts/2fa/totp/activate/")
    secret = page.locator("#authenticator_secret").input_value()
    page.fill("input[name=code]", format_hotp_value(hotp_value(secret, next(iter(counters())))))
    page.locator("main form [type=submit]").last.click()
    page.wait_for_url(lambda url: "/totp/activate/" not in url)
    page.goto(f"{base}/accounts/2fa/recovery-codes/")
    problems += _axe(page, "/accounts/2fa/recovery-codes/")
    page.goto(f"{base}/accounts/2fa/")
    problems += _axe(page, "/accounts/2fa/ (with TOTP)")
    page.context.close()
    assert not problems, "\n".join(problems)


def _tab_to(page: Page, selector: str, limit: int = 80) -> None:
    """Press Tab until the element matching `selector` has the focus (as a keyboard user would)."""
    target = page.locator(selector)
    for _ in range(limit):
        page.keyboard.press("Tab")
        if target.evaluate("el => el === document.activeElement"):
            return
    raise AssertionError(f"{selector} is not reachable with Tab")


def test_the_submit_form_works_by_keyboard_alone(site: dict[str, Any]) -> None:
    page = _page(site, site["world"].member)
    page.goto(f"{site['base']}/jobs/submit/")
    for selector, value in (("#id_image", IMAGE), ("#id_cpu_millicores", "100"), ("#id_memory_mib", "64")):
        _tab_to(page, selector)
        page.keyboard.press("ControlOrMeta+a")
        page.keyboard.type(value)
    _tab_to(page, "#submit-job")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    errors = page.locator("[data-error-for], .errorlist, [aria-invalid=true]").all_inner_texts()
    assert re.search(r"/jobs/[0-9a-f-]{36}/$", page.url), (page.url, errors)
    assert Job.objects.count() == 4  # the site's queued, failed and running jobs, and this one
    page.context.close()


def test_the_cluster_map_nodes_and_gpus_open_by_keyboard(site: dict[str, Any]) -> None:
    page = _page(site, site["world"].admin)
    page.goto(f"{site['base']}/cluster/")
    _tab_to(page, ".gpu-node[data-node='gpu-node-0'] header a")
    page.keyboard.press("Enter")
    page.wait_for_url("**/cluster/nodes/gpu-node-0/")
    page.go_back()
    _tab_to(page, ".gpu-tile >> nth=1")
    page.keyboard.press("Enter")
    page.wait_for_url("**/cluster/nodes/gpu-node-0/#gpu-1")
    expect(page.locator("#gpu-1")).to_be_visible()
    page.context.close()
