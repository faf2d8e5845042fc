"""Sharing-mode changes reach the kubelet only for GPUs nobody holds."""

from __future__ import annotations

from pathlib import Path

from plugin.config import EXCLUSIVE, Mode
from plugin.devices import RESOURCE_GPU, RESOURCE_SHARED, discover
from plugin.sim.kubelet import TestKubelet
from plugin.sim.nvml import SimNvml
from plugin.state import NodeState
from plugin.tests.conftest import MakeDaemon, write_sharing


def test_a_mode_change_waits_until_the_gpu_is_free(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml, short_dir: Path
) -> None:
    make_daemon({})
    kubelet.wait_devices(RESOURCE_GPU, lambda d: len(d) == 4)
    held = kubelet.create_pod("team", "train", RESOURCE_GPU, 1).envs["NVIDIA_VISIBLE_DEVICES"]
    free = next(g.uuid for g in sim.gpus if g.uuid != held)
    write_sharing(short_dir / "sharing.json", {u: {"mode": "shared", "slices": 2} for u in (held, free)})
    shared = kubelet.wait_devices(RESOURCE_SHARED, lambda d: len(d) == 2, timeout=5)
    assert {i.split("::")[0] for i in shared} == {free}
    assert held in kubelet.wait_devices(RESOURCE_GPU, lambda d: len(d) == 3)
    kubelet.delete_pod("team", "train")
    kubelet.wait_devices(RESOURCE_SHARED, lambda d: len(d) == 4, timeout=5)
    assert held not in kubelet.wait_devices(RESOURCE_GPU, lambda d: len(d) == 2)


def test_a_slice_count_change_also_waits_for_a_free_gpu(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml, short_dir: Path
) -> None:
    uuid = sim.gpus[0].uuid
    make_daemon({uuid: {"mode": "shared", "slices": 4}})
    kubelet.wait_devices(RESOURCE_SHARED, lambda d: len(d) == 4)
    kubelet.create_pod("team", "nb", RESOURCE_SHARED, 1)
    write_sharing(short_dir / "sharing.json", {uuid: {"mode": "shared", "slices": 8}})
    kubelet.wait_devices(RESOURCE_SHARED, lambda d: len(d) == 4, timeout=2)
    assert len(kubelet.devices(RESOURCE_SHARED)) == 4
    kubelet.delete_pod("team", "nb")
    kubelet.wait_devices(RESOURCE_SHARED, lambda d: len(d) == 8, timeout=5)


def test_nothing_switches_while_usage_is_unknown() -> None:
    node = discover(SimNvml(call_cost_s=0))
    state = NodeState(node, {g.uuid: EXCLUSIVE for g in node.gpus}, busy_grace_s=0)
    switched, pending = state.apply_modes(lambda u: Mode(shared=True, slices=2), None)
    assert switched == []
    assert len(pending) == 4


def test_a_just_allocated_gpu_counts_as_busy_for_the_grace_period() -> None:
    node = discover(SimNvml(call_cost_s=0))
    state = NodeState(node, {g.uuid: EXCLUSIVE for g in node.gpus}, busy_grace_s=60)
    state.resolve_whole([node.gpus[0].uuid])
    switched, pending = state.apply_modes(lambda u: Mode(shared=True, slices=2), set())
    assert pending == [node.gpus[0].uuid]
    assert len(switched) == 3
