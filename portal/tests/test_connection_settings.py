"""Which processes keep their Postgres connection between units of work (settings: CONN_MAX_AGE by
role): the Celery workers and the controller do, the web tier pools instead, and an operator's
CONN_MAX_AGE wins. The real worker's reuse is tests/workloads_e2e/test_worker_connections.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("argv", "extra", "expected"),
    [
        (["celery", "-A", "portal", "worker"], {}, "300 True"),
        (["manage.py", "controller"], {}, "300 True"),
        (["uvicorn", "portal.asgi:application"], {"DB_POOL_SIZE": "20"}, "0 True"),
        (["uvicorn", "portal.asgi:application"], {}, "0 True"),
        (["celery", "-A", "portal", "worker"], {"DB_POOL_SIZE": "4"}, "0 True"),  # a pool: never both
        (["celery", "-A", "portal", "worker"], {"CONN_MAX_AGE": "60"}, "60 True"),
        # the chart's extraEnv reaches every Deployment: the pooled web pods ignore it
        (["uvicorn", "portal.asgi:application"], {"CONN_MAX_AGE": "60", "DB_POOL_SIZE": "20"}, "0 True"),
        (["pytest", "-k", "worker"], {}, "0 True"),  # a test run is not a worker
    ],
)
def test_long_running_processes_keep_their_connection(
    argv: list[str], extra: dict[str, str], expected: str
) -> None:
    code = (
        f"import sys; sys.argv = {argv!r}\n"
        "import portal.settings as s\n"
        "db = s.DATABASES['default']\n"
        "print(db['CONN_MAX_AGE'], db['CONN_HEALTH_CHECKS'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("GPUPORTAL_ROLE", "CONN_MAX_AGE", "DB_POOL_SIZE")}
    env.setdefault("DATABASE_URL", "postgres://u:p@127.0.0.1:5432/x")  # no connection is made
    out = subprocess.run(
        [sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == expected
