"""Polling and Node manifests for the gpu cross-app tests."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from deploy.localcluster.nodes import GpuNodeSpec, node_manifest

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], timeout: float = 30.0, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def new_node(prefix: str = "gpu-e2e") -> tuple[str, dict[str, Any]]:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    return name, node_manifest(name, GpuNodeSpec())
