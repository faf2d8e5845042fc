"""The processes the benchmarks start beside the portal: ports, the web tier as the chart runs it
(uvicorn, 2 workers, production settings) and background processes with their logs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
    """The web tier as the chart runs it by default: uvicorn with 2 workers."""
    argv = [str(Path(sys.executable).parent / "uvicorn"), "portal.asgi:application", "--host", "127.0.0.1",
            "--port", str(port), "--workers", "2", "--log-level", "warning", "--lifespan", "off"]  # fmt: skip
    log_path = Path(tempfile.gettempdir()) / f"bench-uvicorn-{port}.log"
    return spawn(argv, env, log_path)


def spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A background process in its own session (so a kill reaches its children), output to `log`."""
    with log.open("ab") as out:
        return subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
