"""Samples carry the contract's numbers, report each XID once, and feed DCGM-named metrics."""

from __future__ import annotations

import time
from pathlib import Path

from prometheus_client import generate_latest

from plugin.agent.attribution import Attributor
from plugin.agent.collector import Collector, XidWatcher
from plugin.agent.metrics import AgentMetrics
from plugin.agent.sender import SampleBuffer
from plugin.simnvml import SimNvml


def test_a_sample_reports_memory_power_and_clocks_in_contract_units(tmp_path: Path) -> None:
    sim = SimNvml(call_cost_s=0)
    sim.note_allocation(sim.gpus[0].uuid, 1.0)
    sample = Collector(sim, Attributor(tmp_path, None)).poll()[0]
    assert sample["mem_total_mib"] == 32768
    assert sample["util_gpu"] == 90
    assert sample["power_w"] == 575.0
    assert (sample["sm_clock_mhz"], sample["mem_clock_mhz"]) == (2407, 14001)
    assert sample["xid"] is None


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
        first = {s["gpu_uuid"]: s["xid"] for s in collector.poll()}
        second = {s["gpu_uuid"]: s["xid"] for s in collector.poll()}
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
