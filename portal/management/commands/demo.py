"""`manage.py demo`: the embedded portal on one machine, with demo accounts, printed sign-in details."""

from __future__ import annotations

import os
import secrets
from typing import Any

from allauth.account.models import EmailAddress
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts.choices import Role
from accounts.models import Membership, Project, Quota, User

OPERATOR_EMAIL = "operator@example.com"
RESEARCHER_EMAIL = "researcher@example.com"


def _ensure_user(email: str, *, staff: bool) -> tuple[User, str]:
    password = secrets.token_urlsafe(12)
    user, _ = User.objects.get_or_create(email=email, defaults={"username": email.split("@")[0]})
    user.is_staff = user.is_superuser = staff
    user.set_password(password)
    user.save()
    EmailAddress.objects.update_or_create(user=user, email=email, defaults={"verified": True, "primary": True})
    return user, password


@transaction.atomic
def seed() -> dict[str, str]:
    operator, op_password = _ensure_user(OPERATOR_EMAIL, staff=True)
    researcher, r_password = _ensure_user(RESEARCHER_EMAIL, staff=False)
    project, _ = Project.objects.get_or_create(slug="vision-lab", defaults={"name": "Vision lab"})
    Quota.objects.update_or_create(project=project, defaults={"gpus": 6, "mps_slices": 8})
    Membership.objects.get_or_create(project=project, user=researcher, defaults={"role": Role.MANAGER})
    return {OPERATOR_EMAIL: op_password, RESEARCHER_EMAIL: r_password}


class Command(BaseCommand):
    help = "Run the portal on embedded defaults with demo accounts (make demo)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--no-serve", action="store_true", help="Prepare and print, then exit.")

    def handle(self, *args: Any, **options: Any) -> None:
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        call_command("migrate", verbosity=0, interactive=False)
        passwords = seed()
        url = f"http://127.0.0.1:{options['port']}/"
        self.stdout.write(self.style.SUCCESS(f"\nGPU portal demo at {url}"))
        for email, password in passwords.items():
            self.stdout.write(f"  sign in as {email} / {password}")
        self.stdout.write("  the operator is asked to set up TOTP two-factor authentication before the admin opens.\n")
        if not options["no_serve"]:
            call_command("runserver", f"127.0.0.1:{options['port']}", use_reloader=False)
