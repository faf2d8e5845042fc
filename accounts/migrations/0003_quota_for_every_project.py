"""Projects added through the admin before every creation path went through project_create had no
Quota row (their pages answered 500); give each the default quota."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def add_missing_quotas(apps: Any, schema_editor: Any) -> None:
    project_model = apps.get_model("accounts", "Project")
    quota_model = apps.get_model("accounts", "Quota")
    missing = project_model.objects.filter(quota__isnull=True)
    quota_model.objects.bulk_create(quota_model(project=project) for project in missing)


class Migration(migrations.Migration):
    dependencies = [("accounts", "0002_apitoken_parent")]
    operations = [migrations.RunPython(add_missing_quotas, migrations.RunPython.noop)]
