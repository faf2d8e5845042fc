"""Real processes for the fault tests: a private Redis and Celery workers on the test database.

The workers are separate processes, so they see only committed rows: the tests that use them run
with `transactional_db` and hand the workers the test database's name through DATABASE_URL.
A private Redis (own port, own directory) keeps the outage drill from touching other test runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from django.conf import settings
from django.db import connection

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateRedis:
    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if subprocess.run(
                ["redis-cli", "-p", str(self.port), "ping"], capture_output=True, check=False
            ).stdout:
                return
            time.sleep(0.1)
        raise TimeoutError("private redis did not start")

    def stop(self) -> None:
        """Like an outage: the server goes away with everything in it (no persistence)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None


def embedded_env(var_dir: Path) -> dict[str, str]:
    """The environment `make demo` runs in: no DATABASE_URL or REDIS_URL (SQLite under `var_dir`, an
    in-memory broker and channel layer)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    return env | {"DJANGO_SETTINGS_MODULE": "portal.settings", "GPUPORTAL_VAR_DIR": str(var_dir)}


def worker_env(
    *, redis_url: str, kubeconfig: str, prefix: str, fault_dir: Path | None = None
) -> dict[str, str]:
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings_test",
        "DATABASE_URL": f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{connection.settings_dict['NAME']}",
        "REDIS_URL": redis_url,
        "GPUPORTAL_KUBECONFIG": kubeconfig,
        "GPUPORTAL_JOB_SIMULATION": "1",
        "GPUPORTAL_NAMESPACE_PREFIX": prefix,
        "GPUPORTAL_CELERY_VISIBILITY_TIMEOUT": "30",
        "PYTHONUNBUFFERED": "1",
    }
    if fault_dir is not None:
        env["GPUPORTAL_FAULT_DIR"] = str(fault_dir)
    return env


def start_worker(env: dict[str, str], log: Path, name: str, concurrency: int = 2) -> subprocess.Popen[bytes]:
    celery = shutil.which("celery", path=str(Path(sys.executable).parent)) or "celery"
    with log.open("ab") as out:
        return subprocess.Popen(
            [
                celery,
                "-A",
                "portal",
                "worker",
                "-Q",
                "celery,reconcile,notify",
                "-c",
                str(concurrency),
                "--pool",
                "prefork",
                "-n",
                f"{name}@%h",
                "-l",
                "warning",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process we started and its children (its own session, so its own process group)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # orphaned pool children would keep database sessions open


def wait_for(
    probe: Callable[[], T | None], timeout: float = 60.0, what: str = "condition", every: float = 0.5
) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
