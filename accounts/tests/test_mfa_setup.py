"""An operator sent to set up MFA right after signing in is not asked for the password again."""

from __future__ import annotations

import pytest
from allauth.mfa.models import Authenticator
from django.core.cache import cache
from django.test import Client, override_settings

from accounts.models import User
from tests.fixtures.personas import make_user

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery 9"
ACTIVATE, DEACTIVATE = "/accounts/2fa/totp/activate/", "/accounts/2fa/totp/deactivate/"


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> None:
    cache.clear()  # the sign-in rate limits live in the (Redis) cache the whole run shares


def _operator_signed_in() -> tuple[User, Client]:
    user = make_user("ops@lab.example", staff=True)
    user.set_password(PASSWORD)
    user.save()
    client = Client()
    signed_in = client.post("/accounts/login/", {"login": user.email, "password": PASSWORD})
    assert signed_in.status_code == 302
    return user, client


def test_the_admin_sends_a_new_operator_straight_to_the_totp_form() -> None:
    _, client = _operator_signed_in()
    to_setup = client.get("/admin/")
    assert to_setup["Location"] == ACTIVATE
    form = client.get(ACTIVATE)
    assert form.status_code == 200
    assert "reauthenticate" not in form.content.decode()


@override_settings(ACCOUNT_REAUTHENTICATION_TIMEOUT=0)
def test_a_sign_in_that_is_no_longer_fresh_asks_again() -> None:
    _, client = _operator_signed_in()
    assert client.get(ACTIVATE)["Location"].startswith("/accounts/reauthenticate/")


def test_removing_mfa_still_asks_for_the_password_right_after_sign_in() -> None:
    user, client = _operator_signed_in()
    Authenticator.objects.create(user=user, type=Authenticator.Type.TOTP, data={"secret": "JBSWY3DPEHPK3PXP"})
    assert client.get(DEACTIVATE)["Location"].startswith("/accounts/reauthenticate/")
