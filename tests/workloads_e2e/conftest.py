"""Fixtures for the jobs tests against the real local control plane, Postgres and Redis.

Each test gets its own namespace prefix, so namespaces (and the orphan check) never mix tests.
"""

from __future__ import annotations

import os
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from django.test import override_settings

from portal.localcluster import ClusterHandle, bin_dir, run_dir
from tests.fixtures.personas import World
from workloads.k8s.client import RealKubeClient, set_client
from workloads.tests.conftest import allow_images

T = TypeVar("T")


@pytest.fixture(scope="session")
def k8s_cluster(request: pytest.FixtureRequest) -> Iterator[ClusterHandle]:
    """Reuse the cluster at $GPUPORTAL_KUBECONFIG when it answers /version, else the shared fixture.

    (The shared fixture's readiness probe parses /readyz as JSON, which is plain "ok"; this keeps
    these tests runnable against an already-started cluster until that is fixed.)
    """
    reuse = os.environ.get("GPUPORTAL_KUBECONFIG", "")
    if reuse and Path(reuse).is_file():
        from kubernetes import config

        try:
            api = config.new_client_from_config(config_file=reuse)  # type: ignore[no-untyped-call]
            RealKubeClient(api, timeout=5).get("/version")
        except Exception as exc:
            warnings.warn(f"GPUPORTAL_KUBECONFIG does not answer ({exc}); starting a cluster", stacklevel=1)
        else:
            yield ClusterHandle("external", Path(reuse), run_dir(), bin_dir())
            return
    yield request.getfixturevalue("_shared_k8s_cluster")


@pytest.fixture(scope="session")
def _shared_k8s_cluster() -> Iterator[ClusterHandle]:
    from tests.fixtures import cluster

    yield from cluster.k8s_cluster.__wrapped__()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def _nodes_reachable_by_ip(k8s_cluster: ClusterHandle) -> None:
    """pods/log dials a node's first preferred address; kwok's nodes answer on 127.0.0.1 only, so
    drop the Hostname address the local cluster tooling adds (it does not resolve here)."""
    from kubernetes import config

    api = config.new_client_from_config(config_file=str(k8s_cluster.kubeconfig))  # type: ignore[no-untyped-call]
    client = RealKubeClient(api)
    for node in (client.get("/api/v1/nodes") or {}).get("items") or []:
        addresses = node.get("status", {}).get("addresses") or []
        if any(a.get("type") == "Hostname" for a in addresses):
            keep = [a for a in addresses if a.get("type") != "Hostname"]
            client.patch(f"/api/v1/nodes/{node['metadata']['name']}/status", {"status": {"addresses": keep}})


@pytest.fixture
def kube(k8s_cluster: ClusterHandle, _nodes_reachable_by_ip: None) -> Iterator[RealKubeClient]:
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
