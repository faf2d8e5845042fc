"""System checks of the accounts settings that only `manage.py check --deploy` runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core import checks

# Backends that deliver no mail: with mandatory email verification nobody could sign up or reset
# a password, and the links those mails carry would end up in a log or in memory instead.
UNDELIVERED_BACKENDS = frozenset(
    {
        "django.core.mail.backends.console.EmailBackend",
        "django.core.mail.backends.locmem.EmailBackend",
        "django.core.mail.backends.dummy.EmailBackend",
        "django.core.mail.backends.filebased.EmailBackend",
    }
)


@checks.register(checks.Tags.security, deploy=True)
def email_backend_delivers(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[checks.CheckMessage]:
    backend = str(settings.EMAIL_BACKEND)
    if backend not in UNDELIVERED_BACKENDS:
        return []
    return [
        checks.Error(
            f"EMAIL_BACKEND is {backend}, which delivers no mail; email verification is mandatory.",
            hint="Set EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend (the production default) "
            "with EMAIL_HOST and EMAIL_PORT.",
            id="accounts.E001",
        )
    ]
