"""The API docs in headless Chromium: Swagger UI loads from the portal itself, under its CSP, and lists
the operations (from a CDN, with the inline script the CSP forbids, it would be a blank page)."""

from __future__ import annotations

import pytest
from django.conf import settings
from playwright.sync_api import expect, sync_playwright

from gpu.tests.ws import session_cookie
from tests.fixtures.personas import World
from tests.gpu_e2e.live import daphne_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_api_docs_list_the_operations_with_no_csp_violation(world: World) -> None:
    cookie = session_cookie(world.member).split("=", 1)[1]
    with daphne_server() as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        context = browser.new_context()
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": base}])
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        outside: list[str] = []
        page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(base) else None)
        page.goto(f"{base}/api/docs/")
        expect(page.locator(".opblock").first).to_be_visible(timeout=20000)
        operations = page.locator(".opblock-summary-path").all_inner_texts()
        browser.close()
    assert any("/api/v1/jobs/" in path for path in operations), operations[:10]
    assert not outside, outside
    assert not [e for e in errors if "Content Security Policy" in e], errors
