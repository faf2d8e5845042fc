"""Operator power rests on a second factor the staff grant cannot hand to a password thief.

A stolen password of a staff account without a second factor would otherwise become an operator:
whoever holds the session sets up a TOTP, and the admin opens. So the factor operator power counts
(`User.operator_factor`, read by `selectors.is_operator`) is one of two kinds:
- a TOTP the account held before it was made staff (set up as a plain user, then promoted), or
- a TOTP set up while staff and confirmed through a one-time link mailed to the account's address,
  which a password alone does not open.
Each staff factor added is also mailed to the other operators, and audited.
"""

from __future__ import annotations

from datetime import timedelta

from allauth.mfa.models import Authenticator
from django.conf import settings
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.http import HttpRequest
from django.urls import reverse

from accounts.audit import audit_record
from accounts.models import User

SALT = "accounts.operator-factor"
LINK_MAX_AGE = timedelta(hours=1)


def totp_of(user: User) -> Authenticator | None:
    return Authenticator.objects.filter(user_id=user.pk, type=Authenticator.Type.TOTP).first()


def factor_on_staff_change(user: User, *, was_staff: bool) -> None:
    """As a user's staff flag is saved: a TOTP held before the grant counts; losing staff forgets it
    (a later grant is judged again)."""
    if user.is_staff and not was_staff:
        user.operator_factor = totp_of(user)
    elif not user.is_staff:
        user.operator_factor = None


def _link(token: str, request: HttpRequest | None) -> str:
    path = reverse("accounts:operator-confirm", args=[token])
    return request.build_absolute_uri(path) if request is not None else path


def operator_factor_offer(*, user: User, request: HttpRequest | None = None) -> bool:
    """Mail the owner of a staff account with an unconfirmed TOTP the link that confirms it, and the
    other operators that it was added. False when there is nothing to confirm."""
    totp = totp_of(user)
    if not user.is_staff or totp is None or user.operator_factor_id == totp.pk:
        return False
    token = signing.TimestampSigner(salt=SALT).sign(f"{user.pk}:{totp.pk}")
    minutes = int(LINK_MAX_AGE.total_seconds() // 60)
    send_mail(
        "Confirm your two-factor authentication for operator access",
        f"Two-factor authentication was set up for {user.email}, an operator account.\n"
        f"If that was you, open this link within {minutes} minutes, signed in, to get operator access:\n\n"
        f"{_link(token, request)}\n\nIf it was not you, tell another operator: your password is known.",
        settings.DEFAULT_FROM_EMAIL,
        [user.email],
    )
    others = [
        u.email
        for u in User.objects.filter(is_staff=True, is_active=True, operator_factor__isnull=False).exclude(
            pk=user.pk
        )
    ]
    if others:
        send_mail(
            f"A second factor was added to the operator account {user.email}",
            f"{user.email} set up two-factor authentication. It gives operator access only once "
            "confirmed from that account's mailbox. If this is unexpected, deactivate the account.",
            settings.DEFAULT_FROM_EMAIL,
            others,
        )
    audit_record(actor=user, action="mfa.operator_pending", obj=user, request=request)
    return True


def operator_factor_confirm(*, user: User, token: str, request: HttpRequest | None = None) -> None:
    """Make the TOTP the link names this staff account's operator factor (ValidationError: why not)."""
    try:
        value = signing.TimestampSigner(salt=SALT).unsign(token, max_age=LINK_MAX_AGE)
    except signing.SignatureExpired:
        raise ValidationError("This link has expired: ask for a new one.") from None
    except signing.BadSignature:
        raise ValidationError("This link is not valid.") from None
    user_id, _, factor_id = value.partition(":")
    if user_id != str(user.pk):
        raise ValidationError("This link confirms another account: sign in as that account.")
    totp = totp_of(user)
    if totp is None or str(totp.pk) != factor_id or not user.is_staff:
        raise ValidationError("The factor this link confirms is no longer set up: ask for a new link.")
    User.objects.filter(pk=user.pk).update(operator_factor=totp)
    user.operator_factor = totp
    audit_record(actor=user, action="mfa.operator_confirmed", obj=user, request=request)
