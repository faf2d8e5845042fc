"""B5's stand-in for an 8-GPU machine reads the one real GPU eight times, each a call into NVML."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from bench.b5_agent import GPUS, _bare_poll, _EightOf, _memory_version
from plugin import nvml
from plugin.agent.attribution import Attributor
from plugin.agent.collector import Collector
from plugin.sim.nvml import SimHandle, SimNvml, default_gpus


def test_one_gpu_read_in_turn_is_eight_gpus_to_the_agent_and_the_bare_loop(tmp_path: Path) -> None:
    sim = SimNvml(default_gpus(1), call_cost_s=0)
    reads: list[object] = []
    power = sim.nvmlDeviceGetPowerUsage

    def counted(handle: SimHandle) -> int:
        reads.append(handle)
        return power(handle)

    sim.nvmlDeviceGetPowerUsage = counted  # type: ignore[method-assign]
    eight = cast("nvml.NvmlLib", _EightOf(sim))
    collector = Collector(eight, Attributor(tmp_path, None))
    samples = collector.poll()
    assert GPUS == 8
    assert [s.gpu_uuid for s in samples] == [sim.gpus[0].uuid] * GPUS
    assert len(reads) == GPUS
    assert len(_bare_poll(eight, collector.handles, _memory_version(eight, collector.handles[0]))) == GPUS
    assert len(reads) == 2 * GPUS
