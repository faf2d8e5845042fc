"""The models and their migrations agree: a model change without its migration fails here, not on an
operator's upgrade (the chart's migrate job would find nothing to apply)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_every_model_change_has_its_migration() -> None:
    out = StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit:
        pytest.fail(f"models changed without a migration (run manage.py makemigrations):\n{out.getvalue()}")
    assert "No changes detected" in out.getvalue()
