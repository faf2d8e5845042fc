"""Samples carry the contract's numbers, report each XID once, and feed DCGM-named metrics."""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import replace
from pathlib import Path

import pynvml
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from plugin.agent.attribution import Attributor
from plugin.agent.collector import Collector, UtcClock, XidWatcher
from plugin.agent.metrics import AgentMetrics
from plugin.agent.sender import SampleBuffer
from plugin.contract import ProcessSample
from plugin.sim.nvml import BASE_USED_MIB, SimHandle, SimMemory, SimNvml, default_gpus


def test_a_sample_reports_memory_power_and_clocks_in_contract_units(tmp_path: Path) -> None:
    sim = SimNvml(call_cost_s=0)
    sim.note_allocation(sim.gpus[0].uuid, 1.0)
    sample = Collector(sim, Attributor(tmp_path, None)).poll()[0]
    assert sample.mem_total_mib == 32768
    assert sample.util_gpu == 90
    assert sample.power_w == 575.0
    assert (sample.sm_clock_mhz, sample.mem_clock_mhz) == (2407, 14001)
    assert sample.xid is None


def test_an_xid_appears_in_the_next_sample_only(tmp_path: Path) -> None:
    sim = SimNvml(call_cost_s=0)
    collector = Collector(sim, Attributor(tmp_path, None))
    watcher = XidWatcher(sim, collector)
    watcher.start()
    try:
        time.sleep(0.2)  # let the watcher register its event set
        sim.inject_xid(sim.gpus[2].uuid, 13)
        deadline = time.monotonic() + 5
        while not collector._xids and time.monotonic() < deadline:
            time.sleep(0.02)
        first = {s.gpu_uuid: s.xid for s in collector.poll()}
        second = {s.gpu_uuid: s.xid for s in collector.poll()}
    finally:
        watcher.stop()
    assert first[sim.gpus[2].uuid] == 13
    assert set(second.values()) == {None}


def test_metrics_use_dcgm_exporter_names(tmp_path: Path) -> None:
    sim = SimNvml(call_cost_s=0)
    collector = Collector(sim, Attributor(tmp_path, None))
    metrics = AgentMetrics("node-a", collector.names)
    metrics.update({u: i for i, u in enumerate(collector.uuids)}, collector.poll(), SampleBuffer(10))
    text = generate_latest(metrics.registry).decode()
    for name in (
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_SM_CLOCK",
    ):
        assert f'{name}{{Hostname="node-a",UUID="{sim.gpus[0].uuid}"' in text


def _sim_with_reserved_memory() -> SimNvml:
    sim = SimNvml(default_gpus(1), call_cost_s=0)
    sim.gpus[0] = replace(sim.gpus[0], reserved_mib=614)  # what an H200 on driver 580 reserved
    sim.add_process(sim.gpus[0].uuid, 4242, 2048)
    return sim


def test_memory_used_leaves_out_the_drivers_reservation_as_nvidia_smi_does(tmp_path: Path) -> None:
    sample = Collector(_sim_with_reserved_memory(), Attributor(tmp_path, None)).poll()[0]
    assert sample.mem_used_mib == BASE_USED_MIB + 2048


class _V1Only(SimNvml):
    """A driver whose NVML has no nvmlDeviceGetMemoryInfo_v2."""

    v2_asked = 0

    def nvmlDeviceGetMemoryInfo(self, handle: SimHandle, version: int | None = None) -> SimMemory:
        if version is not None:
            self.v2_asked += 1
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return super().nvmlDeviceGetMemoryInfo(handle)


def test_without_the_v2_call_memory_comes_from_v1_and_v2_is_asked_once(tmp_path: Path) -> None:
    sim = _V1Only(default_gpus(1), call_cost_s=0)
    sim.add_process(sim.gpus[0].uuid, 4242, 2048)
    collector = Collector(sim, Attributor(tmp_path, None))
    samples = [collector.poll()[0] for _ in range(3)]
    assert [s.mem_used_mib for s in samples] == [BASE_USED_MIB + 2048] * 3
    assert sim.v2_asked == 1


def _proc(pid: int, mib: int, pod: str | None) -> ProcessSample:
    ns = "team-a" if pod else None
    return ProcessSample(
        pid=pid, mem_used_mib=mib, pod_uid=None, pod_namespace=ns, pod_name=pod, container=pod
    )


def _values(metrics: AgentMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_hold_the_latest_poll_the_last_xid_and_each_pods_memory(tmp_path: Path) -> None:
    sim = SimNvml(default_gpus(2), call_cost_s=0)
    collector = Collector(sim, Attributor(tmp_path, None))
    metrics = AgentMetrics("node-a", collector.names)
    buffer = SampleBuffer(1)
    first = collector.poll()
    first[0].xid = 79
    first[0].processes = [_proc(1, 100, "train"), _proc(2, 50, "train"), _proc(3, 7, None)]
    buffer.add(first)  # 2 samples into a buffer of 1: one dropped
    metrics.update({u: i for i, u in enumerate(collector.uuids)}, first, buffer)
    second = collector.poll()
    second[1].util_gpu = 42
    metrics.update({u: i for i, u in enumerate(collector.uuids)}, second, buffer)
    values = _values(metrics)
    gpu = [
        frozenset(
            {
                "gpu": str(i),
                "UUID": u,
                "device": f"nvidia{i}",
                "modelName": collector.names[i],
                "Hostname": "node-a",
            }.items()
        )
        for i, u in enumerate(collector.uuids)
    ]
    assert values[("DCGM_FI_DEV_GPU_UTIL", gpu[1])] == 42
    assert values[("DCGM_FI_DEV_XID_ERRORS", gpu[0])] == 79  # kept after the sample that carried it
    assert ("DCGM_FI_DEV_XID_ERRORS", gpu[1]) not in values
    assert values[("DCGM_FI_DEV_FB_FREE", gpu[0])] == second[0].mem_total_mib - second[0].mem_used_mib
    assert not any(name == "gpu_portal_pod_gpu_memory_used_mib" for name, _ in values)  # the pod has gone
    metrics.update({u: i for i, u in enumerate(collector.uuids)}, first, buffer)
    pod = frozenset(
        {"UUID": collector.uuids[0], "namespace": "team-a", "pod": "train", "container": "train"}.items()
    )
    assert _values(metrics)[("gpu_portal_pod_gpu_memory_used_mib", pod)] == 150
    assert values[("gpu_portal_agent_buffered_samples", frozenset())] == 1
    assert values[("gpu_portal_agent_dropped_samples_total", frozenset())] == 1


def test_the_clock_writes_what_datetime_writes_across_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = UtcClock()
    # a minute's last millisecond, the next minute, a new day, and back in time (a clock step)
    for ns in (1_764_500_459_999_400_000, 1_764_500_460_000_100_000, 1_764_547_200_007_000_000, 5_000_000):
        monkeypatch.setattr(time, "time_ns", lambda ns=ns: ns)
        when = dt.datetime.fromtimestamp(ns // 1_000_000 / 1000, dt.UTC)
        assert clock.now() == when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
