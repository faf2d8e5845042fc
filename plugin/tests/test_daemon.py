"""End-to-end through the test kubelet: registration, lists, Allocate of whole GPUs and slices."""

from __future__ import annotations

from plugin.devices import RESOURCE_GPU, RESOURCE_SHARED
from plugin.sim.kubelet import TestKubelet
from plugin.sim.nvml import SimNvml
from plugin.tests.conftest import MakeDaemon


def test_it_registers_both_resources_and_lists_gpus_by_uuid(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml
) -> None:
    uuids = [g.uuid for g in sim.gpus]
    make_daemon({uuids[3]: {"mode": "shared", "slices": 4}})
    whole = kubelet.wait_devices(RESOURCE_GPU, lambda d: len(d) == 3)
    shared = kubelet.wait_devices(RESOURCE_SHARED, lambda d: len(d) == 4)
    assert sorted(whole) == uuids[:3]
    assert sorted(shared) == [f"{uuids[3]}::{n}" for n in range(4)]
    assert set(whole.values()) | set(shared.values()) == {"Healthy"}
    assert all(len(i) <= 63 for i in shared)
    assert kubelet.conns[RESOURCE_GPU].options.get_preferred_allocation_available


def test_it_hands_out_whole_gpus_by_uuid(make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml) -> None:
    make_daemon()
    kubelet.wait_devices(RESOURCE_GPU, lambda d: len(d) == 4)
    resp = kubelet.create_pod("team", "train", RESOURCE_GPU, 2)
    visible = resp.envs["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert len(visible) == 2
    assert set(visible) <= {g.uuid for g in sim.gpus}
    assert resp.envs["CUDA_VISIBLE_DEVICES"] == resp.envs["NVIDIA_VISIBLE_DEVICES"]


def test_it_prefers_gpus_on_the_same_pcie_switch(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml
) -> None:
    make_daemon()
    devs = kubelet.wait_devices(RESOURCE_GPU, lambda d: len(d) == 4)
    uuids = [g.uuid for g in sim.gpus]
    # GPUs 0/1 and 2/3 share a switch: given 1, 2, 3 free, a pair must be 2+3.
    assert sorted(kubelet.preferred(RESOURCE_GPU, uuids[1:], [], 2)) == uuids[2:]
    assert len(devs) == 4


def test_it_gives_k_over_n_of_a_shared_gpu(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml
) -> None:
    gpu = sim.gpus[0]
    make_daemon({gpu.uuid: {"mode": "shared", "slices": 4}})
    kubelet.wait_devices(RESOURCE_SHARED, lambda d: len(d) == 4)
    resp = kubelet.create_pod("team", "nb", RESOURCE_SHARED, 3)
    assert resp.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "75"
    assert resp.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == f"{gpu.uuid}={32768 * 3 // 4}M"
    assert resp.envs["CUDA_MPS_PIPE_DIRECTORY"] == f"/mps/{gpu.uuid}/pipe"
    assert any(m.container_path == f"/mps/{gpu.uuid}/pipe" for m in resp.mounts)
