"""Processes on GPUs are attributed to pods through a fake /proc and the test kubelet's PodResources."""

from __future__ import annotations

from pathlib import Path

from plugin.agent.attribution import Attributor, pod_uid_from_cgroup
from plugin.agent.collector import Collector
from plugin.contract import ProcessSample
from plugin.devices import RESOURCE_GPU, RESOURCE_SHARED
from plugin.sim.kubelet import PodContainer, TestKubelet
from plugin.sim.nvml import SimNvml

UID_A = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
UID_B = "6f1c2e3a-0000-4000-8000-00000000000b"
UID_C = "6f1c2e3a-0000-4000-8000-00000000000c"


def _proc(root: Path, pid: int, cgroup: str, env: dict[str, str]) -> None:
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "cgroup").write_text(cgroup)
    (d / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()) + b"\0")


def test_pod_uid_is_read_from_cgroupfs_and_systemd_paths() -> None:
    assert pod_uid_from_cgroup(f"0::/kubepods/burstable/pod{UID_A}/abc\n") == UID_A
    systemd = (
        "0::/kubepods.slice/kubepods-besteffort.slice/"
        f"kubepods-besteffort-pod{UID_A.replace('-', '_')}.slice/cri-containerd-1.scope"
    )
    assert pod_uid_from_cgroup(systemd) == UID_A
    assert pod_uid_from_cgroup("0::/user.slice/user-1000.slice\n") is None


def test_processes_are_attributed_to_their_pods_even_on_a_shared_gpu(
    short_dir: Path, kubelet: TestKubelet
) -> None:
    sim = SimNvml(call_cost_s=0)
    shared, whole = sim.gpus[0].uuid, sim.gpus[1].uuid
    kubelet.pods += [
        PodContainer("team-a", "nb-a", "main", RESOURCE_SHARED, (f"{shared}::0", f"{shared}::1")),
        PodContainer("team-b", "nb-b", "work", RESOURCE_SHARED, (f"{shared}::2",)),
        PodContainer("team-c", "train", "main", RESOURCE_GPU, (whole,)),
    ]
    proc = short_dir / "proc"
    _proc(proc, 100, f"0::/kubepods/pod{UID_A}/c1\n", {"GPU_PORTAL_DEVICE_IDS": f"{shared}::0,{shared}::1"})
    _proc(proc, 200, f"0::/kubepods/pod{UID_B}/c2\n", {"GPU_PORTAL_DEVICE_IDS": f"{shared}::2", "HOME": "/"})
    _proc(proc, 300, f"0::/kubepods/pod{UID_C}/c3\n", {})
    _proc(proc, 400, "0::/system.slice/xorg.service\n", {})
    for uuid, pid, mib in ((shared, 100, 4000), (shared, 200, 2000), (whole, 300, 9000), (whole, 400, 50)):
        sim.add_process(uuid, pid, mib)

    samples = Collector(sim, Attributor(proc, kubelet.pod_resources_socket)).poll()

    got = {p.pid: p for s in samples for p in s.processes}
    assert got[100] == ProcessSample(
        pid=100,
        mem_used_mib=4000,
        pod_uid=UID_A,
        pod_namespace="team-a",
        pod_name="nb-a",
        container="main",
    )
    assert (got[200].pod_uid, got[200].pod_name, got[200].container) == (UID_B, "nb-b", "work")
    assert (got[300].pod_uid, got[300].pod_name) == (UID_C, "train")  # exclusive GPU: one holder
    assert got[400].pod_uid is None


def test_without_the_env_a_shared_gpu_process_keeps_its_uid_but_no_guessed_pod(
    short_dir: Path, kubelet: TestKubelet
) -> None:
    sim = SimNvml(call_cost_s=0)
    shared = sim.gpus[0].uuid
    kubelet.pods += [
        PodContainer("a", "p1", "c", RESOURCE_SHARED, (f"{shared}::0",)),
        PodContainer("b", "p2", "c", RESOURCE_SHARED, (f"{shared}::1",)),
    ]
    _proc(short_dir / "proc", 7, f"0::/kubepods/pod{UID_A}/x\n", {})
    sim.add_process(shared, 7, 100)
    sample = Collector(sim, Attributor(short_dir / "proc", kubelet.pod_resources_socket)).poll()[0]
    assert sample.processes[0].pod_uid == UID_A
    assert sample.processes[0].pod_name is None
