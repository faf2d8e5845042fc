"""Shared GPUs are tenant-bound: one project per shared GPU unless marked
cross-project, a per-GPU /dev/shm, and MPS limits set in the control daemon, where the job's own
environment cannot raise them. Through the test kubelet (real gRPC) and the simulated daemon."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from plugin import mpslimits
from plugin._proto import deviceplugin_pb2 as pb
from plugin.daemon import PluginDaemon
from plugin.devices import RESOURCE_SHARED
from plugin.mps import SHM_WRAPPER, MpsSupervisor
from plugin.podresources import Holder
from plugin.sim.kubelet import TestKubelet
from plugin.sim.mps import SimControl, connect_client
from plugin.sim.nvml import SimNvml
from plugin.tests.conftest import MakeDaemon

MIB = 32768  # SimNvml's default GPU memory


def _until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.05)


def _host_pipe(resp: pb.ContainerAllocateResponse) -> Path:
    """The host directory behind the container's CUDA_MPS_PIPE_DIRECTORY (its mount)."""
    inside = resp.envs["CUDA_MPS_PIPE_DIRECTORY"]
    return Path(next(m.host_path for m in resp.mounts if m.container_path == inside))


@contextmanager
def _client(pipe: Path, uid: int, env: dict[str, str]) -> Iterator[str]:
    sock, answer = connect_client(pipe, uid, env)
    try:
        yield answer
    finally:
        sock.close()


def _shared(
    sim: SimNvml, make_daemon: MakeDaemon, kubelet: TestKubelet, **extra: object
) -> tuple[PluginDaemon, str]:
    uuid = sim.gpus[0].uuid
    daemon = make_daemon({uuid: {"mode": "shared", "slices": 4, **extra}})
    kubelet.wait_devices(RESOURCE_SHARED, lambda d: len(d) == 4)
    _until(lambda: daemon.mps.pid(uuid) is not None)
    _until(lambda: (daemon.cfg.mps_root / uuid / "pipe" / "control.sock").exists())
    return daemon, uuid


def test_a_container_that_clears_its_environment_still_gets_its_limit(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml
) -> None:
    _, uuid = _shared(sim, make_daemon, kubelet)
    resp = kubelet.create_pod("gp-alpha", "nb", RESOURCE_SHARED, 2)
    pipe = _host_pipe(resp)
    shm = {m.container_path: m.host_path for m in resp.mounts}["/dev/shm"]
    assert shm == str(pipe.parent.parent / uuid / "shm")  # the GPU's own, not one for the node
    with _client(pipe, 100_001, {}) as cleared:
        assert cleared.startswith("OK ")
        assert "thread_pct=50" in cleared
        assert f"mem_mib={MIB // 2}" in cleared
    raised = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "100", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": f"{MIB}M"}
    with _client(pipe, 100_001, raised) as answer:
        assert "thread_pct=50" in answer
        assert f"mem_mib={MIB // 2}" in answer
    with _client(pipe, 100_001, {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "10"}) as lowered:
        assert "thread_pct=10" in lowered  # a client may still ask for less


def test_a_second_project_is_refused_on_a_one_project_gpu(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml
) -> None:
    _shared(sim, make_daemon, kubelet)
    kubelet.create_pod("gp-alpha", "a1", RESOURCE_SHARED, 1)
    kubelet.create_pod("gp-alpha", "a2", RESOURCE_SHARED, 1)  # the same project packs freely
    with pytest.raises(grpc.RpcError) as refused:
        kubelet.create_pod("gp-beta", "b1", RESOURCE_SHARED, 1)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "holds slices of gp-alpha" in str(refused.value.details())
    assert {p.namespace for p in kubelet.pods} == {"gp-alpha"}


def test_a_cross_project_gpu_takes_several_projects(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml
) -> None:
    _shared(sim, make_daemon, kubelet, cross_project=True)
    kubelet.create_pod("gp-alpha", "a1", RESOURCE_SHARED, 1)
    kubelet.create_pod("gp-beta", "b1", RESOURCE_SHARED, 2)
    assert {p.namespace for p in kubelet.pods} == {"gp-alpha", "gp-beta"}


def test_the_ceiling_follows_the_slices_a_project_still_holds(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml
) -> None:
    _shared(sim, make_daemon, kubelet)
    pipe = _host_pipe(kubelet.create_pod("gp-alpha", "a1", RESOURCE_SHARED, 1))
    kubelet.create_pod("gp-alpha", "a2", RESOURCE_SHARED, 2)

    def ceiling() -> str:
        with _client(pipe, 100_001, {}) as answer:
            return answer

    assert "thread_pct=75" in ceiling()
    kubelet.delete_pod("gp-alpha", "a2")
    _until(lambda: "thread_pct=25" in ceiling())


def test_prestart_fails_closed_when_podresources_cannot_answer(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml
) -> None:
    _shared(sim, make_daemon, kubelet)
    assert kubelet._pr_server is not None
    kubelet._pr_server.stop(grace=0).wait()
    with pytest.raises(grpc.RpcError) as refused:
        kubelet.create_pod("gp-alpha", "a1", RESOURCE_SHARED, 1)
    assert "PodResources unavailable" in str(refused.value.details())


def test_the_simulated_daemon_runs_one_uid_at_a_time() -> None:
    control = SimControl()
    control.command("set_default_active_thread_percentage 25")
    client, first = control.connect(100_001, None, None)
    assert first.startswith("OK ")
    assert "thread_pct=25" in first
    _, other = control.connect(100_002, None, None)
    assert other.startswith("WAIT")  # why a shared GPU holds one project at a time
    control.disconnect(client)
    _, later = control.connect(100_002, None, None)
    assert later.startswith("OK ")


def test_limits_are_the_largest_share_one_project_holds() -> None:
    holders = [
        Holder("gp-a", "p1", "main", RESOURCE_SHARED, frozenset({"GPU-x::0", "GPU-x::1"})),
        Holder("gp-a", "p2", "main", RESOURCE_SHARED, frozenset({"GPU-x::2", "GPU-y::0"})),
        Holder("gp-b", "p3", "main", RESOURCE_SHARED, frozenset({"GPU-y::1"})),
    ]
    got = mpslimits.limits(holders, {"GPU-x": 4, "GPU-y": 8}, {"GPU-x": 1000, "GPU-y": 800})
    assert got == {"GPU-x": mpslimits.Limit(75, 750), "GPU-y": mpslimits.Limit(12, 100)}
    assert mpslimits.conflict(holders, {"GPU-y::1"}, frozenset()) is not None
    assert mpslimits.conflict(holders, {"GPU-y::1"}, frozenset({"GPU-y"})) is None
    assert mpslimits.conflict(holders, {"GPU-x::0", "GPU-x::1"}, frozenset()) is None


# unshare --mount needs root, as the plugin has on a node; CI runs as root. Never skipped.
def test_the_shm_wrapper_gives_the_daemon_the_gpus_own_dev_shm(tmp_path: Path) -> None:
    shm = tmp_path / "shm"
    shm.mkdir()
    probe = f"gp-probe-{os.getpid()}"
    subprocess.run([*SHM_WRAPPER, str(shm), "sh", "-c", f"echo x > /dev/shm/{probe}"], check=True, timeout=10)
    assert (shm / probe).read_text() == "x\n"
    assert not Path("/dev/shm", probe).exists()


def test_each_supervised_daemon_sees_its_own_gpu_directory_as_dev_shm(short_dir: Path) -> None:
    script = "echo $$ > /dev/shm/daemon.pid; exec sleep 60"
    sup = MpsSupervisor(short_dir, ["sh", "-c", script], isolate_shm=True)
    try:
        sup.ensure({"GPU-a", "GPU-b"})
        for uuid in ("GPU-a", "GPU-b"):
            _until(lambda u=uuid: (short_dir / u / "shm" / "daemon.pid").exists())  # type: ignore[misc]
        pids = {u: (short_dir / u / "shm" / "daemon.pid").read_text().strip() for u in ("GPU-a", "GPU-b")}
        assert pids["GPU-a"] != pids["GPU-b"]
    finally:
        sup.stop()


def test_the_simulated_control_program_speaks_on_stdin(short_dir: Path) -> None:
    pipe = short_dir / "pipe"
    env = os.environ | {"CUDA_MPS_PIPE_DIRECTORY": str(pipe)}
    simmps = str(Path(mpslimits.__file__).parent / "sim" / "mps.py")
    daemon = subprocess.Popen([sys.executable, simmps], env=env)
    try:
        _until(lambda: (pipe / "control.sock").exists())
        lines = "set_default_active_thread_percentage 40\nget_default_active_thread_percentage\n"
        out = subprocess.run(
            [sys.executable, simmps, "control"], input=lines, env=env, capture_output=True, text=True
        )
        assert out.stdout.strip() == "40.0"
        with socket.socket(socket.AF_UNIX) as probe:
            probe.connect(str(pipe / "control.sock"))
    finally:
        daemon.terminate()
        daemon.wait(timeout=5)


def test_a_restarted_daemon_is_told_the_ceiling_again(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml
) -> None:
    daemon, uuid = _shared(sim, make_daemon, kubelet)
    pipe = _host_pipe(kubelet.create_pod("gp-alpha", "a1", RESOURCE_SHARED, 1))
    old = daemon.mps.pid(uuid)
    assert old is not None
    os.kill(old, 9)  # a fresh daemon starts with the defaults: the whole GPU
    _until(lambda: daemon.mps.pid(uuid) not in (None, old))

    def ceiling() -> str:
        try:
            with _client(pipe, 100_001, {}) as answer:
                return answer
        except OSError:  # the new daemon is not listening yet
            return ""

    _until(lambda: "thread_pct=25" in ceiling())
