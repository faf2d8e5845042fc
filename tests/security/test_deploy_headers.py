"""`check --deploy` is clean under production settings, and every URL pattern (parameters filled
from real objects) carries the security headers and secure cookie flags when served by a process on
the production settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.fixtures.personas import World
from tests.security.populated import populate
from tests.security.routes import every_url, missing_cases

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


def production_env(tmp_path: Path) -> dict[str, str]:
    """The production settings, pointed at the test database (the rows a transactional test made)."""
    db = connection.settings_dict
    host = f"{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}"
    url = f"postgres://{db['USER']}:{db['PASSWORD']}@{host}/{db['NAME']}"
    return {**os.environ, **PRODUCTION_ENV, "DATABASE_URL": url, "GPUPORTAL_VAR_DIR": str(tmp_path)}


def test_every_url_pattern_has_a_case() -> None:
    assert not missing_cases(), f"URL patterns without a case in tests/security/routes.py: {missing_cases()}"


@pytest.mark.django_db(transaction=True)
def test_every_url_has_security_headers_in_production(world: World, tmp_path: Path) -> None:
    """Every URL pattern, parameters filled with real objects, as a visitor, a project manager and an
    operator, served by a process on the production settings and middleware (no override_settings)."""
    urls = sorted(set(every_url(populate(world)).values()))
    assert {"/dashboard/", "/accounts/login/", "/api/v1/me/"} <= set(urls)
    users = {"anonymous": None, "manager": world.owner.pk, "operator": world.admin.pk}
    source, target = tmp_path / "walk.json", tmp_path / "seen.json"
    source.write_text(json.dumps({"urls": urls, "users": users}))
    result = subprocess.run(
        [sys.executable, "-m", "tests.security.production_walk", str(source), str(target)],
        cwd=ROOT,
        env=production_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(target.read_text())
    assert (seen["debug"], seen["hsts"]) == (False, 31536000)
    assert len(seen["results"]) == len(urls) * len(users)
    errors = [f"{r['who']} {r['url']}" for r in seen["results"] if r["status"] >= 500]
    assert not errors, f"server errors: {errors}"
    for response in seen["results"]:
        assert_hardened(response)


def assert_hardened(response: dict[str, Any]) -> None:
    where = f"{response['who']} GET {response['url']} -> {response['status']}"
    headers = response["headers"]
    assert response["status"] < 500, where
    assert headers["Strict-Transport-Security"].startswith("max-age=31536000"), where
    assert "includeSubDomains" in headers["Strict-Transport-Security"], where
    assert headers["X-Content-Type-Options"] == "nosniff", where
    assert headers["Referrer-Policy"] == "same-origin", where
    assert headers["X-Frame-Options"] == "DENY", where
    assert "default-src 'self'" in headers["Content-Security-Policy"], where
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"], where
    assert not headers["Location"].startswith("http://"), where
    for cookie in response["cookies"]:
        assert cookie["secure"], f"{where}: cookie {cookie['key']} not Secure"
        if cookie["key"] == "sessionid":
            assert cookie["httponly"], where
