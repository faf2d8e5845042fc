"""The deployment checks of accounts/checks.py, as `manage.py check --deploy` runs them."""

from __future__ import annotations

import pytest
from django.core.checks import CheckMessage, run_checks
from django.test import override_settings


def _email_errors() -> list[CheckMessage]:
    return [m for m in run_checks(include_deployment_checks=True) if m.id == "accounts.E001"]


@pytest.mark.parametrize("backend", ["console", "locmem", "dummy"])
def test_a_backend_that_delivers_no_mail_fails_the_deploy_check(backend: str) -> None:
    with override_settings(EMAIL_BACKEND=f"django.core.mail.backends.{backend}.EmailBackend"):
        errors = _email_errors()
    assert len(errors) == 1
    assert "EMAIL_BACKEND" in errors[0].msg
    assert errors[0].is_serious()
