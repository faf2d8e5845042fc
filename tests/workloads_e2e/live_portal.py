"""A live portal for the tests that need the real ASGI path: daphne in a subprocess on the test
database (HTTP and websockets), and the test process playing controller and worker for one job."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from channels.layers import channel_layers
from django.conf import settings
from django.db import connections
from django.test import override_settings

from deploy.localcluster import ClusterHandle
from tests.workloads_e2e.procs import REPO, PrivateRedis, free_port, stop_process, wait_for, worker_env
from workloads.admission.cycle import admission_cycle
from workloads.models import Job
from workloads.tasks import reconcile_job


@pytest.fixture
def portal_server(k8s_cluster: ClusterHandle, tmp_path: Path) -> Iterator[str]:
    with live_portal(k8s_cluster, tmp_path) as base:
        yield base


@contextmanager
def live_portal(
    cluster: ClusterHandle, tmp_path: Path, *, host: str = "127.0.0.1", env: dict[str, str] | None = None
) -> Iterator[str]:
    """daphne on `host` (the real node's pods reach the node's address, not loopback), its own Redis."""
    redis = PrivateRedis(tmp_path)
    redis.start()
    layers = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [redis.url]},
        }
    }
    env = worker_env(
        redis_url=redis.url,
        kubeconfig=str(cluster.kubeconfig),
        prefix=settings.GPUPORTAL_NAMESPACE_PREFIX,
    ) | (env or {})
    port = free_port()
    daphne = str(Path(sys.executable).parent / "daphne")
    with (tmp_path / "daphne.log").open("ab") as log:
        proc = subprocess.Popen(
            [daphne, "-b", host, "-p", str(port), "portal.asgi:application"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(lambda: _answers(host, port), 60, "daphne up")
        with override_settings(CHANNEL_LAYERS=layers):
            channel_layers.backends.clear()
            yield f"http://{host}:{port}"
    finally:
        channel_layers.backends.clear()
        stop_process(proc)
        redis.stop()


def _answers(host: str, port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def drive_until(job: Job, state: str, timeout: float = 90) -> None:
    """Controller + worker, inline, on a plain thread: broadcasts must leave Playwright's loop thread."""

    def step() -> bool:
        admission_cycle()
        reconcile_job(job.pk)
        job.refresh_from_db()
        return job.state == state

    def drive() -> None:
        try:
            wait_for(step, timeout, f"job {state}", every=1.0)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(drive).result()
