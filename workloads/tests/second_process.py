"""Run Python in another OS process on the test database: what another web replica or worker sees."""

from __future__ import annotations

import os
import subprocess
import sys

from django.db import connection

SCRAPE = (
    "import django; django.setup();"
    "import os; from django.test import Client;"
    "r = Client().get('/metrics', HTTP_AUTHORIZATION='Bearer ' + os.environ['GPU_METRICS_TOKEN']);"
    "assert r.status_code == 200, r.status_code; print(r.content.decode())"
)


def env(**extra: str) -> dict[str, str]:
    """The test settings, pointed at this session's test database (settings_test names it through
    TEST.NAME, which a plain process does not read: it connects to NAME, taken from DATABASE_URL)."""
    name = connection.settings_dict["NAME"]
    out = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings_test", "GPUPORTAL_TEST_DB": name}
    out["DATABASE_URL"] = out["DATABASE_URL"].rsplit("/", 1)[0] + "/" + name
    return {**out, **extra}


def start(argv: list[str], **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *argv], env=env(**extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(process: subprocess.Popen[str], timeout: float = 180) -> str:
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err[-3000:]
    return out


def scrape(token: str) -> str:
    """/metrics with the token, answered by a fresh interpreter (another web replica)."""
    return finish(start(["-c", SCRAPE], GPU_METRICS_TOKEN=token))
