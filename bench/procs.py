"""The processes the benchmarks start beside the portal: ports, the web tier as the chart runs it
(uvicorn, 2 workers, production settings, the chart's database pool) and background processes with
their logs (`spawn` and `free_port` are the tests' own, re-exported)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from tests.gpu_e2e.live import free_port
from tests.workloads_e2e.outage_stack import spawn

__all__ = ["free_port", "server_env", "spawn", "start_uvicorn", "wait_port"]

ROOT = Path(__file__).resolve().parent.parent
CHART_VALUES = ROOT / "deploy" / "helm" / "gpu-portal" / "values.yaml"


def chart_web_pool() -> int:
    """The web pods' Postgres pool as the chart sets it (`web.dbPoolSize`), so the benchmarks measure
    what an install runs."""
    return int(yaml.safe_load(CHART_VALUES.read_text())["web"]["dbPoolSize"])


def wait_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"server on {port} did not start")


def server_env(db_url: str) -> dict[str, str]:
    """Production settings over the benchmark's own database."""
    return {**os.environ, "DATABASE_URL": db_url, "GPUPORTAL_PRODUCTION": "1", "DEBUG": "0",
            "SECRET_KEY": "bench-" + "x" * 44, "ALLOWED_HOSTS": "127.0.0.1",
            "SECURE_SSL_REDIRECT": "0", "PYTHONPATH": str(ROOT)}  # fmt: skip


def start_uvicorn(port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """The web tier as the chart runs it by default: uvicorn with 2 workers, each with its pool."""
    env = {**env, "DB_POOL_SIZE": str(chart_web_pool())}
    argv = [str(Path(sys.executable).parent / "uvicorn"), "portal.asgi:application", "--host", "127.0.0.1",
            "--port", str(port), "--workers", "2", "--log-level", "warning", "--lifespan", "off"]  # fmt: skip
    log_path = Path(tempfile.gettempdir()) / f"bench-uvicorn-{port}.log"
    return spawn(argv, env, log_path)
