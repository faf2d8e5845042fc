"""Auth abuse: brute force on all three login paths, MFA for staff, token storage and lifetime."""

from __future__ import annotations

import time

import pytest
from allauth.mfa.totp.internal.auth import format_hotp_value, hotp_value
from django.conf import settings
from django.core.cache import cache
from django.test import Client, override_settings
from rest_framework.test import APIClient

from accounts import services
from accounts.models import ApiToken, AuditLog
from tests.fixtures.personas import PASSWORD, World, session_client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> None:
    cache.clear()  # the rate-limit counters live in the (Redis) cache shared by the whole run


def _allauth_login(client: Client, email: str, password: str) -> int:
    response = client.post("/accounts/login/", {"login": email, "password": password})
    return response.status_code


def _is_logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_sixth_password_on_allauth_login_is_blocked_even_when_right(world: World) -> None:
    client = Client()
    for _ in range(5):
        _allauth_login(client, "bob@example.com", "wrong password")
        assert not _is_logged_in(client)
    response = client.post("/accounts/login/", {"login": "bob@example.com", "password": PASSWORD})
    assert not _is_logged_in(client)
    assert b"Too many failed login attempts" in response.content


def test_admin_login_goes_through_the_same_limit(world: World) -> None:
    client = Client()
    response = client.get("/admin/login/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    for _ in range(5):
        _allauth_login(client, "olga@example.com", "wrong password")
    client.post("/accounts/login/?next=/admin/", {"login": "olga@example.com", "password": PASSWORD})
    assert not _is_logged_in(client)
    # The admin's own form handler never checks a password: posting to it does not sign anyone in.
    client.post("/admin/login/", {"username": "olga", "password": PASSWORD})
    assert not _is_logged_in(client)


def test_token_creation_by_password_shares_the_limit(world: World) -> None:
    client = APIClient()
    body = {"email": "bob@example.com", "password": "nope", "name": "cli", "scopes": ["read"]}
    for _ in range(5):
        assert client.post("/api/v1/auth/token/", body, format="json").status_code == 401
    right = dict(body, password=PASSWORD)
    response = client.post("/api/v1/auth/token/", right, format="json")
    assert response.status_code == 429
    assert "error" in response.json()
    assert not ApiToken.objects.exists()


def test_token_creation_by_password_works_and_needs_otp_for_mfa_users(world: World) -> None:
    client = APIClient()
    ok = client.post(
        "/api/v1/auth/token/",
        {"email": "bob@example.com", "password": PASSWORD, "name": "cli", "scopes": ["read"]},
        format="json",
    )
    assert ok.status_code == 201
    assert ok.json()["secret"].startswith("gpt_")
    staff = client.post(
        "/api/v1/auth/token/",
        {"email": "olga@example.com", "password": PASSWORD, "name": "cli", "scopes": ["read"]},
        format="json",
    )
    assert staff.status_code == 401
    assert "otp" in staff.json()["error"]["message"]


OTP_SECRET = "JBSWY3DPEHPK3PXP"  # the personas' TOTP secret


def _codes_now() -> set[str]:
    counter = int(time.time()) // 30
    return {format_hotp_value(hotp_value(OTP_SECRET, counter + step)) for step in (-1, 0, 1, 2)}


def _wrong_code() -> str:
    return next(code for code in ("000000", "111111", "222222") if code not in _codes_now())


def _token_by_password(client: APIClient, otp: str) -> tuple[int, str]:
    body = {"email": "olga@example.com", "password": PASSWORD, "name": "cli", "scopes": ["read"], "otp": otp}
    response = client.post("/api/v1/auth/token/", body, format="json")
    return response.status_code, str(response.json().get("error", {}).get("message", ""))


def test_sixth_otp_code_on_the_cli_path_is_refused_even_when_right(world: World) -> None:
    client = APIClient()
    for _ in range(5):
        assert _token_by_password(client, _wrong_code())[0] == 401
    current = format_hotp_value(hotp_value(OTP_SECRET, int(time.time()) // 30))
    status, message = _token_by_password(client, current)
    assert status == 429
    assert "two-factor" in message
    assert not ApiToken.objects.exists()


def test_rotating_x_forwarded_for_does_not_escape_the_token_throttle(world: World) -> None:
    client = APIClient()
    statuses = []
    for n in range(11):
        body = {"email": f"nobody{n}@example.com", "password": "nope", "name": "cli", "scopes": ["read"]}
        response = client.post(
            "/api/v1/auth/token/", body, format="json", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}"
        )
        statuses.append(response.status_code)
    assert statuses == [401] * 10 + [429]


def test_behind_a_proxy_one_clients_failures_lock_out_only_that_client(world: World) -> None:
    """One proxy in front (the chart's Ingress): every request comes from its address; the client is
    the entry it appended to X-Forwarded-For, whatever the client wrote to the left of it."""
    behind_one_proxy = override_settings(
        TRUSTED_PROXIES=1,
        ALLAUTH_TRUSTED_PROXY_COUNT=1,
        REST_FRAMEWORK={**settings.REST_FRAMEWORK, "NUM_PROXIES": 1},
    )
    client = APIClient(REMOTE_ADDR="10.0.0.9")  # the ingress controller's pod

    def token(forwarded: str, n: int) -> int:
        body = {"email": f"nobody{n}@example.com", "password": "nope", "name": "cli", "scopes": ["read"]}
        response = client.post("/api/v1/auth/token/", body, format="json", HTTP_X_FORWARDED_FOR=forwarded)
        return response.status_code

    with behind_one_proxy:
        # The noisy client rotates what it writes itself; the proxy's entry is its real address.
        noisy = [token(f"198.51.100.{n}, 203.0.113.1", n) for n in range(11)]
        quiet = token("203.0.113.2", 99)
        right = {"email": world.member.email, "password": PASSWORD, "name": "cli", "scopes": ["read"]}
        made = client.post("/api/v1/auth/token/", right, format="json", HTTP_X_FORWARDED_FOR="203.0.113.3")
    assert noisy == [401] * 10 + [429]
    assert quiet == 401  # another client behind the same proxy is not held
    assert made.status_code == 201, made.content
    # The audit log names the same client the limits counted.
    assert AuditLog.objects.get(action="token.create").ip == "203.0.113.3"


def test_staff_without_mfa_cannot_open_the_admin(world: World) -> None:
    world.member.is_staff = True
    world.member.save(update_fields=["is_staff"])
    response = session_client(world.member).get("/admin/")
    assert response.status_code == 302
    assert "/accounts/2fa/" in response["Location"]
    assert session_client(world.admin).get("/admin/").status_code == 200


def test_a_dumped_hash_does_not_authenticate(world: World) -> None:
    """What a database dump holds (prefix, digest) never authenticates, and the secret is not in it.

    The header check only lets `gpt_...` values reach the lookup, so the lookup itself is asked with
    the dumped digest: it must hash what it is given, never compare it with the stored digest."""
    token, secret = services.token_create(user=world.member, name="a", scopes=["read"], expires_at=None)
    row = ApiToken.objects.filter(pk=token.pk).values().get()
    assert not any(secret.removeprefix(services.TOKEN_PREFIX)[-16:] in str(v) for v in row.values()), row
    assert services.token_authenticate(secret=token.digest, ip=None) is None
    assert services.token_authenticate(secret=secret, ip=None) == token
    client = APIClient()
    dumps = (token.digest, f"{services.TOKEN_PREFIX}{token.digest}", f"gpt_{token.prefix}_{token.digest}")
    for dumped in dumps:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {dumped}")
        assert client.get("/api/v1/me/").status_code in (401, 403), dumped


def test_expired_and_revoked_tokens_are_refused(world: World) -> None:
    token, secret = services.token_create(user=world.member, name="a", scopes=["read"], expires_at=None)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/api/v1/me/").status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(expires_at="2000-01-01T00:00:00Z")
    assert client.get("/api/v1/me/").status_code == 401
    ApiToken.objects.filter(pk=token.pk).update(expires_at=None)
    assert client.get("/api/v1/me/").status_code == 200
    services.token_revoke(actor=world.member, token=token)
    assert client.get("/api/v1/me/").status_code == 401


def test_last_use_is_recorded(world: World) -> None:
    token, secret = services.token_create(user=world.member, name="a", scopes=["read"], expires_at=None)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    client.get("/api/v1/me/")
    token.refresh_from_db()
    assert token.last_used_at is not None
    assert token.last_used_ip == "127.0.0.1"


def test_disabled_user_session_is_cut_off(world: World) -> None:
    client = session_client(world.member)
    assert client.get("/api/v1/me/").status_code == 200
    world.member.is_active = False
    world.member.save(update_fields=["is_active"])
    assert client.get("/api/v1/me/").status_code in (401, 403)
    assert client.get("/dashboard/").status_code == 302
