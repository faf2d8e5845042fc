"""allauth hooks: sign-up is closed unless operators open it (the seed's open registration was a hole)."""

from __future__ import annotations

from allauth.account.adapter import DefaultAccountAdapter
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.models import SocialLogin
from django.conf import settings
from django.http import HttpRequest


class AccountAdapter(DefaultAccountAdapter):
    def is_open_for_signup(self, request: HttpRequest) -> bool:
        return bool(settings.ACCOUNT_ALLOW_SIGNUPS)


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    """Sign-in through the OIDC provider makes new accounts only when operators allow it."""

    def is_open_for_signup(self, request: HttpRequest, sociallogin: SocialLogin) -> bool:
        return bool(settings.SOCIALACCOUNT_ALLOW_SIGNUPS)
