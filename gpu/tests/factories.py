"""Builders for gpu tests: nodes, GPUs, tokens and contract-shaped samples."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from gpu import services, wire
from gpu.models import Gpu, Node
from gpu.wire import Sample
from plugin.contract import GpuSample
from plugin.names import GPU_RESOURCE


def make_node(name: str = "gpu-node-0", *, gpus: int = 4) -> Node:
    # As the node watch mirrors it: the GPU count comes from what the device plugin advertises.
    resources = {GPU_RESOURCE: str(gpus)}
    return Node.objects.create(
        name=name,
        gpu_model="NVIDIA-GeForce-RTX-5090",
        gpu_count=gpus,
        labels={"type": "kwok"},
        capacity=resources,
        allocatable=resources,
    )


def make_gpus(node: Node, count: int = 4) -> list[Gpu]:
    return [
        Gpu.objects.create(node=node, index=i, uuid=f"GPU-{node.name}-{i}", memory_mib=32768)
        for i in range(count)
    ]


def node_token(node: Node) -> str:
    _, secret = services.node_token_create(node=node)
    return secret


def rfc3339(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def sample(
    uuid: str,
    ts: datetime | None = None,
    *,
    util: int = 50,
    namespace: str | None = None,
    pod: str | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    procs = []
    if namespace is not None:
        procs.append(
            {
                "pid": 4242,
                "mem_used_mib": 9000,
                "pod_uid": "u-1",
                "pod_namespace": namespace,
                "pod_name": pod or "job-x-0",
                "container": "main",
            }
        )
    body: dict[str, Any] = {
        "gpu_uuid": uuid,
        "ts": rfc3339(ts or datetime.now(UTC)),
        "util_gpu": util,
        "util_mem": util // 2,
        "mem_used_mib": 9300 if procs else 300,
        "mem_total_mib": 32768,
        "temp_c": 55.5,
        "power_w": 210.0,
        "sm_clock_mhz": 2400,
        "mem_clock_mhz": 14000,
        "ecc_sbe": 0,
        "ecc_dbe": 0,
        "xid": None,
        "processes": procs,
    }
    body.update(overrides)
    return body


def decoded(sample: dict[str, Any]) -> Sample:
    """A sample as ingest reads it."""
    return msgspec.convert(sample, GpuSample[wire.Timestamp])


def batch(node: str, samples: list[dict[str, Any]]) -> dict[str, Any]:
    return {"node": node, "agent_version": "test-1", "samples": samples}


def series(uuid: str, seconds: int, *, start: datetime | None = None, **kw: Any) -> list[dict[str, Any]]:
    start = start or datetime.now(UTC) - timedelta(seconds=seconds)
    return [sample(uuid, start + timedelta(seconds=i), **kw) for i in range(seconds)]
