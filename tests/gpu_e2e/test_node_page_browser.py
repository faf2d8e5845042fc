"""The node page in headless Chromium with Chart.js blocked: the numbers still update live."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
from django.conf import settings
from playwright.sync_api import Route, expect, sync_playwright

from gpu.tests.factories import batch, make_gpus, make_node, node_token, sample
from gpu.tests.ws import session_cookie
from tests.fixtures.personas import World
from tests.gpu_e2e.live import daphne_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_node_page_shows_live_numbers_without_chart_js(world: World) -> None:
    node = make_node("gpu-node-solo")
    gpus = make_gpus(node, 2)
    secret = node_token(node)
    cookie = session_cookie(world.admin).split("=", 1)[1]
    with daphne_server() as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        context = browser.new_context()
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": base}])
        page = context.new_page()
        blocked: list[str] = []

        def block(route: Route) -> None:
            blocked.append(route.request.url)
            route.abort()

        page.route("**/vendor/chartjs/**", block)
        page.goto(f"{base}/cluster/nodes/{node.name}/")
        expect(page.locator("[data-gpu-status]")).to_have_text("Live", timeout=15000)
        body = batch(node.name, [sample(gpus[0].uuid, datetime.now(UTC), util=73)])
        response = httpx.post(
            f"{base}/api/v1/ingest/samples", json=body, headers={"Authorization": f"Bearer {secret}"}
        )
        assert response.status_code == 200, response.text
        util = page.locator(f".gpu-card[data-uuid='{gpus[0].uuid}'] [data-field='util']")
        expect(util).to_contain_text("73", timeout=10000)
        browser.close()
    assert blocked  # Chart.js really was missing
