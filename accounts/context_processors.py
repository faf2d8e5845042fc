"""Template context every page may need."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def signup(request: HttpRequest) -> dict[str, bool]:
    """Whether self sign-up is open, so pages offer it only then."""
    return {"signup_open": bool(settings.ACCOUNT_ALLOW_SIGNUPS)}
