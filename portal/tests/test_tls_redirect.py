"""Production redirects plain HTTP to HTTPS, except where the node agents post from inside the cluster."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from plugin.contract import INGEST_PATH

pytestmark = pytest.mark.django_db
PRODUCTION_LIKE = {"ALLOWED_HOSTS": ["portal.example.org", "gp-web.portal.svc"], "SECURE_SSL_REDIRECT": True}


@override_settings(**PRODUCTION_LIKE)
def test_the_agents_ingest_path_is_served_over_plain_http_inside_the_cluster() -> None:
    response = Client(HTTP_HOST="gp-web.portal.svc").post(INGEST_PATH, b"{}", content_type="application/json")
    # Refused for its missing token, by the view: not bounced to an https:// nobody serves.
    assert response.status_code == 401, (response.status_code, response.get("Location"))


@override_settings(**PRODUCTION_LIKE)
def test_every_other_path_is_redirected_to_https() -> None:
    for path in ("/jobs/", "/api/v1/jobs/", "/accounts/login/"):
        response = Client(HTTP_HOST="portal.example.org").get(path)
        assert response.status_code == 301, path
        assert response["Location"] == f"https://portal.example.org{path}"
