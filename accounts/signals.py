"""Signal receivers: a change of someone's access closes that person's live streams, and allauth's
password and MFA changes (which happen inside allauth's own views, past every service) are audited."""

from __future__ import annotations

from typing import Any

from allauth.account import signals as account_signals
from allauth.account.models import EmailAddress
from allauth.mfa import signals as mfa_signals
from allauth.mfa.models import Authenticator
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver
from django.http import HttpRequest

from accounts.audit import audit_record
from accounts.live import streams_close
from accounts.models import Membership, User
from accounts.operator_factor import factor_on_staff_change, operator_factor_offer


def _close_after_commit(user_id: int) -> None:
    transaction.on_commit(lambda: streams_close(user_id))


@receiver(pre_save, sender=User, dispatch_uid="accounts.user_staff_changed")
def user_staff_changed(sender: type[User], instance: User, **kwargs: Any) -> None:
    """However the flag changes (admin, shell, createsuperuser): judged at the grant."""
    fields = kwargs.get("update_fields")
    if fields is not None and "is_staff" not in fields:
        return  # a save that cannot change the flag (a sign-in saves last_login only)
    was = (
        User.objects.filter(pk=instance.pk).values_list("is_staff", flat=True).first()
        if instance.pk
        else False
    )
    if bool(was) != instance.is_staff:
        factor_on_staff_change(instance, was_staff=bool(was))
        if instance.pk:  # also when the save names only is_staff (update_fields)
            User.objects.filter(pk=instance.pk).update(operator_factor=instance.operator_factor)


@receiver(post_save, sender=User, dispatch_uid="accounts.user_saved")
def user_saved(sender: type[User], instance: User, created: bool, **kwargs: Any) -> None:
    if not created and not instance.is_active:
        _close_after_commit(instance.pk)


@receiver(post_save, sender=Membership, dispatch_uid="accounts.membership_saved")
def membership_saved(sender: type[Membership], instance: Membership, created: bool, **kwargs: Any) -> None:
    if not created:  # a role changed: what the streams may carry changed
        _close_after_commit(instance.user_id)


@receiver(post_delete, sender=Membership, dispatch_uid="accounts.membership_deleted")
def membership_deleted(sender: type[Membership], instance: Membership, **kwargs: Any) -> None:
    _close_after_commit(instance.user_id)


@receiver(user_logged_out, dispatch_uid="accounts.logged_out")
def logged_out(sender: Any, request: HttpRequest, user: User | None, **kwargs: Any) -> None:
    if user is not None:
        _close_after_commit(user.pk)


def _audit_account(action: str, request: HttpRequest | None, user: User, detail: dict[str, Any]) -> None:
    # The account is the object; its owner the actor (a reset is signed in by no one but proves the mailbox).
    audit_record(actor=user, action=action, obj=user, after=detail, request=request)


@receiver(account_signals.password_changed, dispatch_uid="accounts.audit.password_changed")
@receiver(account_signals.password_set, dispatch_uid="accounts.audit.password_set")
@receiver(account_signals.password_reset, dispatch_uid="accounts.audit.password_reset")
def password_audited(signal: Any, request: HttpRequest | None, user: User, **kwargs: Any) -> None:
    action = {
        account_signals.password_changed: "password.change",
        account_signals.password_set: "password.set",
        account_signals.password_reset: "password.reset",
    }[signal]
    _audit_account(action, request, user, {"by": "user"})


@receiver(mfa_signals.authenticator_added, dispatch_uid="accounts.audit.mfa_added")
@receiver(mfa_signals.authenticator_removed, dispatch_uid="accounts.audit.mfa_removed")
@receiver(mfa_signals.authenticator_reset, dispatch_uid="accounts.audit.mfa_reset")
def mfa_audited(
    signal: Any, request: HttpRequest | None, user: User, authenticator: Authenticator, **kwargs: Any
) -> None:
    action = {
        mfa_signals.authenticator_added: "mfa.add",
        mfa_signals.authenticator_removed: "mfa.remove",
        mfa_signals.authenticator_reset: "mfa.reset",
    }[signal]
    # The type only: the authenticator's data is its secret, and a removed one has no id left.
    _audit_account(action, request, user, {"authenticator": str(authenticator.type)})
    if signal is mfa_signals.authenticator_added and authenticator.type == Authenticator.Type.TOTP:
        operator_factor_offer(user=user, request=request)


def _address_actor(request: HttpRequest | None, owner: User) -> User:
    # An operator verifying in the admin is the actor; a confirmation link is opened by the owner.
    user = getattr(request, "user", None)
    return user if isinstance(user, User) else owner


@receiver(account_signals.email_added, dispatch_uid="accounts.audit.email_added")
@receiver(account_signals.email_removed, dispatch_uid="accounts.audit.email_removed")
@receiver(account_signals.email_confirmed, dispatch_uid="accounts.audit.email_confirmed")
def email_audited(
    signal: Any, request: HttpRequest | None, email_address: EmailAddress, **kwargs: Any
) -> None:
    action = {
        account_signals.email_added: "email.add",
        account_signals.email_removed: "email.remove",
        account_signals.email_confirmed: "email.verify",
    }[signal]
    owner = email_address.user
    actor = _address_actor(request, owner)
    audit_record(actor=actor, action=action, obj=owner, after={"email": email_address.email}, request=request)


@receiver(account_signals.email_changed, dispatch_uid="accounts.audit.email_changed")
def primary_email_audited(
    request: HttpRequest | None,
    user: User,
    from_email_address: EmailAddress | None,
    to_email_address: EmailAddress,
    **kwargs: Any,
) -> None:
    before = {"email": from_email_address.email} if from_email_address is not None else None
    after = {"email": to_email_address.email}
    audit_record(actor=user, action="email.primary", obj=user, before=before, after=after, request=request)
