"""Fixtures for the jobs tests against the real local control plane, Postgres and Redis.

Each test gets its own namespace prefix, so namespaces (and the orphan check) never mix tests.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from django.test import override_settings

from portal.localcluster import ClusterHandle
from tests.fixtures.personas import World
from workloads.k8s.client import RealKubeClient, set_client
from workloads.tests.conftest import allow_images

T = TypeVar("T")


@pytest.fixture
def kube(k8s_cluster: ClusterHandle) -> Iterator[RealKubeClient]:
    prefix = f"t{uuid.uuid4().hex[:6]}-"
    with override_settings(
        GPUPORTAL_KUBECONFIG=str(k8s_cluster.kubeconfig),
        GPUPORTAL_JOB_SIMULATION=True,
        GPUPORTAL_NAMESPACE_PREFIX=prefix,
    ):
        client = RealKubeClient()
        set_client(client)
        try:
            yield client
        finally:
            set_client(None)


@pytest.fixture
def cluster_world(world: World, kube: RealKubeClient) -> World:
    allow_images(world.alpha)
    allow_images(world.beta)
    return world


def wait_for(
    probe: Callable[[], T | None], timeout: float = 60.0, what: str = "condition", every: float = 0.5
) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def cluster_jobs(kube: RealKubeClient, namespace: str) -> list[dict[str, Any]]:
    body = kube.get(f"/apis/batch/v1/namespaces/{namespace}/jobs")
    return list((body or {}).get("items") or [])
