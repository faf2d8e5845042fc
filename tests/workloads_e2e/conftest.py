"""Fixtures for the jobs tests against the real local control plane, Postgres and Redis.

The cluster is the run-wide `k8s_cluster` of tests/fixtures/cluster.py (one cluster per session).

Each test gets its own namespace prefix, so namespaces (and the orphan check) never mix tests.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest
from django.test import override_settings

from deploy.localcluster import ClusterHandle
from deploy.localcluster.nodes import GpuNodeSpec, node_manifest, node_names
from tests.fixtures.personas import World
from tests.workloads_e2e.live_portal import portal_server  # noqa: F401 - the live daphne fixture
from tests.workloads_e2e.procs import wait_for as wait_for
from workloads.k8s import paths
from workloads.k8s.client import RealKubeClient, set_client
from workloads.tests.conftest import allow_images

T = TypeVar("T")


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


@contextlib.contextmanager
def own_gpu_nodes(kube: RealKubeClient, count: int, product: str) -> Iterator[list[str]]:
    """Kwok GPU nodes (4 GPUs each) of a GPU product nothing else asks for: a test whose jobs ask for
    that type has these nodes to itself, whatever earlier tests left running on the others. Ready,
    reachable by IP as the session's nodes are, and deleted after."""
    spec = GpuNodeSpec(gpu_product=product, name_prefix=f"{product.lower()}-")
    names = node_names(count, spec)
    for name in names:
        kube.create("/api/v1/nodes", node_manifest(name, spec))
    try:

        def ready() -> bool:
            nodes = [kube.get(f"/api/v1/nodes/{name}") or {} for name in names]
            return all(
                any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in n.get("status", {}).get("conditions") or []
                )
                for n in nodes
            )

        wait_for(ready, 120, f"{count} {product} nodes ready")
        for name in names:
            internal = [{"type": "InternalIP", "address": "127.0.0.1"}]
            kube.patch(f"/api/v1/nodes/{name}/status", {"status": {"addresses": internal}})
        yield names
    finally:
        for name in names:
            kube.delete(f"/api/v1/nodes/{name}")


@contextlib.contextmanager
def portal_kube_client(cluster: ClusterHandle, prefix: str, **settings: Any) -> Iterator[RealKubeClient]:
    """The portal's Kubernetes client for `cluster`, its namespaces under a prefix of the test's own."""
    with override_settings(
        GPUPORTAL_KUBECONFIG=str(cluster.kubeconfig), GPUPORTAL_NAMESPACE_PREFIX=prefix, **settings
    ):
        client = RealKubeClient()
        set_client(client)
        try:
            yield client
        finally:
            set_client(None)


@pytest.fixture
def kube(k8s_cluster: ClusterHandle, _nodes_reachable_by_ip: None) -> Iterator[RealKubeClient]:
    with portal_kube_client(
        k8s_cluster, f"t{uuid.uuid4().hex[:6]}-", GPUPORTAL_JOB_SIMULATION=True
    ) as client:
        yield client


@pytest.fixture
def cluster_world(world: World, kube: RealKubeClient) -> World:
    allow_images(world.alpha)
    allow_images(world.beta)
    return world


def cluster_jobs(kube: RealKubeClient, namespace: str) -> list[dict[str, Any]]:
    body = kube.get(f"/apis/batch/v1/namespaces/{namespace}/jobs")
    return list((body or {}).get("items") or [])


def drop_namespaces(kube: RealKubeClient, spaces: tuple[str, ...], timeout_s: float = 120) -> None:
    """Delete what a test left in `spaces` and wait until their pods are gone (the next test wants
    the nodes free). Jobs first: a pod of a Job that still exists keeps its job-tracking finalizer
    until it ends, which a kwok pod being deleted never does, so the wait would run out."""
    for ns in spaces:
        for job in (kube.get(paths.jobs(ns)) or {}).get("items") or []:
            kube.delete(paths.job(ns, job["metadata"]["name"]))
        for pod in (kube.get(paths.pods(ns)) or {}).get("items") or []:
            kube.delete(f"{paths.pods(ns)}/{pod['metadata']['name']}")
        kube.delete(paths.namespace(ns))

    def gone() -> bool:
        return not any(((kube.get(paths.pods(ns)) or {}).get("items") or []) for ns in spaces)

    wait_for(gone, timeout_s, "the test's pods gone")
