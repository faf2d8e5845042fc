"""The processes the benchmarks start beside the portal: ports, the web tier as the chart runs it
(its web replicas, each a uvicorn of the chart's workers, production settings, the chart's database
pool) and background processes with their logs (`spawn` and `free_port` are the tests' own, re-exported)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.gpu_e2e.live import free_port
from tests.workloads_e2e.outage_stack import spawn
from tests.workloads_e2e.procs import stop_process

__all__ = ["free_port", "server_env", "spawn", "start_web", "wait_port"]

ROOT = Path(__file__).resolve().parent.parent
CHART_VALUES = ROOT / "deploy" / "helm" / "gpu-portal" / "values.yaml"


def _chart_web() -> dict[str, Any]:
    web: dict[str, Any] = yaml.safe_load(CHART_VALUES.read_text())["web"]
    return web


def chart_web_pool() -> int:
    """The web pods' Postgres pool as the chart sets it (`web.dbPoolSize`), so the benchmarks measure
    what an install runs."""
    return int(_chart_web()["dbPoolSize"])


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
    return {
        **os.environ,
        "DATABASE_URL": db_url,
        "GPUPORTAL_PRODUCTION": "1",
        "DEBUG": "0",
        "SECRET_KEY": "bench-" + "x" * 44,
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",
        "PYTHONPATH": str(ROOT),
    }


@dataclass(frozen=True)
class Web:
    """The running web tier: one port per replica."""

    ports: list[int]
    procs: list[subprocess.Popen[bytes]]

    def port_for(self, client: int) -> int:
        """Client i's replica: connections spread evenly over the replicas, as a Service spreads
        them over pods (kube-proxy's IPVS mode deals them round; its iptables mode at random)."""
        return self.ports[client % len(self.ports)]

    def stop(self) -> None:
        for proc in self.procs:
            stop_process(proc)


def start_web(env: dict[str, str]) -> Web:
    """The web tier as the chart runs it by default: `web.replicas` uvicorn processes of `web.workers`
    workers each, on a port each. One uvicorn of two workers in their place measured something no
    install runs: its workers race to accept on one socket and keep what they took, so 50 keep-alive
    clients of B9 loaded four workers 66 / 42 / 12 / 0 % (2026-12-06), where a Service evens them."""
    web = _chart_web()
    env = {**env, "DB_POOL_SIZE": str(web["dbPoolSize"])}
    ports, procs = [], []
    for _ in range(int(web["replicas"])):
        port = free_port()
        argv = [
            str(Path(sys.executable).parent / "uvicorn"),
            "portal.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(web["workers"]),
            "--log-level",
            "warning",
            "--lifespan",
            "off",
        ]
        log_path = Path(tempfile.gettempdir()) / f"bench-uvicorn-{port}.log"
        procs.append(spawn(argv, env, log_path))
        ports.append(port)
    return Web(ports, procs)
