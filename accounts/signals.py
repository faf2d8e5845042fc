"""Signal receivers; they only send: a change of someone's access closes that person's live streams."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.http import HttpRequest

from accounts.live import streams_close
from accounts.models import Membership, User


def _close_after_commit(user_id: int) -> None:
    transaction.on_commit(lambda: streams_close(user_id))


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
