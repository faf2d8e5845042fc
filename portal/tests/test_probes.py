"""The chart's probes: /healthz answers whenever the process does, /readyz only while the real
Postgres and Redis answer. Both work with production's host check and HTTPS redirect on, since
the kubelet probes over plain HTTP with the pod's IP as the host."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client, override_settings

from portal.tests.test_database_outage import _dead_port, database_down

pytestmark = pytest.mark.django_db(transaction=True)
PRODUCTION_LIKE = {"ALLOWED_HOSTS": ["portal.example.org"], "SECURE_SSL_REDIRECT": True, "DEBUG": False}


def _probe(path: str) -> tuple[int, dict[str, object]]:
    response = Client(HTTP_HOST="10.0.0.7:8000").get(path)
    return response.status_code, response.json()


@override_settings(**PRODUCTION_LIKE)
def test_healthz_answers_the_kubelet_under_production_settings() -> None:
    assert _probe("/healthz") == (200, {"ok": True})
    # The same client on any other path meets the host check: the probe bypass is only for probes.
    assert Client(HTTP_HOST="10.0.0.7:8000").get("/jobs/").status_code == 400


@override_settings(**PRODUCTION_LIKE)
def test_readyz_is_ready_with_the_real_database_and_redis() -> None:
    assert settings.REDIS_URL, "the test run sets REDIS_URL to the real Redis"
    assert _probe("/readyz") == (200, {"ok": True, "checks": {"database": True, "redis": True}})


def test_readyz_is_503_while_redis_is_unreachable() -> None:
    with override_settings(REDIS_URL=f"redis://127.0.0.1:{_dead_port()}/0"):
        assert _probe("/readyz") == (503, {"ok": False, "checks": {"database": True, "redis": False}})


def test_readyz_is_503_while_the_database_is_unreachable_and_healthz_still_answers() -> None:
    with database_down():
        assert _probe("/readyz") == (503, {"ok": False, "checks": {"database": False, "redis": True}})
        assert _probe("/healthz") == (200, {"ok": True})
    assert _probe("/readyz")[0] == 200  # and ready again once it is back
