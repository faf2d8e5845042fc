"""The telemetry contract end to end: the real node agent process (`python -m plugin.agent`, simulated
NVML) posts to the real portal ingest endpoint with a node token; the portal stores its GPUs' samples.
A token of another node is refused and the agent keeps its samples buffered."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpu import services as gpu_services
from gpu.models import Gpu, GpuSample, Node
from plugin.names import GPU_RESOURCE

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _agent(url: str, token_file: Path, node: str) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        "-m",
        "plugin.agent",
        "--backend",
        "sim",
        "--sim-gpus",
        "4",
        "--sim-seed",
        node,
        "--portal-url",
        url,
        "--token-file",
        str(token_file),
        "--node-name",
        node,
        "--interval",
        "0.5",
        "--metrics-port",
        str(_free_port()),
        "--proc-root",
        str(token_file.parent),
        "--pod-resources-socket",
        str(token_file.parent / "none.sock"),
    ]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _node(name: str, gpus: int = 4) -> Node:
    # As the node watch mirrors it: ingest never creates more GPUs than Kubernetes says the node has.
    resources = {GPU_RESOURCE: str(gpus)}
    return Node.objects.create(name=name, gpu_count=gpus, capacity=resources, allocatable=resources)


def _wait(probe: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return True
        time.sleep(0.5)
    return False


def test_the_agent_feeds_the_portal_through_the_contract(live_server: Any, tmp_path: Path) -> None:
    node = _node("gpu-node-a")
    _, secret = gpu_services.node_token_create(node=node, name="agent")
    token_file = tmp_path / "token"
    token_file.write_text(secret)
    agent = _agent(live_server.url, token_file, node.name)
    try:
        assert _wait(lambda: Gpu.objects.filter(node=node).count() == 4, 60), agent.stderr
        gpu_ids = list(Gpu.objects.filter(node=node).values_list("pk", flat=True))
        assert _wait(lambda: GpuSample.objects.filter(gpu_id__in=gpu_ids).count() >= 8, 60)
    finally:
        agent.terminate()
        agent.wait(timeout=20)
    sample = GpuSample.objects.filter(gpu_id__in=gpu_ids).order_by("-ts").first()
    assert sample is not None
    assert 0 <= sample.util_gpu <= 100
    assert sample.mem_total_mib == 32768
    assert {g.uuid[:4] for g in Gpu.objects.filter(node=node)} == {"GPU-"}


def test_another_nodes_token_is_refused_and_nothing_is_stored(live_server: Any, tmp_path: Path) -> None:
    mine = _node("gpu-node-b")
    other = _node("gpu-node-c")
    _, secret = gpu_services.node_token_create(node=other, name="agent")
    token_file = tmp_path / "token"
    token_file.write_text(secret)
    agent = _agent(live_server.url, token_file, mine.name)
    try:
        time.sleep(6)
    finally:
        agent.terminate()
        _, err = agent.communicate(timeout=20)
    assert not Gpu.objects.filter(node__in=[mine, other]).exists()
    assert b"refused the node token" in err
