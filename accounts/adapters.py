"""allauth hooks: sign-up is closed unless operators open it (open registration would let anyone in)."""

from __future__ import annotations

import time
from typing import Any

from allauth.account import app_settings as allauth_settings
from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.authentication import get_authentication_records
from allauth.mfa.utils import is_mfa_enabled
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.models import SocialLogin
from django.conf import settings
from django.http import HttpRequest, HttpResponse


class AccountAdapter(DefaultAccountAdapter):
    def is_open_for_signup(self, request: HttpRequest) -> bool:
        return bool(settings.ACCOUNT_ALLOW_SIGNUPS)

    def pre_login(self, request: HttpRequest, user: Any, **kwargs: Any) -> HttpResponse | None:
        """A new session key once the password (or provider) step passes, before the two-factor step:
        a key planted in the browser beforehand must not share the pending sign-in (login() cycles
        it again at the end)."""
        response: HttpResponse | None = super().pre_login(request, user, **kwargs)
        if response is None:
            request.session.cycle_key()
        return response

    def is_reauthentication_required(self, *, app: str, **kwargs: Any) -> bool:
        """Setting up the first factor right after a password sign-in asks for no password again.

        allauth asks before every MFA change; an operator the admin sends to set up MFA has just
        typed the password, so asking again adds nothing. Removing or changing MFA still asks.
        """
        if app == "allauth.mfa" and _just_signed_in_without_mfa(self.request):
            return False
        return bool(super().is_reauthentication_required(app=app, **kwargs))


def _just_signed_in_without_mfa(request: HttpRequest | None) -> bool:
    if request is None or not request.user.is_authenticated or is_mfa_enabled(request.user):
        return False
    records = get_authentication_records(request, request.user)
    last = records[-1] if records else {}
    fresh_for = float(allauth_settings.REAUTHENTICATION_TIMEOUT)
    return last.get("method") == "password" and time.time() - float(last.get("at", 0)) < fresh_for


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    """Sign-in through the OIDC provider makes new accounts only when operators allow it."""

    def is_open_for_signup(self, request: HttpRequest, sociallogin: SocialLogin) -> bool:
        return bool(settings.SOCIALACCOUNT_ALLOW_SIGNUPS)
