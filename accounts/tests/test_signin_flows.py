"""allauth flows the portal relies on: mandatory email verification and password reset by emailed link."""

from __future__ import annotations

import re

import pytest
from allauth.account.models import EmailAddress
from django.core import mail
from django.core.cache import cache
from django.test import Client

from tests.fixtures.personas import PASSWORD, World

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> None:
    cache.clear()


def test_unverified_email_cannot_sign_in_and_gets_a_verification_mail(world: World) -> None:
    EmailAddress.objects.filter(user=world.member).update(verified=False)
    client = Client()
    client.post("/accounts/login/", {"login": "bob@example.com", "password": PASSWORD})
    assert "_auth_user_id" not in client.session
    assert len(mail.outbox) == 1
    link = re.search(r"http://testserver(/accounts/confirm-email/\S+)", str(mail.outbox[0].body))
    assert link is not None
    client.post(link.group(1))
    assert EmailAddress.objects.get(user=world.member).verified
    client.post("/accounts/login/", {"login": "bob@example.com", "password": PASSWORD})
    assert "_auth_user_id" in client.session


def test_password_reset_by_emailed_link(world: World) -> None:
    client = Client()
    client.post("/accounts/password/reset/", {"email": "bob@example.com"})
    assert len(mail.outbox) == 1
    link = re.search(r"http://testserver(/accounts/password/reset/key/\S+)", str(mail.outbox[0].body))
    assert link is not None
    form_page = client.get(link.group(1), follow=True)
    new_password = "a brand new passphrase 42"
    client.post(form_page.request["PATH_INFO"], {"password1": new_password, "password2": new_password})
    world.member.refresh_from_db()
    assert world.member.check_password(new_password)


def test_password_reset_answers_alike_for_known_and_unknown_addresses(world: World) -> None:
    known = Client().post("/accounts/password/reset/", {"email": "bob@example.com"})
    unknown = Client().post("/accounts/password/reset/", {"email": "nobody@example.com"})
    assert known.status_code == unknown.status_code == 302
    assert known["Location"] == unknown["Location"]
    assert not any("password/reset/key" in m.body for m in mail.outbox if "nobody@example.com" in m.to)
