"""Fixtures: a simulated node, the test kubelet on real unix sockets, and a running plugin daemon."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from plugin.daemon import PluginConfig, PluginDaemon
from plugin.devices import RESOURCE_GPU, RESOURCE_SHARED
from plugin.sim.kubelet import TestKubelet
from plugin.sim.nvml import SimNvml

RESOURCES = (RESOURCE_GPU, RESOURCE_SHARED)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """Unix socket paths must stay under ~107 bytes, so not pytest's long tmp_path."""
    path = Path(tempfile.mkdtemp(prefix="gp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def sim() -> SimNvml:
    return SimNvml(call_cost_s=20e-6)


@pytest.fixture
def kubelet(short_dir: Path) -> Iterator[TestKubelet]:
    k = TestKubelet(short_dir / "dp", short_dir / "pr" / "kubelet.sock")
    k.start()
    yield k
    k.stop()


def write_sharing(path: Path, modes: dict[str, dict[str, Any]]) -> None:
    """Write atomically (rename), as a ConfigMap update does."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"gpus": modes}))
    tmp.replace(path)


MakeDaemon = Callable[..., PluginDaemon]


@pytest.fixture
def make_daemon(short_dir: Path, sim: SimNvml, kubelet: TestKubelet) -> Iterator[MakeDaemon]:
    started: list[PluginDaemon] = []

    def make(modes: dict[str, dict[str, Any]] | None = None, **overrides: Any) -> PluginDaemon:
        config_file = short_dir / "sharing.json"
        if modes is not None:
            write_sharing(config_file, modes)
        cfg = PluginConfig(
            plugin_dir=kubelet.plugin_dir,
            config_file=config_file,
            pod_resources_socket=kubelet.pod_resources_socket,
            mps_root=short_dir / "mps",
            recovery_s=overrides.pop("recovery_s", 3.0),
            busy_grace_s=overrides.pop("busy_grace_s", 0.0),
            tick_s=0.1,
            busy_poll_s=0.2,
            **overrides,
        )
        daemon = PluginDaemon(sim, cfg)
        daemon.start()
        started.append(daemon)
        for resource in RESOURCES:
            kubelet.wait_registered(resource, timeout=10)
        return daemon

    yield make
    for daemon in started:
        daemon.stop()
