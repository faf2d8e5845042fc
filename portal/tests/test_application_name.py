"""Each process names itself to Postgres (settings: application_name gpuportal-<role>), so
pg_stat_activity and the connection log say which tier a connection belongs to."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def test_the_real_server_sees_this_process_by_name() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()")
        (name,) = cursor.fetchone()
    assert name.startswith("gpuportal-")


@pytest.mark.parametrize(
    ("argv", "role", "expected"),
    [
        (["celery", "-A", "portal", "worker"], "", "gpuportal-worker"),
        (["manage.py", "controller"], "", "gpuportal-controller"),
        (["manage.py", "controller"], "web", "gpuportal-web"),  # the chart's GPUPORTAL_ROLE wins
    ],
)
def test_the_role_comes_from_the_chart_or_the_command_line(argv: list[str], role: str, expected: str) -> None:
    code = (
        f"import sys; sys.argv = {argv!r}\n"
        "import portal.settings as s\n"
        "print(s.DATABASES['default']['OPTIONS']['application_name'])\n"
    )
    env = (
        {**os.environ, "GPUPORTAL_ROLE": role}
        if role
        else {k: v for k, v in os.environ.items() if k != "GPUPORTAL_ROLE"}
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected
