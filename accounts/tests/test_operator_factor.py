"""A stolen staff password never becomes an operator: the factor operator power rests on predates the
staff grant or is confirmed from the account's mailbox, and each one added is reported."""

from __future__ import annotations

import re

import pytest
from allauth.mfa.models import Authenticator
from allauth.mfa.totp.internal.auth import format_hotp_value, hotp_value
from allauth.mfa.totp.internal.auth import yield_hotp_counters_from_time as counters
from django.core import mail
from django.test import Client

from accounts import selectors
from accounts.models import AuditLog, User
from tests.fixtures.personas import PASSWORD, World, session_client

pytestmark = pytest.mark.django_db
LINK = re.compile(r"https?://\S+/me/operator/confirm/\S+/")


def _promote(user: User) -> User:
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    user.refresh_from_db()
    return user


def _set_up_totp_in_the_browser(client: Client) -> None:
    """What a person does on allauth's page: read the secret, type the current code."""
    page = client.get("/accounts/2fa/totp/activate/")
    secret = page.context["form"].secret
    code = format_hotp_value(hotp_value(secret, next(counters())))
    response = client.post("/accounts/2fa/totp/activate/", {"code": code})
    assert response.status_code == 302, response.content[:500]


@pytest.mark.django_db(transaction=True)  # allauth reports a new factor on commit, inside the request
def test_a_factor_set_up_after_the_staff_grant_counts_only_once_confirmed_by_mail(world: World) -> None:
    thief = Client()  # holds the password of a staff account that has no second factor yet
    staff = _promote(world.member)
    thief.post("/accounts/login/", {"login": staff.email, "password": PASSWORD})
    mail.outbox.clear()
    _set_up_totp_in_the_browser(thief)
    staff.refresh_from_db()
    assert not selectors.is_operator(staff)
    assert thief.get("/admin/")["Location"] == "/me/operator/"  # not the admin
    # The link went to the account's mailbox, and the operators were told.
    (to_owner,) = [m for m in mail.outbox if m.to == [staff.email] and "operator" in m.subject]
    assert any(world.admin.email in m.to for m in mail.outbox)
    # allauth's own security notice reaches the owner too.
    assert any(m.to == [staff.email] and "Activated" in m.subject for m in mail.outbox)
    link = LINK.search(str(to_owner.body))
    assert link is not None, to_owner.body
    path = link.group(0).split("testserver", 1)[-1]

    # Someone else's session cannot use it; the owner's can (here: the mailbox's owner signs in).
    refused = session_client(world.owner).post(path)
    assert refused.status_code == 400
    assert "another account" in refused.content.decode()
    owner = session_client(staff)
    assert owner.get(path).status_code == 200  # a page with a button: a GET changes nothing
    assert not selectors.is_operator(User.objects.get(pk=staff.pk))
    assert owner.post(path)["Location"] == "/admin/"
    assert selectors.is_operator(User.objects.get(pk=staff.pk))
    actions = set(AuditLog.objects.filter(actor=staff).values_list("action", flat=True))
    assert {"mfa.add", "mfa.operator_pending", "mfa.operator_confirmed"} <= actions


def test_a_factor_held_before_the_grant_counts_at_once(world: World) -> None:
    Authenticator.objects.create(
        user=world.member, type=Authenticator.Type.TOTP, data={"secret": "JBSWY3DPEHPK3PXP"}
    )
    assert selectors.is_operator(_promote(world.member))


def test_losing_staff_forgets_the_factor_and_a_new_grant_judges_again(world: World) -> None:
    admin = world.admin
    assert selectors.is_operator(admin)
    admin.is_staff = False
    admin.save()
    admin.refresh_from_db()
    assert admin.operator_factor_id is None
    assert selectors.is_operator(_promote(admin))  # its factor predates the new grant


def test_a_removed_factor_ends_operator_power_and_a_new_one_needs_the_mail(world: World) -> None:
    Authenticator.objects.filter(user=world.admin).delete()
    Authenticator.objects.create(
        user=world.admin, type=Authenticator.Type.TOTP, data={"secret": "JBSWY3DPEHPK3PXP"}
    )
    assert not selectors.is_operator(User.objects.get(pk=world.admin.pk))


def test_a_forged_or_expired_link_is_refused(world: World) -> None:
    from accounts import operator_factor

    staff = _promote(world.member)
    Authenticator.objects.create(
        user=staff, type=Authenticator.Type.TOTP, data={"secret": "JBSWY3DPEHPK3PXP"}
    )
    client = session_client(staff)
    forged = client.post(f"/me/operator/confirm/{staff.pk}:1:forged/")
    assert forged.status_code == 400
    assert "not valid" in forged.content.decode()
    mail.outbox.clear()
    assert operator_factor.operator_factor_offer(user=User.objects.get(pk=staff.pk))
    link = re.search(r"/me/operator/confirm/\S+/", str(mail.outbox[0].body))
    assert link is not None, mail.outbox[0].body
    path = link.group(0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(operator_factor, "LINK_MAX_AGE", -operator_factor.LINK_MAX_AGE)  # already past
        expired = client.post(path)
    assert expired.status_code == 400
    assert "expired" in expired.content.decode()
    assert not selectors.is_operator(User.objects.get(pk=staff.pk))
