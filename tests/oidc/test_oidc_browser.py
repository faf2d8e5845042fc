"""In a real browser: sign in with the lab's OpenID Connect provider (a real provider process).

daphne serves the portal from a subprocess configured only by the GPUPORTAL_OIDC_* environment, as
an operator would configure it; the screenshot is the user guide's.
"""

from __future__ import annotations

import pytest

from tests.fixtures.browser import docs_shot
from tests.fixtures.personas import make_user
from tests.gpu_e2e.live import daphne_server
from tests.oidc.conftest import CLIENT_ID, CLIENT_SECRET, Provider

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_sign_in_with_the_lab_provider(oidc_provider: Provider, monkeypatch: pytest.MonkeyPatch) -> None:
    from playwright.sync_api import expect, sync_playwright

    for name, value in {
        "GPUPORTAL_OIDC_SERVER_URL": oidc_provider.issuer,
        "GPUPORTAL_OIDC_CLIENT_ID": CLIENT_ID,
        "GPUPORTAL_OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "GPUPORTAL_OIDC_NAME": "Lab SSO",
    }.items():
        monkeypatch.setenv(name, value)
    make_user("alice@lab.example")
    oidc_provider.queue_user("idp-alice", "alice@lab.example")
    with daphne_server() as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(f"{base}/accounts/login/")
        sso = page.get_by_role("link", name="Lab SSO")
        expect(sso).to_be_visible()
        docs_shot(page, "sign-in-oidc.png")
        sso.click()
        page.get_by_role("button", name="Continue").click()
        page.wait_for_url(f"{base}/**")
        expect(page.get_by_text("alice@lab.example").first).to_be_visible()
        assert page.url == f"{base}/dashboard/"
        browser.close()
