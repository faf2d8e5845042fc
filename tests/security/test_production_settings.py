"""What the settings (portal/settings/) make of the environment, read in a fresh interpreter each time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECRET = "k" * 64 + "-not-a-real-secret-but-long-and-random-enough-for-the-check"
# Variables that must not leak in from the developer's or CI's shell.
CLEARED = (
    "DEBUG",
    "GPUPORTAL_PRODUCTION",
    "GPUPORTAL_DEMO",
    "SECRET_KEY",
    "SECRET_KEY_FILE",
    "ALLOWED_HOSTS",
    "EMAIL_BACKEND",
)


def read_settings(names: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """Imports portal.settings under `env` and prints the named settings as JSON."""
    base = {k: v for k, v in os.environ.items() if k not in CLEARED}
    code = (
        "import json, portal.settings as s; "
        f"print(json.dumps({{n: getattr(s, n, None) for n in {names!r}}}, default=str))"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def values(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert result.returncode == 0, result.stderr
    parsed: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return parsed


def test_one_trusted_proxy_count_drives_the_api_throttle_and_the_login_limits() -> None:
    default = values(read_settings(["REST_FRAMEWORK", "ALLAUTH_TRUSTED_PROXY_COUNT"]))
    assert default["ALLAUTH_TRUSTED_PROXY_COUNT"] == 0
    assert isinstance(default["REST_FRAMEWORK"], dict)
    assert default["REST_FRAMEWORK"]["NUM_PROXIES"] == 0
    two = values(
        read_settings(["REST_FRAMEWORK", "ALLAUTH_TRUSTED_PROXY_COUNT"], GPUPORTAL_TRUSTED_PROXIES="2")
    )
    assert two["ALLAUTH_TRUSTED_PROXY_COUNT"] == 2
    assert isinstance(two["REST_FRAMEWORK"], dict)
    assert two["REST_FRAMEWORK"]["NUM_PROXIES"] == 2


HARDENED = [
    "DEBUG",
    "PRODUCTION",
    "ALLOWED_HOSTS",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_SSL_REDIRECT",
    "EMAIL_BACKEND",
]
DEBUG_OFF = {"DEBUG": "0", "REDIS_URL": "redis://127.0.0.1:6379/0"}


def test_debug_off_means_the_hardened_settings_without_the_production_flag() -> None:
    got = values(read_settings(HARDENED, **DEBUG_OFF, SECRET_KEY=SECRET, ALLOWED_HOSTS="portal.example.org"))
    assert got["DEBUG"] is False
    assert got["PRODUCTION"] is True
    assert got["ALLOWED_HOSTS"] == ["portal.example.org"]
    assert got["SESSION_COOKIE_SECURE"] is True
    assert got["CSRF_COOKIE_SECURE"] is True
    assert got["SECURE_HSTS_SECONDS"] == 31536000
    assert got["SECURE_SSL_REDIRECT"] is True
    assert got["EMAIL_BACKEND"] == "django.core.mail.backends.smtp.EmailBackend"


def test_debug_off_without_a_secret_key_refuses_to_start() -> None:
    result = read_settings(["SECRET_KEY"], **DEBUG_OFF, ALLOWED_HOSTS="portal.example.org")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "SECRET_KEY" in result.stderr


def test_debug_off_without_allowed_hosts_refuses_to_start() -> None:
    result = read_settings(["ALLOWED_HOSTS"], **DEBUG_OFF, SECRET_KEY=SECRET)
    assert result.returncode != 0
    assert "ALLOWED_HOSTS" in result.stderr


def test_debug_on_with_the_production_flag_refuses_to_start() -> None:
    env = {
        "GPUPORTAL_PRODUCTION": "1",
        "DEBUG": "1",
        "SECRET_KEY": SECRET,
        "ALLOWED_HOSTS": "portal.example.org",
    }
    result = read_settings(["DEBUG"], **env)
    assert result.returncode != 0
    assert "DEBUG" in result.stderr


def test_the_demo_runs_without_debug_pages_and_without_production_hardening() -> None:
    demo = values(read_settings(["DEBUG", "PRODUCTION", "ALLOWED_HOSTS"], GPUPORTAL_DEMO="1"))
    assert demo == {"DEBUG": False, "PRODUCTION": False, "ALLOWED_HOSTS": ["*"]}
    both = read_settings(["DEBUG"], GPUPORTAL_DEMO="1", GPUPORTAL_PRODUCTION="1")
    assert both.returncode != 0
    assert "pick one" in both.stderr


def test_manage_py_demo_turns_the_demo_settings_on() -> None:
    """`manage.py demo` (what `make demo` runs) sets GPUPORTAL_DEMO before the settings load."""
    code = "\n".join(
        [
            "import runpy, sys",
            "sys.argv = ['manage.py', 'demo', '--help']",
            "try:",
            "    runpy.run_path('manage.py', run_name='__main__')",
            "except SystemExit:",
            "    pass",
            "from django.conf import settings",
            "print('DEBUG', settings.DEBUG, 'PRODUCTION', settings.PRODUCTION)",
        ]
    )
    base = {k: v for k, v in os.environ.items() if k not in CLEARED}
    probe = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip().splitlines()[-1] == "DEBUG False PRODUCTION False"


def test_an_oidc_provider_needs_its_client_credentials() -> None:
    half = read_settings(
        ["SOCIALACCOUNT_PROVIDERS"], GPUPORTAL_OIDC_SERVER_URL="https://idp.example/realms/lab"
    )
    assert half.returncode != 0
    assert "GPUPORTAL_OIDC_CLIENT_ID" in half.stderr
    whole = values(
        read_settings(
            ["SOCIALACCOUNT_PROVIDERS"],
            GPUPORTAL_OIDC_SERVER_URL="https://idp.example/realms/lab",
            GPUPORTAL_OIDC_CLIENT_ID="portal",
            GPUPORTAL_OIDC_CLIENT_SECRET="s3cret",
        )
    )
    providers = whole["SOCIALACCOUNT_PROVIDERS"]
    assert isinstance(providers, dict)
    app = providers["openid_connect"]["APPS"][0]
    assert (app["client_id"], app["settings"]["server_url"]) == ("portal", "https://idp.example/realms/lab")
