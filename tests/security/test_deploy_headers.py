"""T01 subset: `check --deploy` is clean under production settings, and every page carries the
security headers and secure cookie flags."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver

from tests.fixtures.personas import World, session_client

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION_ENV = {
    "GPUPORTAL_PRODUCTION": "1",
    "SECRET_KEY": "k" * 64 + "-not-a-real-secret-but-long-and-random-enough-for-the-check",
    "ALLOWED_HOSTS": "portal.example.org",
    "DJANGO_SETTINGS_MODULE": "portal.settings",
}


def test_check_deploy_is_clean_in_production(tmp_path: Path) -> None:
    env = {**os.environ, **PRODUCTION_ENV}
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_refuses_to_start_without_a_secret() -> None:
    env = {**os.environ, **PRODUCTION_ENV, "SECRET_KEY": ""}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_secret_key_file_is_read(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("f" * 60 + "-from-a-file-with-enough-entropy-for-django-check\n")
    env = {**os.environ, **PRODUCTION_ENV, "SECRET_KEY": "", "SECRET_KEY_FILE": str(key_file)}
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    result = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.stdout.strip().startswith("f" * 60), result.stderr


def page_urls() -> list[str]:
    """Every parameterless GET page the portal serves (API and admin included)."""
    found: list[str] = []

    def walk(patterns: list[URLPattern | URLResolver], prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif "<" not in route and "(?P" not in route and "^" not in route:
                found.append("/" + route.lstrip("^").rstrip("$"))

    walk(get_resolver().url_patterns, "")
    return sorted(set(found))


PRODUCTION_HEADERS = {
    "SECURE_HSTS_SECONDS": 31536000,
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
    "SESSION_COOKIE_SECURE": True,
    "CSRF_COOKIE_SECURE": True,
}


@pytest.mark.django_db
@override_settings(**PRODUCTION_HEADERS)
def test_every_page_has_security_headers(world: World) -> None:
    urls = page_urls()
    assert "/dashboard/" in urls
    assert "/accounts/login/" in urls
    assert "/api/v1/me/" in urls
    for client in (Client(), session_client(world.admin)):
        for url in urls:
            response = client.get(url, secure=True)
            where = f"{url} -> {response.status_code}"
            assert response.status_code < 500, where
            assert response["Strict-Transport-Security"].startswith("max-age=31536000"), where
            assert response["X-Content-Type-Options"] == "nosniff", where
            assert response["Referrer-Policy"] == "same-origin", where
            assert "default-src 'self'" in response["Content-Security-Policy"], where
            assert "frame-ancestors 'none'" in response["Content-Security-Policy"], where
            for cookie in response.cookies.values():
                assert cookie["secure"], f"{where}: cookie {cookie.key} not Secure"
                if cookie.key == "sessionid":
                    assert cookie["httponly"], where
