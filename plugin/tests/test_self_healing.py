"""Self-healing over the real device-plugin gRPC API (test kubelet): a critical XID or a GPU the
portal took out of service (`in_service: false` in the sharing ConfigMap) turns Unhealthy in
ListAndWatch within 5 s, and Healthy again after the clean interval / when the flag goes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from plugin import config
from plugin.devices import RESOURCE_GPU, RESOURCE_SHARED
from plugin.sim.kubelet import TestKubelet
from plugin.sim.nvml import SimNvml
from plugin.tests.conftest import MakeDaemon, write_sharing

BUDGET_S = 5.0


def _all_healthy(devices: dict[str, str]) -> bool:
    return bool(devices) and set(devices.values()) == {"Healthy"}


def test_a_critical_xid_is_unhealthy_within_5s_and_healthy_again_after_the_clean_interval(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml
) -> None:
    bad = sim.gpus[1].uuid
    make_daemon(recovery_s=2.0)
    kubelet.wait_devices(RESOURCE_GPU, _all_healthy)
    t0 = time.monotonic()
    sim.inject_xid(bad, 48)
    kubelet.wait_devices(RESOURCE_GPU, lambda d: d[bad] == "Unhealthy", timeout=BUDGET_S)
    detected = time.monotonic() - t0
    kubelet.wait_devices(RESOURCE_GPU, _all_healthy, timeout=BUDGET_S + 2.0)
    back = time.monotonic() - t0
    print(f"XID 48 -> Unhealthy in ListAndWatch: {detected:.3f} s; Healthy again after {back:.2f} s")
    assert detected <= BUDGET_S
    assert back >= 2.0  # not before the clean interval
    assert kubelet.allocate(RESOURCE_GPU, [bad]).envs["NVIDIA_VISIBLE_DEVICES"] == bad


def test_a_gpu_out_of_service_in_the_config_map_is_unhealthy_and_offered_again_when_back(
    make_daemon: MakeDaemon, kubelet: TestKubelet, sim: SimNvml, short_dir: Path
) -> None:
    out, shared = sim.gpus[0].uuid, sim.gpus[3].uuid
    modes: dict[str, dict[str, Any]] = {out: {"mode": "exclusive"}, shared: {"mode": "shared", "slices": 2}}
    make_daemon(modes)
    kubelet.wait_devices(RESOURCE_GPU, _all_healthy)
    t0 = time.monotonic()
    taken_out: dict[str, dict[str, Any]] = {
        out: {"mode": "exclusive", "in_service": False},
        shared: {**modes[shared], "in_service": False},
    }
    write_sharing(short_dir / "sharing.json", taken_out)
    kubelet.wait_devices(RESOURCE_GPU, lambda d: d[out] == "Unhealthy", timeout=BUDGET_S)
    print(f"in_service false -> Unhealthy in ListAndWatch: {time.monotonic() - t0:.3f} s")
    kubelet.wait_devices(RESOURCE_SHARED, lambda d: set(d.values()) == {"Unhealthy"}, timeout=BUDGET_S)
    assert sum(v == "Healthy" for v in kubelet.devices(RESOURCE_GPU).values()) == 2
    with pytest.raises(grpc.RpcError) as err:
        kubelet.allocate(RESOURCE_GPU, [out])
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    write_sharing(short_dir / "sharing.json", modes)
    kubelet.wait_devices(RESOURCE_GPU, _all_healthy, timeout=BUDGET_S)
    kubelet.wait_devices(RESOURCE_SHARED, _all_healthy, timeout=BUDGET_S)
    assert kubelet.allocate(RESOURCE_GPU, [out]).envs["NVIDIA_VISIBLE_DEVICES"] == out


def test_in_service_must_be_a_boolean_and_is_read_per_gpu() -> None:
    text = '{"gpus": {"A": {"mode": "exclusive", "in_service": false}, "B": {"mode": "exclusive"}}}'
    assert config.out_of_service(text) == frozenset({"A"})
    with pytest.raises(ValueError, match="in_service"):
        config.parse('{"gpus": {"A": {"mode": "exclusive", "in_service": "no"}}}', default=config.EXCLUSIVE)
