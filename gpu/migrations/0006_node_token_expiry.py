"""Node tokens expire. Tokens made before this get the site's lifetime from the upgrade on, so no
running agent stops at once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import migrations, models
from django.utils import timezone


def expire_existing(apps: Any, schema_editor: Any) -> None:
    token = apps.get_model("gpu", "NodeToken")
    ends = timezone.now() + timedelta(days=int(settings.GPUPORTAL_NODE_TOKEN_DAYS))
    token.objects.filter(expires_at__isnull=True).update(expires_at=ends)


class Migration(migrations.Migration):
    dependencies = [("gpu", "0005_gpu_shared")]

    operations = [
        migrations.AddField(model_name="nodetoken", name="expires_at", field=models.DateTimeField(null=True)),
        migrations.RunPython(expire_existing, migrations.RunPython.noop),
        migrations.AlterField(model_name="nodetoken", name="expires_at", field=models.DateTimeField()),
    ]
