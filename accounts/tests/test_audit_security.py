"""A user's own security changes are audited, through the real allauth pages: password change and reset,
MFA set-up, recovery codes regenerated, MFA removed; API tokens created and revoked from the tokens page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from allauth.mfa.models import Authenticator
from allauth.mfa.totp.internal.auth import SECRET_SESSION_KEY, format_hotp_value, hotp_value
from allauth.mfa.totp.internal.auth import yield_hotp_counters_from_time as counters
from django.core import mail
from django.core.cache import cache
from django.http.response import HttpResponseBase
from django.test import Client

from accounts.models import ApiToken, AuditLog
from tests.fixtures.personas import PASSWORD, World

pytestmark = pytest.mark.django_db
NEW_PASSWORD = "a brand new passphrase 42"


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> None:
    cache.clear()


def _signed_in(email: str = "bob@example.com") -> Client:
    """A real sign-in (not force_login): allauth's MFA pages ask for a recent authentication."""
    client = Client()
    client.post("/accounts/login/", {"login": email, "password": PASSWORD})
    assert "_auth_user_id" in client.session
    return client


def _totp_on(client: Client, on_commit: Any) -> str:
    page = client.get("/accounts/2fa/totp/activate/")
    if page.status_code == 302 and "reauthenticate" in page["Location"]:
        client.post(page["Location"], {"password": PASSWORD})
        page = client.get("/accounts/2fa/totp/activate/")
    assert page.status_code == 200, page
    secret = str(client.session[SECRET_SESSION_KEY])
    code = format_hotp_value(hotp_value(secret, next(iter(counters()))))
    with on_commit(execute=True):  # allauth sends authenticator_added once the activation commits
        response = client.post("/accounts/2fa/totp/activate/", {"code": code})
    assert response.status_code == 302, response.content.decode()[:2000]
    return secret


def _post_as_owner(client: Client, path: str, on_commit: Any) -> HttpResponseBase:
    """POST, giving the password again where allauth asks for a recent sign-in (changing MFA does)."""
    with on_commit(execute=True):
        response = client.post(path)
    if response.status_code == 302 and "reauthenticate" in response["Location"]:
        with on_commit(execute=True):  # allauth may replay the held POST itself once reauthenticated
            response = client.post(response["Location"], {"password": PASSWORD})
        if response.status_code == 302 and response["Location"] == path:
            with on_commit(execute=True):
                response = client.post(path)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert "reauthenticate" not in response["Location"]
    return response


def _entry(action: str, world: World) -> AuditLog:
    entry = AuditLog.objects.get(action=action)
    assert (entry.actor, entry.object_id) == (world.member, str(world.member.pk))
    return entry


def test_a_password_change_is_audited(world: World) -> None:
    client = _signed_in()
    response = client.post(
        "/accounts/password/change/",
        {"oldpassword": PASSWORD, "password1": NEW_PASSWORD, "password2": NEW_PASSWORD},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    entry = _entry("password.change", world)
    assert entry.ip == "127.0.0.1"
    assert NEW_PASSWORD not in str(entry.after)


def test_a_password_reset_by_emailed_link_is_audited(world: World) -> None:
    client = Client()
    client.post("/accounts/password/reset/", {"email": "bob@example.com"})
    link = re.search(r"http://testserver(/accounts/password/reset/key/\S+)", str(mail.outbox[0].body))
    assert link is not None
    form_page = client.get(link.group(1), follow=True)
    client.post(form_page.request["PATH_INFO"], {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD})
    _entry("password.reset", world)


# allauth's security notice is mailed on commit, inside the request, as in production.
@pytest.mark.django_db(transaction=True)
def test_mfa_set_up_is_audited_without_the_secret(
    world: World, django_capture_on_commit_callbacks: Any
) -> None:
    secret = _totp_on(_signed_in(), django_capture_on_commit_callbacks)
    assert Authenticator.objects.filter(user=world.member, type=Authenticator.Type.TOTP).exists()
    entries = AuditLog.objects.filter(action="mfa.add", actor=world.member)
    # TOTP, then the recovery codes allauth makes with it
    assert sorted(str((e.after or {})["authenticator"]) for e in entries) == ["recovery_codes", "totp"]
    assert secret not in str([e.after for e in entries])


# allauth's security notice is mailed on commit, inside the request, as in production.
@pytest.mark.django_db(transaction=True)
def test_recovery_codes_regenerated_are_audited(
    world: World, django_capture_on_commit_callbacks: Any
) -> None:
    client = _signed_in()
    _totp_on(client, django_capture_on_commit_callbacks)
    _post_as_owner(client, "/accounts/2fa/recovery-codes/generate/", django_capture_on_commit_callbacks)
    assert _entry("mfa.reset", world).after == {"authenticator": "recovery_codes"}


# allauth's security notice is mailed on commit, inside the request, as in production.
@pytest.mark.django_db(transaction=True)
def test_mfa_removal_is_audited(world: World, django_capture_on_commit_callbacks: Any) -> None:
    client = _signed_in()
    _totp_on(client, django_capture_on_commit_callbacks)
    _post_as_owner(client, "/accounts/2fa/totp/deactivate/", django_capture_on_commit_callbacks)
    assert not Authenticator.objects.filter(user=world.member).exists()
    removed = AuditLog.objects.filter(action="mfa.remove", actor=world.member)
    assert sorted(str((e.after or {})["authenticator"]) for e in removed) == ["recovery_codes", "totp"]


def test_a_token_created_and_revoked_on_the_tokens_page_is_audited(world: World) -> None:
    client = _signed_in()
    response = client.post("/me/tokens/", {"name": "laptop", "scopes": ["read"], "days": "30"})
    assert response.status_code == 200, response.content.decode()[:2000]
    token = ApiToken.objects.get(user=world.member, name="laptop")
    created = AuditLog.objects.get(action="token.create", object_id=str(token.pk))
    assert created.actor == world.member
    assert created.after is not None
    assert "digest" not in created.after
    client.post(f"/me/tokens/{token.pk}/revoke/")
    revoked = AuditLog.objects.get(action="token.revoke", object_id=str(token.pk))
    assert revoked.actor == world.member


def test_an_address_added_confirmed_and_removed_is_audited(world: World) -> None:
    client = _signed_in()
    client.post("/accounts/email/", {"email": "bob@work.example.com", "action_add": ""})
    added = _entry("email.add", world)
    assert added.after == {"email": "bob@work.example.com"}
    link = re.search(r"http://testserver(/accounts/confirm-email/\S+)", str(mail.outbox[-1].body))
    assert link is not None
    client.post(link.group(1))
    assert _entry("email.verify", world).after == {"email": "bob@work.example.com"}
    client.post("/accounts/email/", {"email": "bob@work.example.com", "action_primary": ""})
    primary = _entry("email.primary", world)
    assert primary.before == {"email": "bob@example.com"}
    assert primary.after == {"email": "bob@work.example.com"}
    client.post("/accounts/email/", {"email": "bob@example.com", "action_remove": ""})
    assert _entry("email.remove", world).after == {"email": "bob@example.com"}
