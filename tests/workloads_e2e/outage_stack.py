"""The whole portal as separate processes (web, worker, beat, controller) behind cuttable links to
Postgres and the Kubernetes API server, with a Redis of its own, for the outage drills. The
worker is restarted as the chart's liveness probe would (tests/workloads_e2e/restarter.py).

The test process talks to the web over HTTP and reads Postgres and the cluster directly, so it sees
what an outside observer would while the portal's own processes lose their links.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import yaml
from django.conf import settings

from deploy.localcluster import ClusterHandle
from portal import liveness
from tests.workloads_e2e.procs import (
    REPO,
    PrivateRedis,
    free_port,
    start_worker,
    stop_process,
    wait_for,
    worker_env,
)
from tests.workloads_e2e.restarter import Restarter
from tests.workloads_e2e.sizes import SOAK
from tests.workloads_e2e.tcpproxy import CuttableProxy

# CI's 20-s outages span three sweeps and one controller lease expiry (15 s); soak keeps 10 s.
SWEEP_S = 10 if SOAK else 6
DRILL_SECRET_KEY = "drill-" + "k" * 60  # the tests sign sessions with it to hand to the web process


@dataclass
class Stack:
    web: str
    postgres: CuttableProxy
    apiserver: CuttableProxy
    redis: PrivateRedis  # stop() loses everything in it, start() brings it back empty
    worker: Restarter


def _proxied_kubeconfig(k8s_cluster: ClusterHandle, workdir: Path) -> tuple[Path, CuttableProxy]:
    config = yaml.safe_load(k8s_cluster.kubeconfig.read_text())
    server = urlsplit(config["clusters"][0]["cluster"]["server"])
    proxy = CuttableProxy(server.hostname or "127.0.0.1", int(server.port or 443))
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    path = workdir / "kubeconfig-proxied"
    path.write_text(yaml.safe_dump(config))
    return path, proxy


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A background process in its own session (so a kill reaches its children), output to `log`."""
    with log.open("ab") as out:
        return subprocess.Popen(
            args, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _web_answers(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def portal_stack(
    k8s_cluster: ClusterHandle, workdir: Path, *, server: str = "daphne", direct: bool = False
) -> Iterator[Stack]:
    """`direct`: the portal reaches Postgres and the API server without the cuttable proxies (the load test
    measures the portal, not this process's Python proxies), pools its connections, and runs the
    chart's two web replicas."""
    db = settings.DATABASES["default"]
    postgres = CuttableProxy(str(db["HOST"] or "127.0.0.1"), int(db["PORT"] or 5432))
    kubeconfig, apiserver = _proxied_kubeconfig(k8s_cluster, workdir)
    redis = PrivateRedis(workdir)
    redis.start()
    env = worker_env(
        redis_url=redis.url, kubeconfig=str(kubeconfig), prefix=settings.GPUPORTAL_NAMESPACE_PREFIX
    )
    if direct:
        env["GPUPORTAL_KUBECONFIG"] = str(k8s_cluster.kubeconfig)
        env["DB_POOL_SIZE"] = "40"
    else:
        real = f"@{db['HOST']}:{db['PORT']}/"
        env["DATABASE_URL"] = env["DATABASE_URL"].replace(real, f"@127.0.0.1:{postgres.port}/")
    env["GPUPORTAL_SWEEP_SECONDS"] = str(SWEEP_S)
    # Production settings (debug pages off: an outage must show what users would see), over plain HTTP.
    env.update(
        DEBUG="0",
        SECRET_KEY=DRILL_SECRET_KEY,
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="0",
        SECURE_HSTS_SECONDS="0",
    )
    bin_dir = Path(sys.executable).parent
    celery = shutil.which("celery", path=str(bin_dir)) or "celery"
    port = free_port()
    beat = [celery, "-A", "portal", "beat", "-s", str(workdir / "beat.db"), "-l", "warning"]
    web = [str(bin_dir / "daphne"), "-b", "127.0.0.1", "-p", str(port), "portal.asgi:application"]
    if server == "uvicorn":  # as the chart runs it by default
        web = [
            sys.executable,
            "-m",
            "uvicorn",
            "portal.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-server-header",
            "--timeout-keep-alive",
            "75",
            "--workers",
            "2" if direct else "1",
        ]
    # The worker's own: beat's and the web's broker retries would otherwise keep its file fresh.
    alive = workdir / "worker-alive"
    worker_env_alive = {**env, liveness.ENV: str(alive)}
    worker = Restarter(lambda: start_worker(worker_env_alive, workdir / "worker.log", "drill"), alive)
    procs = [
        spawn(beat, env, workdir / "beat.log"),
        spawn([sys.executable, "manage.py", "controller", "--tick", "1"], env, workdir / "controller.log"),
        spawn(web, env, workdir / "web.log"),
    ]
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _web_answers(base), 90, "the drill's web process")
        yield Stack(web=base, postgres=postgres, apiserver=apiserver, redis=redis, worker=worker)
    finally:
        worker.close()
        for proc in procs:
            stop_process(proc)
        postgres.close()
        apiserver.close()
        redis.stop()
