"""The entry points as processes: `python -m plugin` registers with the test kubelet and stops on SIGTERM;
`python -m plugin.checks.gpucheck` says clearly when there is no GPU."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from plugin import nvml
from plugin.checks import gpucheck
from plugin.devices import RESOURCE_GPU, discover
from plugin.sim.kubelet import TestKubelet
from plugin.sim.nvml import SimNvml, default_gpus


def test_the_daemon_process_registers_and_exits_cleanly_on_sigterm(
    kubelet: TestKubelet, short_dir: Path
) -> None:
    argv = [sys.executable, "-m", "plugin", "--backend", "sim", "--sim-gpus", "2", "--sim-call-cost-us", "10"]
    argv += ["--plugin-dir", str(kubelet.plugin_dir), "--mps-root", str(short_dir / "mps")]
    argv += ["--pod-resources-socket", str(kubelet.pod_resources_socket), "--log-level", "WARNING"]
    proc = subprocess.Popen(argv)
    try:
        kubelet.wait_registered(RESOURCE_GPU, timeout=30)
        assert len(kubelet.wait_devices(RESOURCE_GPU, lambda d: len(d) == 2)) == 2
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0


def test_gpu_check_exits_2_with_a_clear_message_without_nvml(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_gpu() -> nvml.NvmlLib:
        raise nvml.NvmlUnavailable("no NVIDIA GPU / NVML not found: NVML Shared Library Not Found")

    monkeypatch.setattr(nvml, "load_real", no_gpu)
    assert gpucheck.main() == 2
    assert "no NVIDIA GPU / NVML not found" in capsys.readouterr().err


def test_gpu_checks_allocate_step_passes_on_the_simulated_nvml(capsys: pytest.CaptureFixture[str]) -> None:
    """The step the real-GPU run depends on, kept working here: a GPU machine is lent only now and
    then, so a break in it (a missing PodResources socket, say) would otherwise go unseen."""
    sim = SimNvml(default_gpus(3), call_cost_s=0)
    report = gpucheck.Report()
    gpucheck.check_allocate(report, sim, discover(sim))
    out = capsys.readouterr().out
    assert report.failed == 0, out
    assert out.count("[PASS]") == 4, out
