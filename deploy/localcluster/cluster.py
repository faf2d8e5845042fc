"""Start and stop a kwokctl cluster (runtime `binary`) on loopback with its own kubeconfig.

kwokctl makes the PKI, picks free ports, forks etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and the kwok controller (detached with setsid, so they outlive us unless deleted)
and records their pids under $KWOK_WORKDIR/clusters/<name>/pids. Stopping always runs
`kwokctl delete cluster` and then kills, by pid, any recorded process that survived it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from kubernetes import client

import deploy.localcluster.paths as paths
from deploy.localcluster import kube
from deploy.localcluster.config import write_config
from deploy.localcluster.nodes import GpuNodeSpec, create_nodes, wait_nodes_ready
from plugin.names import SHARING_CONFIG_NAMESPACE

DEFAULT_NAME = "gpuportal"
PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ClusterHandle:
    """A running (or once-running) cluster: everything needed to reach or stop it."""

    name: str
    kubeconfig: Path
    run_dir: Path
    bin_dir: Path
    nodes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def workdir(self) -> Path:
        return kwok_workdir(self.run_dir) / "clusters" / self.name

    def api(self) -> contextlib.AbstractContextManager[client.ApiClient]:
        """The official client for this cluster, closed at the end of the `with` block."""
        return kube.connected(self.kubeconfig)

    def pids(self) -> dict[str, int]:
        return read_pids(self.workdir)

    def rss_bytes(self) -> dict[str, int]:
        """Resident memory of each control-plane process (Linux /proc)."""
        return {name: _rss(pid) for name, pid in self.pids().items() if _alive(pid)}


def kwok_workdir(run_dir: Path) -> Path:
    return run_dir / "kwok"


def cluster_dir(run_dir: Path, name: str) -> Path:
    return run_dir / name


def read_pids(workdir: Path) -> dict[str, int]:
    pid_dir = workdir / "pids"
    if not pid_dir.is_dir():
        return {}
    return {p.stem: int(p.read_text().strip()) for p in pid_dir.glob("*.pid") if p.read_text().strip()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_ours(pid: int) -> bool:
    """Guard against pid reuse: only kill processes running one of our binaries."""
    try:
        return Path(f"/proc/{pid}/exe").readlink().name in paths.BINARIES
    except OSError:
        return False


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _kwokctl(run_dir: Path, bin_dir: Path, *args: str, timeout: float = 180.0) -> None:
    env = {**os.environ, "KWOK_WORKDIR": str(kwok_workdir(run_dir))}
    # kwokctl runs `kubectl` for some steps; make it (and nothing from ~/.kwok) the one it finds.
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(
        [str(bin_dir / "kwokctl"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"kwokctl {' '.join(args[:2])} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")


def wait_api_ready(api: client.ApiClient, timeout: float = 120.0) -> None:
    """Poll /readyz, then wait for the default ServiceAccount that pod admission needs."""
    core = client.CoreV1Api(api)
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            # Short probes: one that hangs is given up and tried again within the deadline.
            kube.call(api, "GET", "/readyz", timeout=PROBE_TIMEOUT_S)
            core.read_namespaced_service_account("default", "default", _request_timeout=PROBE_TIMEOUT_S)
            return
        except kube.API_ERRORS as exc:
            last = exc
            time.sleep(0.5)
    raise TimeoutError(f"API server not ready after {timeout:.0f} s: {last}")


def save_handle(handle: ClusterHandle) -> None:
    data = {
        "name": handle.name,
        "kubeconfig": str(handle.kubeconfig),
        "run_dir": str(handle.run_dir),
        "bin_dir": str(handle.bin_dir),
        "nodes": handle.nodes,
        "timings": handle.timings,
    }
    (cluster_dir(handle.run_dir, handle.name) / "cluster.json").write_bytes(orjson.dumps(data))


def load_handle(name: str = DEFAULT_NAME, run_dir: Path | None = None) -> ClusterHandle | None:
    """The handle a previous `start_cluster` saved, or None if there is none."""
    path = cluster_dir(run_dir or paths.run_dir(), name) / "cluster.json"
    if not path.is_file():
        return None
    d = orjson.loads(path.read_bytes())
    return ClusterHandle(
        name=d["name"],
        kubeconfig=Path(d["kubeconfig"]),
        run_dir=Path(d["run_dir"]),
        bin_dir=Path(d["bin_dir"]),
        nodes=list(d["nodes"]),
        timings=dict(d["timings"]),
    )


@contextlib.contextmanager
def _creation_lock() -> Iterator[None]:
    """Serialise cluster creation machine-wide.

    kwokctl picks "unused" ports by probing, and the kwok controller binds its port only after a
    few seconds, so two concurrent creates can pick the same port and one kwok dies at bind.
    The lock lives in /tmp, not the run dir, because sessions may use different run dirs.
    """
    with Path(tempfile.gettempdir(), "gpuportal-localcluster-create.lock").open("wb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _dead_components(workdir: Path) -> str:
    dead = [name for name, pid in read_pids(workdir).items() if not _alive(pid)]
    if not dead:
        return ""
    tails = [f"{n}: {_log_tail(workdir / 'logs' / f'{n}.log')}" for n in dead]
    return "; dead components: " + " | ".join(tails)


def _log_tail(path: Path) -> str:
    return path.read_text(errors="replace")[-500:] if path.is_file() else "(no log)"


def start_cluster(
    name: str = DEFAULT_NAME,
    nodes: int = 2,
    run_dir: Path | None = None,
    node_spec: GpuNodeSpec | None = None,
    timeout: float = 120.0,
) -> ClusterHandle:
    """Replace any cluster of this name with a fresh one, wait until it and its nodes are Ready."""
    bin_dir = paths.require_binaries()
    rd = (run_dir or paths.run_dir()).resolve()
    stop_cluster(name, rd)
    cdir = cluster_dir(rd, name)
    cdir.mkdir(parents=True, exist_ok=True)
    workdir = kwok_workdir(rd) / "clusters" / name
    config = write_config(cdir / "kwokctl.yaml", bin_dir=bin_dir, pki_dir=workdir / "pki")  # kwokctl makes it
    kubeconfig = cdir / "kubeconfig"
    create = ["create", "cluster", "--name", name, "--config", str(config), "--kubeconfig", str(kubeconfig)]
    t0 = time.monotonic()
    try:
        # Held until the nodes are Ready, i.e. until every component has bound its port.
        with _creation_lock():
            _kwokctl(rd, bin_dir, *create, "--wait", f"{int(timeout)}s", timeout=timeout + 60)
            t1 = time.monotonic()
            names = _add_nodes(kubeconfig, nodes, node_spec, timeout, workdir)
    except BaseException:
        stop_cluster(name, rd)  # a half-started cluster must not leave detached processes behind
        raise
    timings = {"start_s": round(t1 - t0, 2), "nodes_ready_s": round(time.monotonic() - t1, 2)}
    handle = ClusterHandle(name, kubeconfig, rd, bin_dir, names, timings)
    save_handle(handle)
    return handle


def _add_nodes(
    kubeconfig: Path, count: int, spec: GpuNodeSpec | None, timeout: float, workdir: Path
) -> list[str]:
    with kube.connected(kubeconfig) as api:
        try:
            wait_api_ready(api, timeout)
            # The namespace of the GPU sharing ConfigMap, which the Helm chart makes on a real cluster:
            # without it every sharing change from the admin fails on a fresh local cluster.
            kube.create(api, "/api/v1/namespaces", {"metadata": {"name": SHARING_CONFIG_NAMESPACE}})
            names = create_nodes(api, count, spec)
            wait_nodes_ready(api, names, timeout)
            return names
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}{_dead_components(workdir)}") from exc


def create_gpu_nodes(
    kubeconfig: Path, count: int, spec: GpuNodeSpec | None = None, *, start: int = 0, timeout: float = 300.0
) -> tuple[list[str], float]:
    """Add `count` GPU nodes (names from index `start`), wait until Ready; returns names and seconds."""
    with kube.connected(kubeconfig) as api:
        t0 = time.monotonic()
        names = create_nodes(api, count, spec, start=start)
        wait_nodes_ready(api, names, timeout)
        return names, time.monotonic() - t0


def stop_cluster(name: str = DEFAULT_NAME, run_dir: Path | None = None) -> list[int]:
    """Delete the cluster and make sure none of its processes survive; returns pids killed late."""
    rd = (run_dir or paths.run_dir()).resolve()
    workdir = kwok_workdir(rd) / "clusters" / name
    pids = read_pids(workdir)
    if workdir.exists():
        bin_dir = paths.bin_dir()
        kubeconfig = cluster_dir(rd, name) / "kubeconfig"
        # A failed delete is not fatal: the pid sweep below still stops the processes.
        with contextlib.suppress(RuntimeError, OSError, subprocess.TimeoutExpired):
            _kwokctl(
                rd, bin_dir, "delete", "cluster", "--name", name, "--kubeconfig", str(kubeconfig), timeout=120
            )
    survivors = [pid for pid in pids.values() if _alive(pid) and _is_ours(pid)]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    # Our own per-run files (config, kubeconfig, handle) go too: a stale kubeconfig would point
    # the next client at a dead port.
    shutil.rmtree(cluster_dir(rd, name), ignore_errors=True)
    return survivors
