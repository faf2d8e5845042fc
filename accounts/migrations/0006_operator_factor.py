"""Operator power rests on a confirmed second factor. Staff who hold a TOTP authenticator at the
upgrade keep their power: their current one counts as confirmed."""

from __future__ import annotations

from typing import Any

import django.db.models.deletion
from django.db import migrations, models


def confirm_existing(apps: Any, schema_editor: Any) -> None:
    user_model = apps.get_model("accounts", "User")
    authenticator = apps.get_model("mfa", "Authenticator")
    for user in user_model.objects.filter(is_staff=True, is_active=True):
        totp = authenticator.objects.filter(user_id=user.pk, type="totp").first()
        if totp is not None:
            user_model.objects.filter(pk=user.pk).update(operator_factor=totp)


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0005_user_email_choices"),
        ("mfa", "0003_authenticator_type_uniq"),
    ]

    operations = [
        migrations.AddField(
            model_name="user",
            name="operator_factor",
            field=models.OneToOneField(
                blank=True,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="mfa.authenticator",
            ),
        ),
        migrations.RunPython(confirm_existing, migrations.RunPython.noop),
    ]
