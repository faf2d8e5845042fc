"""The pages a user sees when something is missing: the portal's own, never Django's debug page."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from tests.fixtures.personas import make_user

pytestmark = pytest.mark.django_db


@override_settings(DEBUG=False)
def test_a_missing_page_explains_itself_and_shows_no_url_configuration() -> None:
    client = Client()
    client.force_login(make_user("lost@lab.example"))
    page = client.get("/no/such/page/")
    assert page.status_code == 404
    text = page.content.decode()
    assert "There is nothing here" in text
    assert "URLconf" not in text
    assert 'href="/jobs/"' in text
